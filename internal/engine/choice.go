package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/topology"
)

// announceKey groups calls for --log-level info: a collective, a size
// class (the power of two of its bytes), the world's or a subgroup's.
type announceKey struct {
	collective wire.Collective
	class      int
	plain      bool
}

// announce logs, at info level, the program a call runs and why, when it
// differs from the one last announced for calls like it: once per change,
// not per call (it is called when a program is built, which the caches
// make rare).
func (e *Engine) announce(c *Call, ch algo.Choice, p *plan.Program) {
	if c.Spec.Collective == wire.PointToPoint {
		return // a send is a send
	}
	if e.announced == nil || len(e.announced) >= 1024 {
		e.announced = map[announceKey]string{}
	}
	bytes := c.Spec.Bytes()
	k := announceKey{collective: c.Spec.Collective, class: bits.Len(uint(max(bytes, 0))), plain: isPlain(c)}
	if e.announced[k] == p.Algorithm {
		return
	}
	e.announced[k] = p.Algorithm
	path := "queued"
	if p.Fast {
		path = "fastbox"
	}
	if e.planner.SetProgramSkipped(&c.Spec, ch) {
		// A program set by the configuration that does not apply to this
		// size: said at warn (shown by default), once per size class.
		e.s.Logger.Warn().Int("rank", e.s.Rank).Int("bytes", bytes).Str("program", p.Algorithm).Str("why", e.planner.Reason(&c.Spec, ch)).
			Msgf("ringtail: RINGTAIL_ALGORITHM=%v does not apply to an AllReduce of %d B; it runs %s (set auto to let ringtail choose)", e.forced, bytes, p.Algorithm)
		return
	}
	e.s.Logger.Info().Str("collective", c.Spec.Collective.String()).Int("bytes", bytes).Str("program", p.Algorithm).
		Str("path", path).Str("why", e.planner.Reason(&c.Spec, ch)).Msg("program chosen")
}

// Link probe sizes: each pair of hosts exchanges probeRepeats small
// messages (latency: half the round trip) and probeRepeats large ones
// (bandwidth) over one stream, and as many of up to probeStreamBytes per
// stream split over every stream, keeping the medians (a stream's share
// must be large enough to fill its window on a long round trip). Each
// large transfer is sized to take about probeTarget (and at least
// probeRTTs round trips) at the bandwidth measured so far on that link,
// between probeMin and those ceilings: a fast link gets the ceilings,
// while a slow one is measured in a fraction of their time (at 200 Mbit/s
// the ceilings took 0.63 s a pair, ~1.9 s for four hosts, all of it
// counted in the first collective of a training run).
const (
	probeSmall       = 8
	probeLarge       = 1 << 20
	probeStreamBytes = 512 << 10
	probeRepeats     = 3
	probeMin         = 256 << 10
	probeTarget      = 35 * time.Millisecond
	probeRTTs        = 20
)

