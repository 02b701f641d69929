package gradcode

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// Decoding: given the survivors F, find a with a_i = 0 outside F and
// Σ_i a_i·B[i] = 1ᵀ. Lemma 2 gives one such a in closed form, but when the
// rows of B_F are dependent (structured plans have many equal colour classes)
// the solution is not unique, and the one that matters is the one that
// amplifies payload rounding the least. Decode therefore takes the weighted
// minimum-norm solution
//
//	minimise Σ_i (‖B_i‖₂·a_i)²  subject to  B_Fᵀ·a = 1,
//
// computed in float64 with a rank-revealing complete orthogonal decomposition
// (pivoted QR, then LQ), so rank-deficient B_F is fine. ‖B_i‖₂·|a_i| is, up to the unit round-off, the rounding error that
// payload i contributes to the decoded sum; the objective is the variance of
// the decoded error under independent rounding. When the survivors contain a
// whole group the 0/1 indicator of the first such group is used instead.

// decodeResidualTol is the largest |(B_Fᵀa − 1)_j| accepted as a solution.
const decodeResidualTol = 1e-8

// svdRankTol is the relative threshold on the pivoted-QR diagonal below which
// the decode solve treats B_F as rank deficient.
const svdRankTol = 1e-12

// decodeStats describes one decode solve.
type decodeStats struct {
	cond     float64 // σ_max/σ_min over the singular values kept
	residual float64 // max_j |Σ_i a_i B[i][j] − 1|
	group    bool    // decoded with a group indicator
}

// Decode returns the decoding vector for the given survivors: one coefficient
// per rank (all n of them), 0 for ranks not in survivors, such that
// Σ_i a_i·payload_i is the gradient sum. Survivors may come in any order and
// may number more than n−s. If they contain a whole group of p.Groups the
// 0/1 indicator of the first such group is returned. Errors wrap ErrBadRanks
// or ErrNotDecodable.
func (p *Plan) Decode(survivors []int) ([]float64, error) {
	a, _, err := p.decode(survivors)
	return a, err
}

// Decodable reports whether the ranks that have arrived so far can decode the
// gradient sum: they contain a whole group, or the decode solve succeeds. A
// list with out-of-range or repeated ranks is not decodable.
func (p *Plan) Decodable(arrived []int) bool {
	_, _, err := p.decode(arrived)
	return err == nil
}

// checkRanks rejects out-of-range or repeated ranks.
func checkRanks(n int, ranks []int) error {
	seen := make([]bool, n)
	for _, r := range ranks {
		if r < 0 || r >= n {
			return fmt.Errorf("%w: rank %d out of range [0, %d)", ErrBadRanks, r, n)
		}
		if seen[r] {
			return fmt.Errorf("%w: rank %d listed twice", ErrBadRanks, r)
		}
		seen[r] = true
	}
	return nil
}

// decode validates survivors and returns the decoding vector with its stats.
func (p *Plan) decode(survivors []int) ([]float64, decodeStats, error) {
	if err := checkRanks(p.N, survivors); err != nil {
		return nil, decodeStats{}, err
	}
	alive := make([]bool, p.N)
	for _, r := range survivors {
		alive[r] = true
	}
	for _, g := range p.Groups {
		whole := true
		for _, w := range g {
			whole = whole && alive[w]
		}
		if whole {
			a := make([]float64, p.N)
			for _, w := range g {
				a[w] = 1
			}
			return a, decodeStats{cond: 1, group: true}, nil
		}
	}
	return minNormDecode(p.B, p.K, alive)
}

