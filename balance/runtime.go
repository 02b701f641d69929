package balance

import (
	"fmt"
	"math"
)

// LinearModel is CHRONICA's per-rank runtime model t = A·size + B (Eq. 6):
// A is seconds per unit of data size, B a fixed per-step cost in seconds.
// Both are non-negative.
type LinearModel struct {
	// A is the marginal time per unit of size (seconds/unit).
	A float64
	// B is the fixed time per step (seconds).
	B float64
}

// Predict returns the estimated training time (ETT) A·size + B.
func (m LinearModel) Predict(size float64) float64 { return m.A*size + m.B }

// Validate reports a model with negative or non-finite coefficients.
func (m LinearModel) Validate() error {
	if !(m.A >= 0) || !(m.B >= 0) || math.IsInf(m.A, 0) || math.IsInf(m.B, 0) {
		return fmt.Errorf("%w: runtime model a=%v b=%v must be finite and non-negative", ErrInvalidInput, m.A, m.B)
	}
	return nil
}

// Observation is one feedback record of CHRONICA's runtime prophet: a rank
// processed data of total Size in Seconds.
type Observation struct {
	// Size is the total size of the data the rank trained on in the step.
	Size float64
	// Seconds is the measured training time of that step.
	Seconds float64
}

// FitRuntime fits t = a·size + b with a, b ≥ 0 by non-negative least
// squares (CHRONICA Alg. 1, with the sign constraint a regression on noisy
// feedback needs: a negative slope or intercept would let the packer assign
// "free" work).
//
// With two parameters NNLS is solved exactly by the active-set enumeration:
// the unconstrained least-squares solution if it is non-negative, otherwise
// the better of the two boundary fits (a = 0: b = mean t; b = 0:
// a = Σ s·t / Σ s²), each clamped at zero. When every observation has the
// same size the slope and intercept cannot be told apart; the fit then
// returns the proportional model (b = 0), which extrapolates to other sizes
// the way compute-bound steps do.
func FitRuntime(obs []Observation) (LinearModel, error) {
	if len(obs) == 0 {
		return LinearModel{}, fmt.Errorf("%w: no observations", ErrInvalidInput)
	}
	n := float64(len(obs))
	var sx, sy float64
	for i, o := range obs {
		if !(o.Size >= 0) || !(o.Seconds >= 0) || math.IsInf(o.Size, 0) || math.IsInf(o.Seconds, 0) {
			return LinearModel{}, fmt.Errorf("%w: observation %d (size %v, seconds %v) must be finite and non-negative", ErrInvalidInput, i, o.Size, o.Seconds)
		}
		sx += o.Size
		sy += o.Seconds
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, sx2, sxt float64
	for _, o := range obs {
		dx := o.Size - mx
		sxx += dx * dx
		sxy += dx * (o.Seconds - my)
		sx2 += o.Size * o.Size
		sxt += o.Size * o.Seconds
	}
	proportional := LinearModel{}
	if sx2 > 0 {
		proportional.A = math.Max(0, sxt/sx2)
	}
	if sxx <= 1e-12*sx2 { // all sizes (numerically) equal
		if sx2 == 0 {
			return LinearModel{B: my}, nil
		}
		return proportional, nil
	}
	a := sxy / sxx
	b := my - a*mx
	if a >= 0 && b >= 0 {
		return LinearModel{A: a, B: b}, nil
	}
	intercept := LinearModel{B: math.Max(0, my)}
	if sse(obs, proportional) <= sse(obs, intercept) {
		return proportional, nil
	}
	return intercept, nil
}

// sse is the residual sum of squares of m on obs.
func sse(obs []Observation, m LinearModel) float64 {
	s := 0.0
	for _, o := range obs {
		r := m.Predict(o.Size) - o.Seconds
		s += r * r
	}
	return s
}
