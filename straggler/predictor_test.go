package straggler

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
)

func TestEWMASmoothsArrivals(t *testing.T) {
	e, err := NewEWMA(0.5)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Predict(); ok {
		t.Fatal("EWMA predicts before any observation")
	}
	for i, c := range []struct{ in, want time.Duration }{{100 * ms, 100 * ms}, {200 * ms, 150 * ms}, {300 * ms, 225 * ms}} {
		e.Observe(Observation{Arrival: c.in})
		if got, _ := e.Predict(); got != c.want {
			t.Fatalf("after observation %d: %v, want %v", i, got, c.want)
		}
	}
	if _, err := NewEWMA(0); err == nil {
		t.Fatal("NewEWMA(0) accepted")
	}
}

// linearTrace returns observations whose next arrival is an exact linear
// function of the current features.
func linearTrace(n int, theta []float64, noise float64) []Observation {
	rng := rand.New(rand.NewPCG(3, 4))
	obs := make([]Observation, n)
	obs[0] = Observation{Arrival: 100 * ms, CPU: 0.8, Net: 0.3, GPU: GPUReading{Valid: true, Util: 0.9, SMClockMHz: 1400}}
	x := make([]float64, NumFeatures)
	for i := 1; i < n; i++ {
		Features(obs[i-1], x)
		y := noise * rng.NormFloat64()
		for j := range x {
			y += theta[j] * x[j]
		}
		obs[i] = Observation{
			Arrival: time.Duration(y * 1e9),
			CPU:     rng.Float64(), Net: rng.Float64(),
			GPU: GPUReading{Valid: true, Util: rng.Float64(), SMClockMHz: 1000 + 800*rng.Float64()},
		}
	}
	return obs
}

func TestRLSLearnsALinearResourceLaw(t *testing.T) {
	// a(s+1) = 0.02 + 0.5·a(s) + 0.1·CPU − 0.05·Net + 0.03·GPU + 0.01·SM(GHz)
	theta := []float64{0.02, 0.5, 0.1, -0.05, 0.03, 0.01}
	// Forgetting also forgets the ridge prior P₀, so θ converges exactly.
	obs := linearTrace(400, theta, 0)
	r, err := NewRLS(0.97, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range obs {
		r.Observe(o)
	}
	for j, c := range r.Coefficients() {
		if math.Abs(c-theta[j]) > 1e-3 {
			t.Errorf("θ[%d] = %.5f, want %.5f", j, c, theta[j])
		}
	}
	x := Features(obs[len(obs)-1], make([]float64, NumFeatures))
	want := 0.0
	for j := range x {
		want += theta[j] * x[j]
	}
	if got, _ := r.Predict(); math.Abs(got.Seconds()-want) > 1e-4 {
		t.Fatalf("prediction %v, want %.6fs", got, want)
	}
}

// With no forgetting, RLS from P₀ = p·I is exactly ridge regression with
// penalty 1/p; check it against the batch solution computed with gonum.
func TestRLSMatchesBatchRidgeRegression(t *testing.T) {
	obs := linearTrace(200, []float64{0.05, 0.3, 0.02, 0.01, -0.02, 0.004}, 0.01)
	r, err := NewRLS(1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	n := len(obs) - 1
	X := mat.NewDense(n, NumFeatures, nil)
	y := mat.NewVecDense(n, nil)
	x := make([]float64, NumFeatures)
	for i := 0; i < n; i++ {
		X.SetRow(i, Features(obs[i], x))
		y.SetVec(i, obs[i+1].Arrival.Seconds())
	}
	for _, o := range obs {
		r.Observe(o)
	}
	var A mat.Dense
	A.Mul(X.T(), X)
	for i := 0; i < NumFeatures; i++ {
		A.Set(i, i, A.At(i, i)+1/rlsInitP)
	}
	var b, want mat.VecDense
	b.MulVec(X.T(), y)
	if err := want.SolveVec(&A, &b); err != nil {
		t.Fatal(err)
	}
	for j, c := range r.Coefficients() {
		if math.Abs(c-want.AtVec(j)) > 1e-8 {
			t.Errorf("θ[%d]: RLS %.10f, batch %.10f", j, c, want.AtVec(j))
		}
	}
}

func TestRLSStaysFiniteWhenFeaturesNeverVary(t *testing.T) {
	// No GPU readings and constant CPU/net for 100k steps with strong
	// forgetting: unclipped, P would overflow after ~14k steps.
	r, err := NewRLS(0.95, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100000; i++ {
		r.Observe(Observation{Arrival: 100*ms + time.Duration(i%7)*ms, CPU: 1, Net: 0.5})
	}
	got, ok := r.Predict()
	if !ok || got < 90*ms || got > 115*ms {
		t.Fatalf("prediction %v after 100k steps, want about 100–106ms", got)
	}
	for i, p := range r.p.Data {
		if math.IsNaN(p) || math.IsInf(p, 0) || p > rlsMaxP*(1+1e-9) {
			t.Fatalf("P[%d] = %v, want finite and ≤ %v", i, p, rlsMaxP)
		}
	}
}
