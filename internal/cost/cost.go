package cost

import (
	"math"
	"time"
)

// Link is the price of messages over one link: a message of b bytes takes
// Alpha + b/BytesPerSec.
type Link struct {
	// Alpha is the per-message latency.
	Alpha time.Duration
	// BytesPerSec is the link's bandwidth (0: not known).
	BytesPerSec float64
}

// Known reports whether the link's bandwidth is known.
func (l Link) Known() bool { return l.BytesPerSec > 0 && !math.IsInf(l.BytesPerSec, 0) }

// Send is the time of one message of b bytes (Alpha alone when the
// bandwidth is not known).
func (l Link) Send(b int) time.Duration {
	if !l.Known() {
		return l.Alpha
	}
	return l.Alpha + time.Duration(float64(b)/l.BytesPerSec*1e9)
}

// Net is what the model knows of a communicator's links: a default price,
// what was measured per pair of ranks, the hosts the ranks run on and how
// the transport moves a call's messages. Every price of this package is a
// function of a Net and the call's shape, nothing else, so every rank that
// holds the same Net (agreed measurements, agreed facts) prices alike.
type Net struct {
	// Alpha and BytesPerSec price a link that Latency and Bandwidth do
	// not (BytesPerSec 0: such a link's bandwidth is not known).
	Alpha       time.Duration
	BytesPerSec float64
	// Local prices a link between two ranks of one host (shared memory)
	// when Host says so and the matrices do not (zero: the default).
	Local Link
	// Bandwidth[a][b] is the measured bandwidth from rank a to rank b in
	// bytes per second, Latency[a][b] the measured per-message latency in
	// seconds; 0 (or a matrix too small) means not measured.
	Bandwidth [][]float64
	Latency   [][]float64
	// Host[r] is rank r's host (nil: not known). Flows that leave a host
	// at once share its link: a price counts them.
	Host []int
	// Channels is the number of parallel links (streams) a call uses per
	// pair of ranks (0: 1); StreamBytesPerSec, when positive, is what one
	// stream can carry (a TCP stream that does not fill a long link), so
	// a link runs at min(its bandwidth, Channels × StreamBytesPerSec).
	Channels          int
	StreamBytesPerSec float64
	// ChunkBytes is the transport's frame: the unit of pipelined
	// algorithms (0: none set).
	ChunkBytes int
}

func at(m [][]float64, a, b int) float64 {
	if a < 0 || b < 0 || a >= len(m) || b >= len(m[a]) {
		return 0
	}
	return m[a][b]
}

// uniform reports whether every link is priced alike: no measurement,
// and no host that makes some links local.
func (n *Net) uniform() bool {
	return len(n.Bandwidth) == 0 && len(n.Latency) == 0 && (len(n.Host) == 0 || n.Local == Link{})
}

// sameHost reports whether Host places a and b on one host.
func (n *Net) sameHost(a, b int) bool {
	return a >= 0 && b >= 0 && a < len(n.Host) && b < len(n.Host) && n.Host[a] == n.Host[b]
}

// Link returns the price of the link from rank a to rank b.
func (n *Net) Link(a, b int) Link {
	l := Link{Alpha: n.Alpha, BytesPerSec: n.BytesPerSec}
	if n.sameHost(a, b) && n.Local != (Link{}) {
		l = n.Local
	}
	if v := at(n.Latency, a, b); v > 0 {
		l.Alpha = time.Duration(v * 1e9)
	}
	if v := at(n.Bandwidth, a, b); v > 0 {
		l.BytesPerSec = v
	}
	if n.StreamBytesPerSec > 0 && l.Known() {
		l.BytesPerSec = min(l.BytesPerSec, float64(max(1, n.Channels))*n.StreamBytesPerSec)
	}
	return l
}

// Slowest returns the slowest link among members: the least known
// bandwidth from a member to one listed after it, and the largest latency.
// A ring through the members runs at it (a probe's matrix is symmetric
// enough that one direction of each pair stands for both; this is the
// straggler policy's rule). Its bandwidth is 0 when no pair's is known.
func (n *Net) Slowest(members []int) Link {
	if len(members) >= 2 && n.uniform() {
		return n.Link(-1, -1) // every pair alike: no need to visit k² of them
	}
	var worst Link
	bw := math.Inf(1)
	for i, a := range members {
		for _, b := range members[i+1:] {
			l := n.Link(a, b)
			worst.Alpha = max(worst.Alpha, l.Alpha)
			if l.Known() {
				bw = min(bw, l.BytesPerSec)
			}
		}
	}
	if !math.IsInf(bw, 1) {
		worst.BytesPerSec = bw
	}
	return worst
}