// probeLinksLocked measures the links between hosts for the decision
// point (a collective: every rank takes part, at the same call, when the
// Planner asks): the lowest rank of each host meets every other host's in
// a round-robin tournament, measuring latency and bandwidth; a Max
// allreduce shares the measurements, so every rank hands the Planner the
// same matrices. Ranks of one host share its link, so one pair of ranks
// measures a pair of hosts; links within a host are left to the defaults
// (shared memory).
func (e *Engine) probeLinksLocked(ctx context.Context) error {
	host := e.planner.Facts().Host
	n := e.s.WorldSize
	lead := []int{} // the lowest rank of each host, by host index
	for r, h := range host {
		if h == len(lead) {
			lead = append(lead, r)
		}
	}
	nh := len(lead)
	shared := make([]float64, 3*nh*nh) // latency, bandwidth over every stream, over one stream: host by host
	start := time.Now()
	if me := host[e.s.Rank]; lead[me] == e.s.Rank {
		for _, other := range topology.Tournament(nh, me) {
			if other < 0 {
				continue
			}
			lat, bw, one, err := e.probePairLocked(ctx, lead[other], me < other)
			if err != nil {
				return fmt.Errorf("ringtail: rank %d: measuring the link to rank %d: %w", e.s.Rank, lead[other], err)
			}
			if me < other {
				for _, ij := range [][2]int{{me, other}, {other, me}} {
					shared[ij[0]*nh+ij[1]] = lat
					shared[nh*nh+ij[0]*nh+ij[1]] = bw
					shared[2*nh*nh+ij[0]*nh+ij[1]] = one
				}
			}
		}
	}
	buf := make([]byte, 8*len(shared))
	for i, v := range shared {
		binary.NativeEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	agree := &Call{Spec: algo.Spec{Collective: wire.AllReduce, Count: len(shared), ElemSize: 8}, DType: reduce.Float64, Op: reduce.Max, Data: buf}
	if err := e.execLocked(ctx, agree, algo.Choice{}, nil); err != nil {
		return err
	}
	for i := range shared {
		shared[i] = math.Float64frombits(binary.NativeEndian.Uint64(buf[8*i:]))
	}
	lat, bw := make([][]float64, n), make([][]float64, n)
	for a := range n {
		lat[a], bw[a] = make([]float64, n), make([]float64, n)
		for b := range n {
			if ha, hb := host[a], host[b]; ha != hb {
				lat[a][b], bw[a][b] = shared[ha*nh+hb], shared[nh*nh+ha*nh+hb]
			}
		}
	}
	// One stream limits the links where every stream at once carried
	// clearly more: the model then caps a link at channels × the slowest
	// pair's single stream.
	stream := 0.0
	var links []string
	for i := range nh {
		for j := i + 1; j < nh; j++ {
			all, one := shared[nh*nh+i*nh+j], shared[2*nh*nh+i*nh+j]
			if e.streams > 1 && all > streamGain*one && (stream == 0 || one < stream) {
				stream = one
			}
			links = append(links, fmt.Sprintf("%d-%d %.3g MB/s (one stream %.3g) %.3g µs", i, j, all/1e6, one/1e6, shared[i*nh+j]*1e6))
		}
	}
	e.planner.Measured(bw, lat, stream)
	e.s.Logger.Info().Int("hosts", nh).Dur("took", time.Since(start)).Str("links", strings.Join(links, ", ")).
		Msg("measured the links between hosts")
	return nil
}

// streamGain is how much more every stream at once must carry than one
// for the links to count as stream-limited.
const streamGain = 1.25

// probePairLocked measures the link to peer: as the leader (lead), it
// times small echoes, then large sends answered by a byte, over one
// stream and split over every stream at once, and returns the latency
// (seconds) and the bandwidth over all streams and over one (bytes per
// second); otherwise it answers them. The leader sizes each large send
// (probeBytes) and tells the other side its size first, in an 8-byte
// header.
func (e *Engine) probePairLocked(ctx context.Context, peer int, lead bool) (lat, bw, one float64, err error) {
	small, header, ack := make([]byte, probeSmall), make([]byte, 8), make([]byte, 1)
	large := make([]byte, max(probeLarge, e.streams*probeStreamBytes))
	p2p := func(b []byte, send bool, streams int) error {
		c := &Call{Spec: algo.Spec{Collective: wire.PointToPoint, Count: len(b), ElemSize: 1, Peer: peer, Send: send}, DType: reduce.Uint8, Data: b}
		return e.execLocked(ctx, c, algo.Choice{Channels: streams}, nil)
	}
	ways, ceilings := []int{1}, []int{probeLarge}
	if e.streams > 1 {
		ways, ceilings = append(ways, e.streams), append(ceilings, len(large))
	}
	// One echo first, unmeasured: the other side may still be measuring
	// another link, and the wait is not this link's latency.
	for _, send := range []bool{lead, !lead} {
		if err := p2p(small, send, 1); err != nil {
			return 0, 0, 0, err
		}
	}
	if !lead {
		for range probeRepeats {
			if err := p2p(small, false, 1); err != nil {
				return 0, 0, 0, err
			}
			if err := p2p(small, true, 1); err != nil {
				return 0, 0, 0, err
			}
			for _, w := range ways {
				if err := p2p(header, false, 1); err != nil {
					return 0, 0, 0, err
				}
				size := binary.LittleEndian.Uint64(header)
				if size == 0 || size > uint64(len(large)) {
					return 0, 0, 0, fmt.Errorf("probe of %d bytes from rank %d: want 1 to %d", size, peer, len(large))
				}
				if err := p2p(large[:size], false, w); err != nil {
					return 0, 0, 0, err
				}
				if err := p2p(ack, true, 1); err != nil {
					return 0, 0, 0, err
				}
			}
		}
		return 0, 0, 0, nil
	}
	lats := []float64{}
	rates := make([][]float64, len(ways)) // bytes per second, each repeat
	best := 0.0                           // the highest rate measured so far
	for range probeRepeats {
		t0 := time.Now()
		if err := p2p(small, true, 1); err != nil {
			return 0, 0, 0, err
		}
		if err := p2p(small, false, 1); err != nil {
			return 0, 0, 0, err
		}
		lats = append(lats, time.Since(t0).Seconds()/2)
		for i, w := range ways {
			size := probeBytes(best, slices.Min(lats), ceilings[i])
			binary.LittleEndian.PutUint64(header, uint64(size))
			if err := p2p(header, true, 1); err != nil {
				return 0, 0, 0, err
			}
			t1 := time.Now()
			if err := p2p(large[:size], true, w); err != nil {
				return 0, 0, 0, err
			}
			if err := p2p(ack, false, 1); err != nil {
				return 0, 0, 0, err
			}
			rate := float64(size) / max(time.Since(t1).Seconds()-slices.Min(lats), 1e-9) // less the ack's way back
			rates[i] = append(rates[i], rate)
			best = max(best, rate)
		}
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	return median(lats), median(rates[len(rates)-1]), median(rates[0]), nil
}

// probeBytes sizes a probe's large send: what takes probeTarget, or
// probeRTTs round trips if longer, at rate bytes/s over a link of one-way
// latency lat seconds, between probeMin and ceiling; ceiling while nothing
// is measured yet (rate 0).
func probeBytes(rate, lat float64, ceiling int) int {
	if rate <= 0 {
		return ceiling
	}
	want := rate * max(probeTarget.Seconds(), probeRTTs*2*lat)
	return int(min(float64(ceiling), max(probeMin, want)))
}
