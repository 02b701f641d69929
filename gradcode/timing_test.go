package gradcode

import (
	"errors"
	"math"
	"testing"
)

// Theorem 5: T* = (s+1)·k / Σ c_i when no worker's share exceeds k.
func TestOptimalComputeTimeTheorem5(t *testing.T) {
	c := []float64{1, 1, 2, 2, 4, 4}
	got, err := OptimalComputeTime(c, 2, 14)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.0 * 14 / 14; math.Abs(got-want) > 1e-12 {
		t.Fatalf("T* = %v, want %v", got, want)
	}
	// Every worker of the Alg. 1 plan is then busy exactly T*.
	p, err := NewPlan(Config{Scheme: Hetero, N: 6, S: 2, K: 14, Throughputs: c})
	if err != nil {
		t.Fatal(err)
	}
	ft, err := p.FinishTimes(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range ft {
		if math.Abs(x-got) > 1e-12 {
			t.Fatalf("worker %d busy %v, want T* = %v", i, x, got)
		}
	}
}

// A worker faster than the rest together is capped at k partitions; the bound
// water-fills the remainder over the others.
func TestOptimalComputeTimeCapsFastWorkers(t *testing.T) {
	// k = 10, s = 1: 20 copies. Worker 0 (c = 100) can take only 10; the
	// other three (c = 1 each) share 10 → T = 10/3.
	got, err := OptimalComputeTime([]float64{100, 1, 1, 1}, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := 10.0 / 3; math.Abs(got-want) > 1e-12 {
		t.Fatalf("T* = %v, want %v", got, want)
	}
	// Naive check by bisection on Σ min(c_i·T, k) = (s+1)·k.
	c := []float64{9, 5, 3, 1, 0.5}
	s, k := 2, 7
	lo, hi := 0.0, 100.0
	for it := 0; it < 200; it++ {
		mid := (lo + hi) / 2
		sum := 0.0
		for _, x := range c {
			sum += math.Min(x*mid, float64(k))
		}
		if sum >= float64((s+1)*k) {
			hi = mid
		} else {
			lo = mid
		}
	}
	got, err = OptimalComputeTime(c, s, k)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-hi) > 1e-9 {
		t.Fatalf("T* = %v, bisection %v", got, hi)
	}
	if _, err := OptimalComputeTime([]float64{1, 1}, 2, 4); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("s ≥ n: got %v", err)
	}
}

// On a heterogeneous cluster the cyclic scheme waits for slow workers with a
// full share; Alg. 1 finishes at T* when nobody straggles, and with
// stragglers the iteration ends when the fastest decodable set is done.
func TestIterationTimeComparesSchemes(t *testing.T) {
	c := []float64{1, 1, 2, 2, 4, 4}
	cyc, err := NewPlan(Config{Scheme: Cyclic, N: 6, S: 2})
	if err != nil {
		t.Fatal(err)
	}
	het, err := NewPlan(Config{Scheme: Hetero, N: 6, S: 2, K: 14, Throughputs: c})
	if err != nil {
		t.Fatal(err)
	}
	// Cyclic: k = 6, 3 partitions each; times 3,3,1.5,1.5,.75,.75 in units of
	// the 6-partition data set; the 4th finisher is a c = 2 worker at 1.5.
	tc, err := IterationTime(cyc, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(tc-1.5) > 1e-12 {
		t.Fatalf("cyclic iteration %v, want 1.5", tc)
	}
	// Per-data-set time: cyclic 1.5 for k = 6 → 0.25 per partition of data;
	// hetero T* = 3 for k = 14 → 3/14 ≈ 0.214.
	th, err := IterationTime(het, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(th-3) > 1e-12 {
		t.Fatalf("hetero iteration %v, want T* = 3", th)
	}
	if th/14 >= tc/6 {
		t.Fatalf("hetero (%v per partition) should beat cyclic (%v)", th/14, tc/6)
	}
	// Two full stragglers: still decodable, no slower than T*.
	ts, err := IterationTime(het, c, []int{4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(ts-3) > 1e-12 {
		t.Fatalf("hetero with stragglers 4,5: %v, want 3", ts)
	}
	if _, err := IterationTime(het, c, []int{3, 4, 5}); !errors.Is(err, ErrNotDecodable) { // 12 copies left for 14 partitions
		t.Fatalf("stragglers 3,4,5: got %v", err)
	}
}

// The group scheme finishes when its fastest whole group is done, before n−s
// workers have finished when the throughput estimate is off.
func TestIterationTimeGroupFinishesEarly(t *testing.T) {
	// Six equal workers planned with s = 1 (groups of three); at run time
	// workers 3, 4, 5 run twice as fast as estimated.
	p, err := NewPlan(Config{Scheme: Group, N: 6, S: 1, K: 6})
	if err != nil {
		t.Fatal(err)
	}
	actual := []float64{1, 1, 1, 2, 2, 2}
	got, err := IterationTime(p, actual, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The fast trio is a set of three distinct lap positions iff it is an
	// exact cover; {3,4,5} holds {0,1},{2,3},{4,5}: it decodes at time 1.
	if math.Abs(got-1) > 1e-12 {
		t.Fatalf("group iteration %v, want 1 (fast trio done)", got)
	}
	// Without early decoding one would wait for the 5th finisher at time 2.
	ft, _ := p.FinishTimes(actual, nil)
	if ft[0] != 2 {
		t.Fatalf("slow worker finishes at %v, want 2", ft[0])
	}
}
