package gradcode

import (
	"fmt"
	"math"
	"math/rand"

	"gonum.org/v1/gonum/mat"
)

// Tandon et al.'s cyclic construction (Algorithm 2 of "Gradient Coding"):
// draw H ∈ R^{s×n} with H·1 = 0; row i of B is supported on {i, …, i+s} mod n,
// has B[i][i] = 1, and lies in the null space of H:
//
//	B[i][i+1…i+s] = −H[:, i+1…i+s]⁻¹ · H[:, i].
//
// The rows then span null(H), which holds 1, and any n−s of them are
// independent (with probability 1), so any n−s survivors decode.

// tandonB computes B from H and returns the largest condition number of the
// s×s systems solved.
func tandonB(n, s int, h *mat.Dense) ([][]float64, float64, error) {
	b := make([][]float64, n)
	for i := range b {
		b[i] = make([]float64, n)
		b[i][i] = 1
	}
	if s == 0 {
		return b, 1, nil
	}
	worst := 1.0
	a := mat.NewDense(s, s, nil)
	rhs := mat.NewVecDense(s, nil)
	var x mat.VecDense
	for i := 0; i < n; i++ {
		for r := 0; r < s; r++ {
			for t := 1; t <= s; t++ {
				a.Set(r, t-1, h.At(r, (i+t)%n))
			}
			rhs.SetVec(r, -h.At(r, i))
		}
		cond := mat.Cond(a, 2)
		if !(cond < maxWindowCond) {
			return nil, 0, fmt.Errorf("%w: H columns %d…%d are (nearly) dependent, condition number %.3g", ErrInvalidConfig, (i+1)%n, (i+s)%n, cond)
		}
		worst = math.Max(worst, cond)
		if err := x.SolveVec(a, rhs); err != nil {
			return nil, 0, fmt.Errorf("%w: H columns %d…%d: %w", ErrInvalidConfig, (i+1)%n, (i+s)%n, err)
		}
		for t := 1; t <= s; t++ {
			b[i][(i+t)%n] = x.AtVec(t - 1)
		}
	}
	return b, worst, nil
}

// randomTandonH draws Tandon's H: Gaussian entries, last column set so that
// every row sums to zero.
func randomTandonH(n, s int, rng *rand.Rand) *mat.Dense {
	h := mat.NewDense(s, n, nil)
	for r := 0; r < s; r++ {
		sum := 0.0
		for j := 0; j < n-1; j++ {
			x := rng.NormFloat64()
			h.Set(r, j, x)
			sum += x
		}
		h.Set(r, n-1, -sum)
	}
	return h
}
