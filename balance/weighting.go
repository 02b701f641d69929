package balance

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// CombineGradients is CHRONICA's learning-rate compensator (Eq. 7, Alg. 4):
// it returns Σ_j λ_j·g_j / Σ_j λ_j, weighting each rank's gradient by the
// amount of data λ_j it was computed on.
//
// If each rank's g_j is the mean of per-sample gradients over its local
// samples and λ_j is its sample count, the result is exactly the mean
// gradient of the whole global batch — what a single process would compute
// — whereas the plain average (1/M)·Σ g_j of Eq. 3 over-weights the samples
// of ranks that got few of them. The learning rate is applied by the
// caller. Ranks with λ_j = 0 contribute nothing (their gradient may be
// empty or zero).
func CombineGradients(grads [][]float64, amounts []float64) ([]float64, error) {
	if len(grads) != len(amounts) {
		return nil, fmt.Errorf("%w: %d gradients but %d amounts", ErrInvalidInput, len(grads), len(amounts))
	}
	total, dim := 0.0, -1
	for j, a := range amounts {
		if !(a >= 0) || math.IsInf(a, 0) {
			return nil, fmt.Errorf("%w: rank %d amount %v must be finite and non-negative", ErrInvalidInput, j, a)
		}
		if a == 0 {
			continue
		}
		if dim >= 0 && len(grads[j]) != dim {
			return nil, fmt.Errorf("%w: rank %d gradient has %d entries, want %d", ErrInvalidInput, j, len(grads[j]), dim)
		}
		dim = len(grads[j])
		total += a
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: no rank trained on any data", ErrInvalidInput)
	}
	out := make([]float64, dim)
	for j, a := range amounts {
		if a > 0 {
			floats.AddScaled(out, a/total, grads[j])
		}
	}
	return out, nil
}