// Ring is the time of a ring allreduce of bytes bytes among members
// (ring.AllReduce): reduce-scatter and allgather, 2(k−1) steps, each a
// message of bytes/k over the slowest link. It is 0 when no member's link
// has a known bandwidth (the model cannot say) or there is one member.
// The straggler policy prices its members' ring with it (Bandwidth only),
// the simulator its uniform network's (Link.Ring).
func (n *Net) Ring(members []int, bytes int) time.Duration {
	if len(members) <= 1 {
		return 0
	}
	return n.Slowest(members).Ring(len(members), bytes)
}

// Ring is the time of a ring allreduce of bytes bytes among k ranks whose
// slowest link is l: 2(k−1) messages of bytes/k. It is 0 for one rank or
// when l's bandwidth is not known. Net.Ring prices the ring of its
// members with it; the simulator, whose links are all alike, prices every
// ring with it.
func (l Link) Ring(k, bytes int) time.Duration {
	if k <= 1 || !l.Known() {
		return 0
	}
	return time.Duration(2*(k-1)) * l.Send(bytes/k)
}

// RingOrder is the time of a ring allreduce of bytes bytes around order
// (ring.AllReduce, one ring per channel): like Ring, but over the ring's
// own links, each slowed by the flows that share its host's link (a ring
// that leaves a host twice carries two flows over its link each way).
// Unknown links are priced by the defaults; 0 if none is known.
func (n *Net) RingOrder(order []int, bytes int) time.Duration {
	k := len(order)
	if k <= 1 {
		return 0
	}
	return time.Duration(2*(k-1)) * n.ringStep(order, bytes/k)
}

// ringStep is the time of one ring step around order in which every rank
// sends msg bytes to the next: the slowest link's, its bandwidth divided
// among the ring's flows out of its host.
func (n *Net) ringStep(order []int, msg int) time.Duration {
	k := len(order)
	out := n.flowsOut(order)
	var step time.Duration
	for i, a := range order {
		b := order[(i+1)%k]
		l := n.Link(a, b)
		if !l.Known() {
			continue
		}
		if !n.sameHost(a, b) && len(n.Host) > a && a >= 0 {
			l.BytesPerSec /= float64(max(1, out[n.Host[a]]))
		}
		step = max(step, l.Send(msg))
	}
	return step
}

// flowsOut counts, per host, the ring's links that leave it.
func (n *Net) flowsOut(order []int) map[int]int {
	if n.Host == nil {
		return nil
	}
	out := map[int]int{}
	for i, a := range order {
		b := order[(i+1)%len(order)]
		if a >= 0 && a < len(n.Host) && !n.sameHost(a, b) {
			out[n.Host[a]]++
		}
	}
	return out
}

// Pieces is the time of ring.AllReducePieces: the ring over consecutive
// pieces of at most piece bytes, one after the other. The model sees only
// the latency it adds (each piece pays the ring's 2(k−1) messages); what
// pieces gain on shared memory, reading each piece from memory once, is
// the caches', which only measurement sees (algo.Tuner).
func (n *Net) Pieces(order []int, bytes, piece int) time.Duration {
	if piece <= 0 || bytes <= piece {
		return n.RingOrder(order, bytes)
	}
	full := bytes / piece
	t := time.Duration(full) * n.RingOrder(order, piece)
	if rest := bytes - full*piece; rest > 0 {
		t += n.RingOrder(order, rest)
	}
	return t
}

// Doubling is the time of recursive doubling (tree.AllReduce) of bytes
// bytes among members: log2(p) exchanges of the whole buffer among the
// largest power of two p ≤ k, and two more messages for the others.
func (n *Net) Doubling(members []int, bytes int) time.Duration {
	k := len(members)
	if k <= 1 {
		return 0
	}
	p, rounds := 1, 0
	for p*2 <= k {
		p *= 2
		rounds++
	}
	if p < k {
		rounds += 2
	}
	l := n.Slowest(members)
	return time.Duration(rounds) * l.Send(bytes)
}