// minNormDecode solves min Σ(‖B_i‖·a_i)² s.t. Σ_{alive i} a_i B[i] = 1ᵀ.
// With M = B_Fᵀ·diag(1/‖B_i‖) (k×m) it finds the minimum-norm y with M·y = 1
// by a column-pivoted QR of M (rank-revealing) followed, when M is rank
// deficient, by an LQ factorisation of the leading rows of R — the complete
// orthogonal decomposition, as LAPACK's xGELSY does — and returns a = y/‖B_i‖.
func minNormDecode(b [][]float64, k int, alive []bool) ([]float64, decodeStats, error) {
	n := len(b)
	var rows []int
	var weight []float64
	covered := make([]bool, k)
	for i := 0; i < n; i++ {
		if !alive[i] {
			continue
		}
		w := 0.0
		for j, x := range b[i] {
			w += x * x
			if x != 0 {
				covered[j] = true
			}
		}
		if w > 0 {
			rows = append(rows, i)
			weight = append(weight, math.Sqrt(w))
		}
	}
	for j, c := range covered {
		if !c {
			return nil, decodeStats{}, fmt.Errorf("%w: no survivor holds partition %d", ErrNotDecodable, j)
		}
	}
	m := len(rows)
	a := make([]float64, n)
	if k == 0 || m == 0 {
		return a, decodeStats{cond: 1}, nil
	}
	y, cond := minNormOnes(k, m, func(j, c int) float64 { return b[rows[c]][j] / weight[c] })
	biggest := 0.0
	for c, i := range rows {
		a[i] = y[c] / weight[c]
		biggest = math.Max(biggest, math.Abs(a[i]))
	}
	for i, x := range a { // round-off dust: those payloads are not needed
		if math.Abs(x) <= 1e-13*biggest {
			a[i] = 0
		}
	}
	st := decodeStats{cond: cond}
	for j := 0; j < k; j++ {
		sum := 0.0
		for _, i := range rows {
			sum += a[i] * b[i][j]
		}
		st.residual = math.Max(st.residual, math.Abs(sum-1))
	}
	if !(st.residual <= decodeResidualTol) {
		return nil, st, fmt.Errorf("%w: best decode misses 1ᵀ by %.3g", ErrNotDecodable, st.residual)
	}
	return a, st, nil
}

// minNormOnes returns the minimum-norm least-squares solution y of M·y = 1
// for the k×m matrix with entries at(j, c), and the condition estimate
// |R₀₀|/|R_rr| of its pivoted QR (r the numerical rank).
func minNormOnes(k, m int, at func(j, c int) float64) ([]float64, float64) {
	mt := blas64.General{Rows: k, Cols: m, Stride: m, Data: make([]float64, k*m)}
	for j := 0; j < k; j++ {
		for c := 0; c < m; c++ {
			mt.Data[j*m+c] = at(j, c)
		}
	}
	jpvt := make([]int, m)
	for i := range jpvt {
		jpvt[i] = -1
	}
	tau := make([]float64, min(k, m))
	work := make([]float64, 1)
	lapack64.Geqp3(mt, jpvt, tau, work, -1)
	work = make([]float64, max(int(work[0]), 3*m+1, k, m))
	lapack64.Geqp3(mt, jpvt, tau, work, len(work))

	r0 := math.Abs(mt.Data[0])
	rank := 0
	for i := 0; i < min(k, m); i++ {
		if math.Abs(mt.Data[i*m+i]) > r0*svdRankTol*float64(max(k, m)) {
			rank++
		} else {
			break
		}
	}
	y := make([]float64, m)
	if rank == 0 {
		return y, math.Inf(1)
	}
	cond := r0 / math.Abs(mt.Data[(rank-1)*m+rank-1])

	ones := blas64.General{Rows: k, Cols: 1, Stride: 1, Data: make([]float64, k)}
	for j := range ones.Data {
		ones.Data[j] = 1
	}
	lapack64.Ormqr(blas.Left, blas.Trans, mt, tau, ones, work, len(work)) // Qᵀ·1
	z := make([]float64, m)
	if rank == m {
		copy(z, ones.Data[:m])
		r := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: m, Stride: m, Data: mt.Data}
		lapack64.Trtrs(blas.NoTrans, r, blas64.General{Rows: m, Cols: 1, Stride: 1, Data: z})
	} else {
		// [R11 R12] (rank×m) = L·Q₂; the minimum-norm solution is Q₂ᵀ·L⁻¹·c.
		t := blas64.General{Rows: rank, Cols: m, Stride: m, Data: make([]float64, rank*m)}
		for i := 0; i < rank; i++ {
			copy(t.Data[i*m+i:(i+1)*m], mt.Data[i*m+i:(i+1)*m])
		}
		tau2 := make([]float64, rank)
		lapack64.Gelqf(t, tau2, work, len(work))
		copy(z, ones.Data[:rank])
		l := blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: rank, Stride: m, Data: t.Data}
		lapack64.Trtrs(blas.NoTrans, l, blas64.General{Rows: rank, Cols: 1, Stride: 1, Data: z[:rank]})
		lapack64.Ormlq(blas.Left, blas.Trans, t, tau2, blas64.General{Rows: m, Cols: 1, Stride: 1, Data: z}, work, len(work))
	}
	for c := 0; c < m; c++ {
		y[jpvt[c]] = z[c]
	}
	return y, cond
}
