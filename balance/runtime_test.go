package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// CHRONICA §V-A (Fig. 4): with performance indicators (3, 3) a sample of
// size 49 has ETT 3·49+3 = 150 s; on a rank with (5, 2) it is 247 s.
func TestChronicaFig4_ETTRecalculation(t *testing.T) {
	if got := (LinearModel{A: 3, B: 3}).Predict(49); got != 150 {
		t.Fatalf("ETT on (3,3) = %v, want 150", got)
	}
	if got := (LinearModel{A: 5, B: 2}).Predict(49); got != 247 {
		t.Fatalf("ETT on (5,2) = %v, want 247", got)
	}
}

// gonumLeastSquares solves min ||[s 1]·[a b]ᵀ − t|| with gonum's QR.
func gonumLeastSquares(t *testing.T, obs []Observation) (float64, float64) {
	t.Helper()
	A := mat.NewDense(len(obs), 2, nil)
	y := mat.NewVecDense(len(obs), nil)
	for i, o := range obs {
		A.Set(i, 0, o.Size)
		A.Set(i, 1, 1)
		y.SetVec(i, o.Seconds)
	}
	var x mat.VecDense
	if err := x.SolveVec(A, y); err != nil {
		t.Fatal(err)
	}
	return x.AtVec(0), x.AtVec(1)
}

func TestFitRuntime_MatchesGonumWhenUnconstrainedIsNonNegative(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	checked := 0
	for trial := range 200 {
		a, b := 0.01+rng.Float64(), 5*rng.Float64()
		obs := make([]Observation, 3+rng.IntN(30))
		for i := range obs {
			s := 1 + 100*rng.Float64()
			obs[i] = Observation{Size: s, Seconds: a*s + b + 0.3*(rng.Float64()-0.5)}
		}
		ga, gb := gonumLeastSquares(t, obs)
		if ga < 0 || gb < 0 {
			continue
		}
		checked++
		m, err := FitRuntime(obs)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m.A-ga) > 1e-9*(1+math.Abs(ga)) || math.Abs(m.B-gb) > 1e-8*(1+math.Abs(gb)) {
			t.Fatalf("trial %d: FitRuntime = %+v, gonum = (%v, %v)", trial, m, ga, gb)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d instances had a non-negative unconstrained fit", checked)
	}
}

// When the unconstrained fit has a negative coefficient, FitRuntime must
// return the best non-negative pair: no point of a fine grid around it (all
// with a, b ≥ 0) may have a smaller residual.
func TestFitRuntime_IsOptimalUnderNonNegativity(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for trial := range 100 {
		obs := make([]Observation, 2+rng.IntN(10))
		for i := range obs {
			s := 10 * rng.Float64()
			// Decreasing or large-intercept data pushes one coefficient below 0.
			obs[i] = Observation{Size: s, Seconds: math.Max(0, 5-0.5*s+rng.Float64())}
			if trial%2 == 1 {
				obs[i].Seconds = 0.2*s + rng.Float64()*0.1
				obs[i].Size = 50 + s
			}
		}
		m, err := FitRuntime(obs)
		if err != nil {
			t.Fatal(err)
		}
		if m.A < 0 || m.B < 0 {
			t.Fatalf("trial %d: negative coefficients %+v", trial, m)
		}
		best := sse(obs, m)
		for i := 0; i <= 60; i++ {
			for j := 0; j <= 60; j++ {
				c := LinearModel{A: math.Max(0, m.A+float64(i-30)*0.01), B: math.Max(0, m.B+float64(j-30)*0.05)}
				if e := sse(obs, c); e < best-1e-9 {
					t.Fatalf("trial %d: %+v has SSE %v < FitRuntime's %+v with %v", trial, c, e, m, best)
				}
			}
		}
	}
}

func TestFitRuntime_RecoversExactLineAndHandlesDegenerateSizes(t *testing.T) {
	obs := []Observation{{10, 25}, {20, 45}, {40, 85}}
	m, err := FitRuntime(obs)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.A-2) > 1e-12 || math.Abs(m.B-5) > 1e-12 {
		t.Fatalf("fit %+v, want a=2 b=5", m)
	}
	// All steps the same size: slope and intercept are not identifiable;
	// the proportional model must reproduce the observed time.
	m, err = FitRuntime([]Observation{{8, 4}, {8, 4.2}, {8, 3.8}})
	if err != nil {
		t.Fatal(err)
	}
	if m.B != 0 || math.Abs(m.Predict(8)-4) > 1e-12 {
		t.Fatalf("equal-size fit %+v, want b=0 and prediction 4 at size 8", m)
	}
	if _, err := FitRuntime(nil); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("no observations: err = %v", err)
	}
	if _, err := FitRuntime([]Observation{{-1, 2}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("negative size: err = %v", err)
	}
}
