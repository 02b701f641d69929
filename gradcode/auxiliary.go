package gradcode

import (
	"fmt"
	"math"
	"math/rand"

	"gonum.org/v1/gonum/mat"
)

// Lemma 2 of the heterogeneity-aware paper builds B from an auxiliary matrix
// H ∈ R^{(s+1)×n} and a vector v: column j of B, restricted to the s+1
// holders W_j of partition j, is H_{W_j}⁻¹·v. Then H·B = v·1ᵀ, and for any
// straggler set S a vector x with xᵀH_S = 0 and xᵀv ≠ 0 yields the decoding
// vector a = (xᵀH)/(xᵀv), which vanishes on S. The paper uses v = 1 and needs
//
//	(P1) every H_{W_j} invertible, and
//	(P2) v outside the span of any s columns of H.
//
// Group members (Alg. 3) get unit columns of their own, so their coefficients
// are exactly 1; the remaining d = s+1−g coordinates hold the auxiliary
// matrix proper, which is what auxiliary describes.

// maxWindowCond rejects auxiliary matrices with a worse-conditioned window.
const maxWindowCond = 1e10

// auxiliary is the non-group part of a Lemma-2 auxiliary matrix.
type auxiliary struct {
	dim  int         // d = s+1 − number of groups
	cols [][]float64 // per worker: its column in R^d; nil for group members and idle workers
	v    []float64   // the right-hand side, length d
}

// auxiliaryB builds B (n×k) from aux: group members (inGroup) get coefficient
// 1 on every partition they hold; for each partition the d other holders solve
// H_W·b = v. It returns B and the largest 2-norm condition number of the d×d
// systems solved.
func auxiliaryB(n, k int, hold [][]int, inGroup []bool, aux auxiliary) ([][]float64, float64, error) {
	b := make([][]float64, n)
	for i := range b {
		b[i] = make([]float64, k)
	}
	d := aux.dim
	worst := 1.0
	a := mat.NewDense(max(d, 1), max(d, 1), nil)
	rhs := mat.NewVecDense(max(d, 1), nil)
	var x mat.VecDense
	left := make([]int, 0, d)
	for j, hs := range hold {
		left = left[:0]
		for _, w := range hs {
			if inGroup[w] {
				b[w][j] = 1
			} else {
				left = append(left, w)
			}
		}
		if len(left) != d {
			return nil, 0, fmt.Errorf("%w: partition %d has %d non-group holders, want %d", ErrInvalidConfig, j, len(left), d)
		}
		if d == 0 {
			continue
		}
		for c, w := range left {
			col := aux.cols[w]
			if len(col) != d {
				return nil, 0, fmt.Errorf("%w: worker %d has no auxiliary column", ErrInvalidConfig, w)
			}
			for r := 0; r < d; r++ {
				a.Set(r, c, col[r])
			}
		}
		cond := mat.Cond(a, 2)
		if !(cond < maxWindowCond) {
			return nil, 0, fmt.Errorf("%w: auxiliary window of partition %d has condition number %.3g", ErrNotDecodable, j, cond)
		}
		worst = math.Max(worst, cond)
		for r := 0; r < d; r++ {
			rhs.SetVec(r, aux.v[r])
		}
		if err := x.SolveVec(a, rhs); err != nil {
			return nil, 0, fmt.Errorf("%w: auxiliary window of partition %d: %w", ErrNotDecodable, j, err)
		}
		for c, w := range left {
			b[w][j] = x.AtVec(c)
		}
	}
	return b, worst, nil
}

// paletteAuxiliary is the structured auxiliary matrix: a worker of colour
// c < d gets the unit vector e_c, a worker of colour d+l gets extras[l], and
// v = 1. With colours proper, a window's matrix is a permutation of unit
// vectors plus at most e extra columns, so (P1) and (P2) reduce to small
// minors of [1 | extras].
func paletteAuxiliary(n, d int, colours []int, extras [][]float64) auxiliary {
	aux := auxiliary{dim: d, cols: make([][]float64, n), v: make([]float64, d)}
	for r := range aux.v {
		aux.v[r] = 1
	}
	for w, c := range colours {
		switch {
		case c == noColour:
		case c < d:
			aux.cols[w] = make([]float64, d)
			aux.cols[w][c] = 1
		default:
			aux.cols[w] = extras[c-d]
		}
	}
	return aux
}

// designExtras returns e extra palette vectors in R^d for candidate number
// try. The first is the deterministic ramp w_m = 1 + m/(d−1): with a single
// extra colour every window solve has coefficients in (−1, 1] and Lemma 2's
// closed-form decode has |a_i| ≤ 2s (docs/gradcode.md). Further extras are
// random — Gaussian for even tries, uniform in [−1, 1) for odd ones; NewPlan
// draws several candidates and keeps the one with the smallest class bound.
func designExtras(d, e, try int, rng *rand.Rand) [][]float64 {
	out := make([][]float64, e)
	for l := range out {
		out[l] = make([]float64, d)
		for m := range out[l] {
			switch {
			case l == 0 && d == 1:
				out[l][m] = 2
			case l == 0:
				out[l][m] = 1 + float64(m)/float64(d-1)
			case try%2 == 0:
				out[l][m] = rng.NormFloat64()
			default:
				out[l][m] = 2*rng.Float64() - 1
			}
		}
	}
	return out
}

// randomAuxiliary is Lemma 3's construction: every entry of the auxiliary
// matrix uniform in [0, 1), v = 1. Only workers in members get columns.
func randomAuxiliary(n, d int, members []int, rng *rand.Rand) auxiliary {
	aux := auxiliary{dim: d, cols: make([][]float64, n), v: make([]float64, d)}
	for r := range aux.v {
		aux.v[r] = 1
	}
	for _, w := range members {
		aux.cols[w] = make([]float64, d)
		for r := range aux.cols[w] {
			aux.cols[w][r] = rng.Float64()
		}
	}
	return aux
}
