package straggler

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

func arrivalsMs(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(ms))
	}
	return out
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// STAR §IV-C, Eq. 3, worked by hand: N = 4, M = 128 (M/N = 32), φ = 64,
// predicted arrivals 100, 100, 100, 300 ms, collective C = 50 ms, so
// t_ring = 100 + 50 = 150 ms.
//
//	ring  (x=0, t_w = 300−100 = 200 ms): (1 + 64/(4·32))·(0.150+0.200) = 1.5·0.35     = 0.525
//	evict (x=1, t_w = 0, q = 0):         (1 + 64/(3·32))·(0.150+0)     = (5/3)·0.15   = 0.250
//	evict (x=1, t_w = 150 ms, q = 0):    (5/3)·0.300                                  = 0.500
//	evict (x=1, t_w = 250 ms, q = 1):    (1 + 64/(4·32))·0.400          = 1.5·0.4      = 0.600
//
// Evicting rank 3 without waiting for it wins.
func TestSTAREq3EvictingTheStragglerWorkedExample(t *testing.T) {
	ch, err := ChooseMode(ModeInput{
		Arrivals: arrivalsMs(100, 100, 100, 300), Collective: 50 * ms,
		Phi: 64, GlobalBatch: 128, Threshold: 0.2, MaxEvict: 2,
		WaitCandidates: []time.Duration{250 * ms, 150 * ms},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		x, q int
		wait time.Duration
		cost float64
	}{{0, 0, 200 * ms, 0.525}, {1, 0, 0, 0.25}, {1, 0, 150 * ms, 0.5}, {1, 1, 250 * ms, 0.6}}
	if len(ch.Candidates) != len(want) {
		t.Fatalf("weighed %d candidates %+v, want %d", len(ch.Candidates), ch.Candidates, len(want))
	}
	for i, w := range want {
		c := ch.Candidates[i]
		if c.Evict != w.x || c.InTime != w.q || c.Wait != w.wait || !approx(c.Cost, w.cost) || c.RingTime != 150*ms {
			t.Errorf("candidate %d = %+v, want x=%d q=%d t_w=%v T_a=%v t_ring=150ms", i, c, w.x, w.q, w.wait, w.cost)
		}
	}
	if ch.Mode != ModeEvict || !slices.Equal(ch.Evicted, []int{3}) || ch.Wait != 0 || ch.Deadline != 100*ms || !approx(ch.Cost, 0.25) {
		t.Fatalf("choice %+v, want evict [3] with t_w=0, deadline 100ms, T_a=0.25", ch)
	}
	if !slices.Equal(ch.Stragglers, []int{3}) {
		t.Fatalf("stragglers %v, want [3]", ch.Stragglers)
	}
}

// Same formula, a mild straggler and a large noise scale: N = 4, M = 128,
// φ = 1024, arrivals 100, 100, 100, 130 ms (130 > 1.2·100: a straggler),
// C = 50 ms.
//
//	ring  (x=0, t_w = 30 ms): (1 + 1024/128)·0.180 = 9·0.18        = 1.62
//	evict (x=1, t_w = 0):     (1 + 1024/96)·0.150  = (35/3)·0.15   = 1.75
//
// Losing a quarter of the batch costs more updates than 30 ms saves: ring.
func TestSTAREq3LargeNoiseScaleKeepsTheRingWorkedExample(t *testing.T) {
	ch, err := ChooseMode(ModeInput{Arrivals: arrivalsMs(100, 100, 100, 130), Collective: 50 * ms,
		Phi: 1024, GlobalBatch: 128, Threshold: 0.2, MaxEvict: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Candidates) != 2 || !approx(ch.Candidates[0].Cost, 1.62) || !approx(ch.Candidates[1].Cost, 1.75) {
		t.Fatalf("candidates %+v, want T_a 1.62 (ring) and 1.75 (evict)", ch.Candidates)
	}
	if ch.Mode != ModeRing || ch.Evicted != nil || ch.Wait != 30*ms || ch.Deadline != 130*ms {
		t.Fatalf("choice %+v, want the ring with t_w = max−min = 30ms", ch)
	}
}

// With x = 0 Eq. 3 is the plain ring's time per unit progress:
// (1 + φ/M)·(max arrival + C).
func TestBSPIsEq3WithNoEviction(t *testing.T) {
	in := ModeInput{Arrivals: arrivalsMs(80, 95, 90, 85), Collective: 10 * ms, Phi: 300, GlobalBatch: 64, Threshold: 0.2, MaxEvict: 3}
	ch, err := ChooseMode(in)
	if err != nil {
		t.Fatal(err)
	}
	want := (1 + 300.0/64) * (0.095 + 0.010)
	if ch.Mode != ModeRing || len(ch.Stragglers) != 0 || len(ch.Candidates) != 1 || !approx(ch.Cost, want) {
		t.Fatalf("choice %+v, want only the ring with T_a=%v", ch, want)
	}
}

func TestEqualCostsNeverEvict(t *testing.T) {
	// Evicting rank 2 and waiting for it exactly as long as the ring would
	// costs the same as the ring, (1+φ/M)·1.2 s; evicting it without
	// waiting costs (1+1.5·φ/M)·1.1 s, more. The tie must go to the ring.
	ch, err := ChooseMode(ModeInput{Arrivals: arrivalsMs(100, 100, 200), Collective: time.Second, Phi: 1000, GlobalBatch: 3,
		Threshold: 0.2, MaxEvict: 1, WaitCandidates: []time.Duration{100 * ms}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Candidates) != 3 || ch.Candidates[2].Cost != ch.Candidates[0].Cost || ch.Mode != ModeRing {
		t.Fatalf("choice %+v, want the ring on a tie", ch)
	}
}

func TestChooseModeRejectsBadInput(t *testing.T) {
	for _, in := range []ModeInput{
		{},
		{Arrivals: arrivalsMs(1), GlobalBatch: 0},
		{Arrivals: arrivalsMs(1), GlobalBatch: 1, Phi: -1},
		{Arrivals: arrivalsMs(1), GlobalBatch: 1, Phi: math.NaN()},
	} {
		if _, err := ChooseMode(in); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ChooseMode(%+v) = %v, want ErrInvalidConfig", in, err)
		}
	}
}

// bruteForceCost tries every subset of the stragglers as the evicted set,
// with every admissible wait, and returns the least T_a.
func bruteForceCost(in ModeInput) float64 {
	n := len(in.Arrivals)
	amin := slices.Min(in.Arrivals)
	var stragglers []int
	for r, a := range in.Arrivals {
		if float64(a) > (1+in.Threshold)*float64(amin) {
			stragglers = append(stragglers, r)
		}
	}
	best := math.Inf(1)
	for mask := 0; mask < 1<<len(stragglers); mask++ {
		evicted := map[int]bool{}
		for i, r := range stragglers {
			if mask&(1<<i) != 0 {
				evicted[r] = true
			}
		}
		x := len(evicted)
		if x > in.MaxEvict || x > n-1 {
			continue
		}
		spread := time.Duration(0)
		for r, a := range in.Arrivals {
			if !evicted[r] {
				spread = max(spread, a-amin)
			}
		}
		waits := []time.Duration{spread}
		if x > 0 {
			for _, w := range in.WaitCandidates {
				if w > spread {
					waits = append(waits, w)
				}
			}
		}
		for _, w := range waits {
			q := 0
			for r := range evicted {
				if in.Arrivals[r]-amin <= w {
					q++
				}
			}
			cost := (1 + in.Phi/(float64(n-x+q)*float64(in.GlobalBatch)/float64(n))) * (amin + in.Collective + w).Seconds()
			best = math.Min(best, cost)
		}
	}
	return best
}

func TestChooseModeMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 0))
	for trial := 0; trial < 2000; trial++ {
		n := 2 + rng.IntN(7)
		arr := make([]time.Duration, n)
		for i := range arr {
			arr[i] = time.Duration(50+rng.IntN(300)) * ms
		}
		var waits []time.Duration
		for k := rng.IntN(4); k > 0; k-- {
			waits = append(waits, time.Duration(1+rng.IntN(300))*ms)
		}
		in := ModeInput{Arrivals: arr, Collective: time.Duration(rng.IntN(50)) * ms, Phi: math.Exp(rng.Float64() * 8),
			GlobalBatch: 8 * n, Threshold: 0.2, MaxEvict: rng.IntN(n + 1), WaitCandidates: waits}
		ch, err := ChooseMode(in)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteForceCost(in); !approx(ch.Cost, want) {
			t.Fatalf("trial %d: %+v chose T_a=%v, exhaustive search finds %v", trial, in, ch.Cost, want)
		}
		for _, r := range ch.Evicted {
			if !slices.Contains(ch.Stragglers, r) {
				t.Fatalf("trial %d: evicted %d is not a predicted straggler %v", trial, r, ch.Stragglers)
			}
		}
	}
}
