package gradcode

import (
	"math"
	"math/rand"

	"gonum.org/v1/gonum/mat"
)

// A certified amplification bound for structured plans.
//
// In a structured plan every worker's auxiliary column is the column of its
// colour class (a group is a class too), so Lemma 2's closed-form decode for
// a straggler set S depends only on the set C of classes S touches: with x
// the vector orthogonal to the columns of C (unique when |C| = s) and
// normalised to xᵀv = 1, every worker of class c ∉ C gets a = xᵀh_c and every
// worker of a class in C gets 0. That decode is valid for every S whose
// classes lie in C, and Decode's weighted minimum-norm solution amplifies no
// more than any valid decode. Hence
//
//	max_S amp(S) ≤ max_{|C| = s} amp_C,   amp_C² = Σ_{c∉C} (xᵀh_c)²·Σ_{i∈c} ‖B_i‖² / k,
//
// a maximum over C(s+1+e, s) class sets — few, because only e extra colours
// exist beyond the s+1 needed. When there are at most boundExhaustive of them
// the bound is certified; otherwise boundSampled random sets are checked.

// Class-set budgets of the bound.
const (
	boundExhaustive = 25000
	boundSampled    = 4000
	boundSelect     = 1500 // sets used to rank candidate palettes
)

// colourClass is one column of a structured auxiliary matrix with the workers
// that use it.
type colourClass struct {
	col     []float64 // length s+1
	members []int
}

// classBound returns max over class sets C (|C| = s) of amp_C and whether
// every set was checked: all of them when there are at most limit, else
// `sample` random ones. b is the plan's B; v the right-hand side of Lemma 2.
func classBound(classes []colourClass, v []float64, b [][]float64, k, s, limit, sample int, rng *rand.Rand) (float64, bool) {
	nc := len(classes)
	dim := len(v)
	if s == 0 || nc <= s {
		return 1, true
	}
	weight := make([]float64, nc)
	for c, cl := range classes {
		for _, i := range cl.members {
			for _, x := range b[i] {
				weight[c] += x * x
			}
		}
		weight[c] /= float64(max(k, 1))
	}
	a := mat.NewDense(dim, dim, nil)
	rhs := mat.NewVecDense(dim, nil)
	var x mat.VecDense
	inC := make([]bool, nc)
	worst := 0.0
	eval := func(set []int) {
		// Solve [H_C v]ᵀ x = e_last: x ⊥ h_c for c ∈ C and xᵀv = 1.
		if len(set)+1 != dim {
			worst = math.Inf(1)
			return
		}
		for r, c := range set {
			for j := 0; j < dim; j++ {
				a.Set(r, j, classes[c].col[j])
			}
		}
		for j := 0; j < dim; j++ {
			a.Set(dim-1, j, v[j])
			rhs.SetVec(j, 0)
		}
		rhs.SetVec(dim-1, 1)
		for c := range inC {
			inC[c] = false
		}
		for _, c := range set {
			inC[c] = true
		}
		var amp float64
		if err := x.SolveVec(a, rhs); err == nil { // gonum reports near-singular systems as errors too
			sum := 0.0
			for c, cl := range classes {
				if inC[c] {
					continue
				}
				xh := 0.0
				for j := 0; j < dim; j++ {
					xh += x.AtVec(j) * cl.col[j]
				}
				sum += xh * xh * weight[c]
			}
			amp = math.Sqrt(sum)
		} else {
			amp = degenerateClassAmp(classes, inC, weight, v)
		}
		if !(amp <= worst) {
			worst = amp
		}
	}
	exhaustive := binomialAtMost(nc, s, limit) <= limit
	if exhaustive {
		forEachSubset(nc, s, eval)
	} else {
		for t := 0; t < sample; t++ {
			eval(rng.Perm(nc)[:s])
		}
	}
	return worst, exhaustive
}

// structuredClasses lists the colour classes of a structured plan: each group
// t gets the unit column e_t, each colour c of the other workers gets the
// palette column of aux shifted below the group coordinates.
func structuredClasses(groups [][]int, colours []int, ncolours int, aux auxiliary, s int) []colourClass {
	g := len(groups)
	dim := s + 1
	var out []colourClass
	for t, grp := range groups {
		col := make([]float64, dim)
		col[t] = 1
		out = append(out, colourClass{col: col, members: grp})
	}
	members := make([][]int, ncolours)
	for w, c := range colours {
		if c != noColour && c < ncolours {
			members[c] = append(members[c], w)
		}
	}
	for c := 0; c < ncolours; c++ {
		if len(members[c]) == 0 {
			continue
		}
		col := make([]float64, dim)
		copy(col[g:], aux.cols[members[c][0]])
		out = append(out, colourClass{col: col, members: members[c]})
	}
	return out
}

// degenerateClassAmp is amp_C when the columns of C are dependent, so that
// the x orthogonal to them is not unique: the smallest x̂ᵀGx̂ over x with
// H_Cᵀx = 0 and xᵀv = 1, where G = Σ_{c∉C} weight_c·h_c·h_cᵀ. With N a basis
// of the null space of H_Cᵀ, u = Nᵀv and Q = NᵀGN, the minimum is
// 1/(uᵀQ⁻¹u). It is +Inf when v lies in the span of C's columns.
func degenerateClassAmp(classes []colourClass, inC []bool, weight, v []float64) float64 {
	dim := len(v)
	var cols []int
	for c := range classes {
		if inC[c] {
			cols = append(cols, c)
		}
	}
	hc := mat.NewDense(dim, max(len(cols), 1), nil)
	for j, c := range cols {
		for r := 0; r < dim; r++ {
			hc.Set(r, j, classes[c].col[r])
		}
	}
	var svd mat.SVD
	if !svd.Factorize(hc, mat.SVDFull) {
		return math.Inf(1)
	}
	sv := svd.Values(nil)
	var u mat.Dense
	svd.UTo(&u)
	rank := 0
	for _, x := range sv {
		if x > sv[0]*1e-10 {
			rank++
		}
	}
	if len(cols) == 0 {
		rank = 0
	}
	nullDim := dim - rank
	if nullDim == 0 {
		return math.Inf(1)
	}
	basis := u.Slice(0, dim, rank, dim)
	uv := mat.NewVecDense(nullDim, nil)
	uv.MulVec(basis.T(), mat.NewVecDense(dim, v))
	if mat.Norm(uv, 2) < 1e-10*mat.Norm(mat.NewVecDense(dim, v), 2) {
		return math.Inf(1)
	}
	q := mat.NewSymDense(nullDim, nil)
	proj := mat.NewVecDense(nullDim, nil)
	for c, cl := range classes {
		if inC[c] || weight[c] == 0 {
			continue
		}
		proj.MulVec(basis.T(), mat.NewVecDense(dim, cl.col))
		q.SymRankOne(q, weight[c], proj)
	}
	var eig mat.EigenSym
	if !eig.Factorize(q, true) {
		return math.Inf(1)
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	top := 0.0
	for _, l := range vals {
		top = math.Max(top, l)
	}
	quad := 0.0
	for i, l := range vals {
		proj := mat.Dot(vecs.ColView(i), uv)
		if l <= top*1e-12 {
			if math.Abs(proj) > 1e-9 {
				// A decode with zero amplification contradicts Lemma 2; only
				// round-off gets here. Stay conservative.
				return math.Inf(1)
			}
			continue
		}
		quad += proj * proj / l
	}
	if quad == 0 {
		return math.Inf(1)
	}
	return math.Sqrt(1 / quad)
}
