package gradcode

import (
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// Worked examples from Tandon et al. ("Gradient Coding") and the
// heterogeneity-aware gradient coding paper, as named scenarios.

func assertVec(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v (len %d), want %v", what, got, len(got), want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol {
			t.Fatalf("%s: got %v, want %v (entry %d off by %g)", what, got, want, i, got[i]-want[i])
		}
	}
}

// With H = [1, 1, 1, 1, −4] Tandon's construction gives a bidiagonal-like B
// whose decoding vectors grow linearly around the ring.
func TestTandonExampleN5S1(t *testing.T) {
	h := mat.NewDense(1, 5, []float64{1, 1, 1, 1, -4})
	p, err := CyclicFromH(5, 1, h)
	if err != nil {
		t.Fatal(err)
	}
	wantB := [][]float64{
		{1, -1, 0, 0, 0},
		{0, 1, -1, 0, 0},
		{0, 0, 1, -1, 0},
		{0, 0, 0, 1, 0.25},
		{4, 0, 0, 0, 1},
	}
	for i := range wantB {
		assertVec(t, fmt.Sprintf("B row %d", i), p.B[i], wantB[i], 1e-12)
	}
	// Decoding vectors over the survivors in index order, per straggler.
	wantDecode := map[int][]float64{
		0: {1, 2, 3, 0.25},
		1: {-1, 1, 2, 0.5},
		2: {-2, -1, 1, 0.75},
		3: {-3, -2, -1, 1},
		4: {1, 2, 3, 4},
	}
	for straggler := 0; straggler < 5; straggler++ {
		survivors := complement(5, []int{straggler})
		a, err := p.Decode(survivors)
		if err != nil {
			t.Fatalf("straggler %d: %v", straggler, err)
		}
		if a[straggler] != 0 {
			t.Fatalf("straggler %d got coefficient %v", straggler, a[straggler])
		}
		got := make([]float64, 0, 4)
		for _, r := range survivors {
			got = append(got, a[r])
		}
		assertVec(t, fmt.Sprintf("decode with straggler %d", straggler), got, wantDecode[straggler], 1e-9)
	}
	if len(p.Groups) != 0 {
		t.Fatalf("a generic Tandon B has no unit groups, got %v", p.Groups)
	}
}

// Tandon's three-worker example: B = [[½,1,0],[0,1,−1],[½,0,1]] tolerates one
// straggler with decoding matrix rows [0,1,2], [1,0,1], [2,−1,0].
func TestTandonExampleN3S1(t *testing.T) {
	b := [][]float64{{0.5, 1, 0}, {0, 1, -1}, {0.5, 0, 1}}
	p, err := PlanFromB(1, b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]float64{0: {0, 1, 2}, 1: {1, 0, 1}, 2: {2, -1, 0}}
	for straggler, w := range want {
		a, err := p.Decode(complement(3, []int{straggler}))
		if err != nil {
			t.Fatal(err)
		}
		assertVec(t, fmt.Sprintf("decode with straggler %d", straggler), a, w, 1e-12)
	}
	if !p.Quality.Exhaustive || p.Quality.Patterns != 3 {
		t.Fatalf("quality should cover all 3 patterns, got %+v", p.Quality)
	}
	// The same support comes out of Tandon's construction with H = [−2, 1, 1],
	// up to scaling each row (the first entry in cyclic order is set to 1).
	q, err := CyclicFromH(3, 1, mat.NewDense(1, 3, []float64{-2, 1, 1}))
	if err != nil {
		t.Fatal(err)
	}
	scale := []float64{2, 1, 1}
	for i := range b {
		for j := range b[i] {
			if math.Abs(q.B[i][j]-scale[i]*b[i][j]) > 1e-12 {
				t.Fatalf("row %d: Tandon B %v is not %v × paper row %v", i, q.B[i], scale[i], b[i])
			}
		}
	}
}

// A B that cannot tolerate the claimed stragglers is rejected.
func TestPlanFromBRejectsNonRobustB(t *testing.T) {
	identity := [][]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	if _, err := PlanFromB(1, identity); err == nil {
		t.Fatal("identity B (no redundancy) accepted with s = 1")
	}
	if _, err := PlanFromB(0, identity); err != nil {
		t.Fatalf("identity B with s = 0: %v", err)
	}
}

// Lemma 2: the B built from an auxiliary matrix satisfies H·B = v·1ᵀ, and
// a = (xᵀH)/(xᵀv) with xᵀH_S = 0 decodes — the closed form agrees with the
// least-squares decode on every straggler set (Alg. 1 with random H).
func TestLemma2ClosedFormDecode(t *testing.T) {
	cfg := Config{Scheme: Hetero, N: 7, S: 2, Throughputs: []float64{1, 1, 2, 2, 3, 3, 4}, Seed: 3, Construction: Random}
	p, err := NewPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Rebuild H exactly as newHetero drew it.
	hold := holders(p.Assignment, p.K)
	var members []int
	for i := range p.Assignment {
		if p.Load(i) > 0 {
			members = append(members, i)
		}
	}
	aux := randomAuxiliary(p.N, p.S+1, members, newRand(cfg.Seed))
	b, _, err := auxiliaryB(p.N, p.K, hold, make([]bool, p.N), aux)
	if err != nil {
		t.Fatal(err)
	}
	h := mat.NewDense(p.S+1, p.N, nil)
	for w, col := range aux.cols {
		for r, x := range col {
			h.Set(r, w, x)
		}
	}
	bm := mat.NewDense(p.N, p.K, nil)
	for i := range b {
		bm.SetRow(i, b[i])
		assertVec(t, "B row", b[i], p.B[i], 0)
	}
	var hb mat.Dense
	hb.Mul(h, bm)
	for r := 0; r <= p.S; r++ {
		for j := 0; j < p.K; j++ {
			if math.Abs(hb.At(r, j)-1) > 1e-9 {
				t.Fatalf("(H·B)[%d][%d] = %v, want 1", r, j, hb.At(r, j))
			}
		}
	}
	forEachSubset(p.N, p.S, func(st []int) {
		// x spans the left null space of H_S: the last left singular vector.
		hs := mat.NewDense(p.S+1, p.S, nil)
		for c, w := range st {
			for r := 0; r <= p.S; r++ {
				hs.Set(r, c, h.At(r, w))
			}
		}
		var svd mat.SVD
		svd.Factorize(hs, mat.SVDFull)
		var u mat.Dense
		svd.UTo(&u)
		x := mat.Col(nil, p.S, &u)
		xv := 0.0
		for _, e := range x {
			xv += e
		}
		closed := make([]float64, p.N)
		for w := 0; w < p.N; w++ {
			for r := 0; r <= p.S; r++ {
				closed[w] += x[r] * h.At(r, w) / xv
			}
		}
		a, err := p.Decode(complement(p.N, st))
		if err != nil {
			t.Fatalf("stragglers %v: %v", st, err)
		}
		// Rows of B_F are independent here (generic H), so the solution is unique.
		assertVec(t, fmt.Sprintf("stragglers %v", st), a, closed, 1e-7)
	})
}
