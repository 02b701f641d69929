package cost_test

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
)

func ranks(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = i
	}
	return out
}

// The model's ring and late-rank prices are the ones the simulator had
// before it priced with the model (simRing and simLate, sim/sim.go at
// 7c6e546), to the nanosecond, on a uniform network and over a bed whose
// hosts hold one rank each, where every link is alike too: the simulator
// decides exactly as before.
func TestRingAndLatePricesAreTheSimulators(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 2000 {
		alpha, bps := time.Duration(rng.Intn(100_000)), math.Pow(10, 6+4*rng.Float64())
		k, b := 1+rng.Intn(64), rng.Intn(1<<28)
		if rng.Intn(10) == 0 {
			b = rng.Intn(100)
		}
		uniform := cost.Net{Alpha: alpha, BytesPerSec: bps}
		hosts := bed(k, 1, bps)
		hosts.Alpha = alpha
		early, late := time.Duration(rng.Intn(1e9)), time.Duration(rng.Intn(1e9))
		for _, model := range []cost.Net{uniform, hosts} {
			if got, want := model.Ring(ranks(k), b), simRing(alpha, bps, k, b); got != want {
				t.Fatalf("%+v: ring of %d bytes over %d ranks: model %v, sim %v", model, b, k, got, want)
			}
			if got, want := model.Late(ranks(k), k-1, b, early, late), simLate(alpha, bps, k, b, early, late); got != want {
				t.Fatalf("%+v: late allreduce of %d bytes over %d ranks: model %v, sim %v", model, b, k, got, want)
			}
		}
	}
}

// simSend, simRing and simLate are sim.Network's prices at 7c6e546.
func simSend(alpha time.Duration, bps float64, b int) time.Duration {
	return alpha + time.Duration(float64(b)/bps*1e9)
}

func simRing(alpha time.Duration, bps float64, k, b int) time.Duration {
	if k <= 1 {
		return 0
	}
	return time.Duration(2*(k-1)) * simSend(alpha, bps, b/k)
}

func simLate(alpha time.Duration, bps float64, k, b int, early, late time.Duration) time.Duration {
	if k <= 2 {
		return max(early, late) + simRing(alpha, bps, k, b)
	}
	m := k - 1
	seg := (b + m - 1) / m
	unit := min(max((seg+15)/16, 64<<10), 256<<10)
	u := max(1, (seg+unit-1)/unit)
	unit = (seg + u - 1) / u
	rs := time.Duration((m-1)*u) * simSend(alpha, bps, unit)
	return max(late, early+rs) + time.Duration(u*m+2*m-2)*simSend(alpha, bps, unit)
}

// policyRing is straggler.Policy's link model at 7c6e546
// (straggler/policy.go, collective's model): 2(k−1)/k of the gradient over
// the slowest measured link among the members, 0 without one.
func policyRing(bw [][]float64, gradBytes int, ms []int) float64 {
	if bw == nil || gradBytes == 0 || len(ms) < 2 {
		return 0
	}
	minBW := math.Inf(1)
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			if v := bw[a][b]; v > 0 {
				minBW = math.Min(minBW, v)
			}
		}
	}
	if math.IsInf(minBW, 1) {
		return 0
	}
	return 2 * float64(len(ms)-1) / float64(len(ms)) * float64(gradBytes) / minBW * 1e9
}

// policyLateUnits is straggler's lateUnits at 7c6e546.
func policyLateUnits(gradBytes, n int) int {
	if gradBytes <= 0 || n < 2 {
		return 0
	}
	seg := (gradBytes + n - 2) / (n - 1)
	unit := min(max((seg+15)/16, 64<<10), 256<<10)
	return max(1, (seg+unit-1)/unit)
}

// On a measured matrix with unmeasured pairs and no latency, the model's
// ring is the straggler policy's link model (to the rounding of bytes/k
// to whole bytes and of each message to whole nanoseconds), 0 where the
// policy's is, and its late units are the policy's.
func TestRingPriceIsThePolicysLinkModel(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for range 2000 {
		n := 2 + rng.Intn(16)
		bw := make([][]float64, n)
		for i := range bw {
			bw[i] = make([]float64, n)
			for j := range bw[i] {
				if i != j && rng.Intn(4) > 0 {
					bw[i][j] = math.Pow(10, 6+4*rng.Float64())
				}
			}
		}
		members := rng.Perm(n)[:1+rng.Intn(n)]
		grad := rng.Intn(1 << 28)
		want := policyRing(bw, grad, members)
		model := cost.Net{Bandwidth: bw}
		got := float64(model.Ring(members, grad))
		tol := want*float64(len(members))/float64(max(grad, 1)) + float64(2*len(members)) // bytes/k drops under k bytes
		if want == 0 && grad > 0 && got != 0 || math.Abs(got-want) > tol {
			t.Fatalf("members %v, %d bytes: model %v ns, policy %v ns", members, grad, got, want)
		}
		if got, want := cost.LateUnits(grad, n), policyLateUnits(grad, n); got != want {
			t.Fatalf("%d bytes over %d ranks: %d late units, the policy counts %d", grad, n, got, want)
		}
	}
}

// bed is the network of the test bed's benchmarks: hosts with links of
// bytesPerSec each way (50 µs per message), shared memory within a host.
func bed(hosts, perHost int, bytesPerSec float64) cost.Net {
	host := make([]int, hosts*perHost)
	for r := range host {
		host[r] = r / perHost
	}
	return cost.Net{Alpha: 50 * time.Microsecond, BytesPerSec: bytesPerSec, Host: host,
		Local: cost.Link{Alpha: 5 * time.Microsecond, BytesPerSec: 4e9}}
}

