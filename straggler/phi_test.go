package straggler

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Synthetic data-parallel gradients with a known noise scale: D
// coordinates, true gradient G with |G|² = 1, per-sample noise of variance
// σ² per coordinate, so tr(Σ) = D·σ² and φ = D·σ²/|G|².
func TestGNSEstimatorRecoversAKnownNoiseScale(t *testing.T) {
	const dims, ranks, perRank = 400, 8, 32
	for _, want := range []float64{50, 500} {
		sigma := math.Sqrt(want / dims)
		rng := rand.New(rand.NewPCG(uint64(want), 1))
		e, err := NewGNSEstimator(0.05)
		if err != nil {
			t.Fatal(err)
		}
		g := 1 / math.Sqrt(dims)
		local := make([]float64, dims)
		global := make([]float64, dims)
		for step := 0; step < 400; step++ {
			clear(global)
			smallSq := 0.0
			for k := 0; k < ranks; k++ {
				sq := 0.0
				for d := range local {
					// mean of perRank samples: G + N(0, σ²/perRank)
					local[d] = g + sigma/math.Sqrt(perRank)*rng.NormFloat64()
					sq += local[d] * local[d]
					global[d] += local[d] / ranks
				}
				smallSq += sq / ranks
			}
			bigSq := 0.0
			for _, v := range global {
				bigSq += v * v
			}
			if err := e.Observe(smallSq, perRank, bigSq, ranks*perRank); err != nil {
				t.Fatal(err)
			}
		}
		got, ok := e.Phi()
		if !ok || math.Abs(got-want) > 0.1*want {
			t.Errorf("φ estimate %.1f (ok=%v), want %.0f ± 10%%", got, ok, want)
		}
		t.Logf("true φ %.0f, estimate %.1f", want, got)
	}
}

func TestGNSEstimatorRejectsInconsistentBatches(t *testing.T) {
	e, _ := NewGNSEstimator(0.1)
	if _, ok := e.Phi(); ok {
		t.Fatal("φ defined before any data")
	}
	for _, c := range [][4]float64{{1, 8, 1, 8}, {1, 0, 1, 8}, {-1, 8, 1, 64}, {1, 8, math.Inf(1), 64}} {
		if err := e.Observe(c[0], int(c[1]), c[2], int(c[3])); err == nil {
			t.Errorf("Observe(%v) accepted", c)
		}
	}
}
