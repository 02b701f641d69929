package gradcode

import (
	"fmt"
	"testing"
)

// The class bound is an upper bound: on clusters small enough to enumerate
// every straggler set, no decode amplifies more than the certified bound.
func TestClassBoundCoversEveryStragglerSet(t *testing.T) {
	rng := newRand(31)
	for _, cfg := range []Config{
		{Scheme: Cyclic, N: 13, S: 3}, // one extra colour
		{Scheme: Cyclic, N: 11, S: 3}, // two extra colours
		{Scheme: Cyclic, N: 14, S: 4}, // two extra colours
		{Scheme: Hetero, N: 12, S: 3, Throughputs: randomThroughputs(12, rng)},
		{Scheme: Group, N: 12, S: 3, K: 12, Throughputs: []float64{2, 1, 1, 2, 2, 1, 1, 1, 3, 3, 3, 4}},
	} {
		t.Run(fmt.Sprintf("%s/n=%d/s=%d", cfg.Scheme, cfg.N, cfg.S), func(t *testing.T) {
			p, err := NewPlan(cfg)
			if err != nil {
				t.Fatal(err)
			}
			q := p.Quality
			if !q.BoundCertified || !(q.AmplificationBound > 0) {
				t.Fatalf("small plan should have a certified bound, quality %+v", q)
			}
			worst := 0.0
			forEachSubset(p.N, p.S, func(st []int) {
				a, err := p.Decode(complement(p.N, st))
				if err != nil {
					t.Fatalf("stragglers %v: %v", st, err)
				}
				amp := amplification(a, p.B, p.K)
				worst = max(worst, amp)
				if amp > q.AmplificationBound*(1+1e-9) {
					t.Fatalf("stragglers %v amplify %.6g > certified bound %.6g", st, amp, q.AmplificationBound)
				}
			})
			if worst != q.MaxAmplification {
				t.Fatalf("exhaustive quality says max amp %v, enumeration %v", q.MaxAmplification, worst)
			}
		})
	}
}

// With one extra colour the ramp palette keeps B in [−1, 1] and the decoding
// coefficients within 2s (docs/gradcode.md).
func TestRampPaletteBounds(t *testing.T) {
	for _, c := range [][2]int{{5, 1}, {10, 2}, {13, 3}, {21, 4}, {31, 6}, {40, 8}} {
		p, err := NewPlan(Config{Scheme: Cyclic, N: c[0], S: c[1]})
		if err != nil {
			t.Fatal(err)
		}
		if _, count := blockColouring(c[0], c[1]); count != c[1]+2 {
			t.Fatalf("n=%d s=%d: want exactly one extra colour, got %d colours", c[0], c[1], count)
		}
		q := p.Quality
		if q.MaxAbsB > 1 || q.MaxAbsDecode > float64(2*c[1])+1e-9 {
			t.Fatalf("n=%d s=%d: max|B| %v, max|a| %v, want ≤ 1 and ≤ %d", c[0], c[1], q.MaxAbsB, q.MaxAbsDecode, 2*c[1])
		}
	}
}