// Two hosts of two ranks at 1 Gbit/s: the flat ring pushes 1.5× the buffer
// through each host's link, the two-level allreduce 1×; the model sees it
// (within the intra-host phases' cost).
func TestTwoLevelBeatsTheRingAcrossHosts(t *testing.T) {
	const bytes = 64 << 20
	for _, tc := range []struct {
		hosts, per int
		gain       float64 // the link bound: flat ring's bytes over two-level's
	}{{2, 2, 1.5}, {4, 2, 1.75 / 1.5}, {2, 4, 1.75}} {
		net := bed(tc.hosts, tc.per, 125e6)
		hosts := make([][]int, tc.hosts)
		for r := range tc.hosts * tc.per {
			hosts[r/tc.per] = append(hosts[r/tc.per], r)
		}
		ring, two := net.RingOrder(ranks(tc.hosts*tc.per), bytes), net.TwoLevel(hosts, bytes)
		if gain := float64(ring) / float64(two); gain < 0.9*tc.gain || gain > tc.gain {
			t.Fatalf("%d×%d: ring %v, two-level %v: %.2f×, want about %.2f×", tc.hosts, tc.per, ring, two, gain, tc.gain)
		}
	}
	// Round-robin placement: a rank-order ring leaves every host twice.
	net := bed(2, 2, 125e6)
	net.Host = []int{0, 1, 0, 1}
	if twice, once := net.RingOrder([]int{0, 1, 2, 3}, bytes), net.RingOrder([]int{0, 2, 1, 3}, bytes); float64(twice) < 1.9*float64(once) {
		t.Fatalf("ring leaving each host twice %v, once %v: want about 2×", twice, once)
	}
}

// One rank behind a link at 1/5 of the others': the ring runs at it, 2(n−1)/n
// of the buffer over it; offloading the rank moves the buffer once each way
// over it, overlapped. With every link alike the offload gains nothing.
func TestOffloadPricesTheSlowLink(t *testing.T) {
	const bytes = 64 << 20
	net := bed(4, 1, 125e6)
	net.Bandwidth = [][]float64{{0, 125e6, 125e6, 25e6}, {125e6, 0, 125e6, 25e6}, {125e6, 125e6, 0, 25e6}, {25e6, 25e6, 25e6, 0}}
	order := ranks(4)
	ring := net.RingOrder(order, bytes)
	rounds, off := net.OffloadRounds(order, 3, bytes, 256)
	if gain := float64(ring) / float64(off); gain < 1.35 || gain > 1.5 {
		t.Fatalf("slow rank 3: ring %v, offload %v in %d rounds: %.2f×, want 1.35–1.5× (the bound)", ring, off, rounds, gain)
	}
	if _, other := net.OffloadRounds(order, 1, bytes, 256); other < ring {
		t.Fatalf("offloading a fast rank prices %v, below the ring's %v", other, ring)
	}
	uniform := bed(4, 1, 125e6)
	if _, u := uniform.OffloadRounds(order, 3, bytes, 256); u < uniform.RingOrder(order, bytes) {
		t.Fatalf("uniform links: offload %v below the ring %v", u, uniform.RingOrder(order, bytes))
	}
}

// Streams: a link that one stream cannot fill runs at channels × the
// stream's rate, up to the link's.
func TestChannelsFillALinkOneStreamCannot(t *testing.T) {
	net := cost.Net{BytesPerSec: 1e9, StreamBytesPerSec: 3e8}
	one := net.Ring(ranks(4), 1<<26)
	net.Channels = 2
	two := net.Ring(ranks(4), 1<<26)
	net.Channels = 8
	eight := net.Ring(ranks(4), 1<<26)
	if r := float64(one) / float64(two); math.Abs(r-2) > 0.01 {
		t.Fatalf("two streams: %.2f× one's speed, want 2×", r)
	}
	if r := float64(one) / float64(eight); math.Abs(r-1e9/3e8) > 0.01 {
		t.Fatalf("eight streams: %.2f× one's speed, want the link's %.2f×", r, 1e9/3e8)
	}
}

// The leader's fold: arrivals payloads in, one at a time at the slowest
// inbound link's price, then a sum out to every other member in turn.
func TestLeaderFoldPricesTheLeadersLink(t *testing.T) {
	ms := time.Millisecond
	uniform := cost.Net{Alpha: ms, BytesPerSec: 1e6}
	// 3 payloads of 1000 bytes (2 ms each), 4 sums of 2000 bytes (3 ms each).
	if got := uniform.LeaderFold(0, ranks(5), 3, 1000, 2000); got != 3*2*ms+4*3*ms {
		t.Errorf("uniform fold = %v, want 18ms", got)
	}
	if got := uniform.LeaderFold(0, ranks(1), 0, 1000, 2000); got != 0 {
		t.Errorf("one member's fold = %v, want 0", got)
	}
	// Rank 2's link to the leader at a tenth of the bandwidth: every
	// payload is priced at it (which ranks arrive first is not known).
	bw := [][]float64{{0, 1e6, 1e6}, {1e6, 0, 1e6}, {1e5, 1e6, 0}}
	measured := cost.Net{Alpha: ms, BytesPerSec: 1e6, Bandwidth: bw}
	if got, want := measured.LeaderFold(0, ranks(3), 2, 1000, 2000), 2*(ms+10*ms)+2*3*ms; got != want {
		t.Errorf("measured fold = %v, want %v", got, want)
	}
}
