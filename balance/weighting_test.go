package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// CHRONICA §V-D: one rank trained 10 samples, the other 600. With Eq. 7
// every sample's gradient carries the same weight 1/610
// (10/610 · 1/10 = 600/610 · 1/600 = 1/610). Rank 0's samples all have
// gradient e0 and rank 1's all e1, so the rank means are e0 and e1 and the
// combination's coordinates divided by the sample counts are the
// per-sample weights.
func TestChronicaSecVD_EverySampleWeighsOneOver610(t *testing.T) {
	got, err := CombineGradients([][]float64{{1, 0}, {0, 1}}, []float64{10, 600})
	if err != nil {
		t.Fatal(err)
	}
	if w0, w1 := got[0]/10, got[1]/600; math.Abs(w0-1.0/610) > 1e-15 || math.Abs(w1-1.0/610) > 1e-15 {
		t.Fatalf("per-sample weights %v and %v, want 1/610 each", w0, w1)
	}
}

// linearGrad is the gradient of ½(w·x − y)² with respect to w.
func linearGrad(w, x []float64, y float64) []float64 {
	pred := 0.0
	for i := range w {
		pred += w[i] * x[i]
	}
	g := make([]float64, len(w))
	for i := range w {
		g[i] = (pred - y) * x[i]
	}
	return g
}

func meanGrad(w []float64, xs [][]float64, ys []float64) []float64 {
	g := make([]float64, len(w))
	for k := range xs {
		for i, v := range linearGrad(w, xs[k], ys[k]) {
			g[i] += v
		}
	}
	for i := range g {
		g[i] /= float64(len(xs))
	}
	return g
}

// A global batch of 64 samples on a linear model, split unevenly over 4
// ranks (as size-aware packing does): Eq. 7 with λ_j = local sample count
// equals the single-process mean gradient; the plain average of Eq. 3
// does not.
func TestCombineGradients_EqualsSingleProcessMeanGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 1))
	const dim, n = 5, 64
	w := make([]float64, dim)
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	xs, ys := make([][]float64, n), make([]float64, n)
	for k := range xs {
		xs[k] = make([]float64, dim)
		for i := range xs[k] {
			xs[k][i] = rng.NormFloat64()
		}
		ys[k] = 3*xs[k][0] - xs[k][2] + 0.1*rng.NormFloat64()
	}
	reference := meanGrad(w, xs, ys)

	cuts := []int{0, 3, 10, 40, 64} // 3, 7, 30, 24 samples
	var grads [][]float64
	var amounts []float64
	plain := make([]float64, dim)
	for j := 0; j+1 < len(cuts); j++ {
		g := meanGrad(w, xs[cuts[j]:cuts[j+1]], ys[cuts[j]:cuts[j+1]])
		grads = append(grads, g)
		amounts = append(amounts, float64(cuts[j+1]-cuts[j]))
		for i := range plain {
			plain[i] += g[i] / 4
		}
	}
	got, err := CombineGradients(grads, amounts)
	if err != nil {
		t.Fatal(err)
	}
	diffPlain := 0.0
	for i := range got {
		if math.Abs(got[i]-reference[i]) > 1e-12*(1+math.Abs(reference[i])) {
			t.Fatalf("Eq. 7 gradient %v differs from single-process %v", got, reference)
		}
		diffPlain = math.Max(diffPlain, math.Abs(plain[i]-reference[i]))
	}
	if diffPlain < 1e-3 {
		t.Fatalf("plain average within %v of the reference: the split is not uneven enough to make the test meaningful", diffPlain)
	}
}

func TestCombineGradients_RejectsBadInput(t *testing.T) {
	if _, err := CombineGradients([][]float64{{1}}, []float64{1, 2}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("length mismatch: %v", err)
	}
	if _, err := CombineGradients([][]float64{{1}, {1, 2}}, []float64{1, 2}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("dimension mismatch: %v", err)
	}
	if _, err := CombineGradients([][]float64{{1}}, []float64{0}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("no data: %v", err)
	}
	got, err := CombineGradients([][]float64{nil, {2, 4}}, []float64{0, 3})
	if err != nil || got[0] != 2 || got[1] != 4 {
		t.Fatalf("idle rank must be ignored: %v %v", got, err)
	}
}
