package gradcode

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// naiveMinNorm is the brute-force reference: the weighted minimum-norm
// solution through gonum's SVD pseudo-inverse.
func naiveMinNorm(b [][]float64, k int, survivors []int) []float64 {
	m := len(survivors)
	w := make([]float64, m)
	mt := mat.NewDense(k, m, nil)
	for c, i := range survivors {
		w[c] = math.Sqrt(mat.Dot(mat.NewVecDense(k, b[i]), mat.NewVecDense(k, b[i])))
		for j := 0; j < k; j++ {
			mt.Set(j, c, b[i][j]/w[c])
		}
	}
	var svd mat.SVD
	svd.Factorize(mt, mat.SVDThin)
	ones := mat.NewDense(k, 1, nil)
	for j := 0; j < k; j++ {
		ones.Set(j, 0, 1)
	}
	var y mat.Dense
	svd.SolveTo(&y, ones, svd.Rank(1e-10))
	a := make([]float64, len(b))
	for c, i := range survivors {
		a[i] = y.At(c, 0) / w[c]
	}
	return a
}

// The fast decode (pivoted QR + LQ) equals the SVD pseudo-inverse, both on
// full-rank survivor sets (random H) and on rank-deficient ones (structured
// plans, whose colour classes make rows of B_F dependent).
func TestDecodeMatchesSVDPseudoInverse(t *testing.T) {
	rng := newRand(17)
	for _, cfg := range []Config{
		{Scheme: Cyclic, N: 12, S: 3, Construction: Random, Seed: 1},
		{Scheme: Cyclic, N: 12, S: 2, Seed: 1}, // 0/1 B, rank deficient
		{Scheme: Cyclic, N: 13, S: 3, Seed: 1}, // one extra colour
		{Scheme: Hetero, N: 14, S: 3, Throughputs: randomThroughputs(14, rng), Seed: 2},
		{Scheme: Group, N: 14, S: 3, Throughputs: randomThroughputs(14, rng), Seed: 2},
	} {
		p, err := NewPlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 40; trial++ {
			survivors := complement(p.N, rng.Perm(p.N)[:p.S])
			alive := make([]bool, p.N)
			for _, r := range survivors {
				alive[r] = true
			}
			fast, _, err := minNormDecode(p.B, p.K, alive)
			if err != nil {
				t.Fatalf("%+v survivors %v: %v", cfg, survivors, err)
			}
			want := naiveMinNorm(p.B, p.K, survivors)
			for i := range want {
				if math.Abs(fast[i]-want[i]) > 1e-8*math.Max(1, math.Abs(want[i])) {
					t.Fatalf("%s n=%d s=%d survivors %v: decode %v, SVD %v", cfg.Scheme, cfg.N, cfg.S, survivors, fast, want)
				}
			}
		}
	}
}

// Too many stragglers is a typed, non-panicking error; bad lists are
// rejected; the survivor order does not matter.
func TestDecodeErrors(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 8, S: 2, Seed: 1, Construction: Random})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Decode([]int{0, 1, 2, 3, 4}); !errors.Is(err, ErrNotDecodable) {
		t.Fatalf("3 stragglers with s=2: got %v, want ErrNotDecodable", err)
	}
	if p.Decodable([]int{0, 1, 2, 3, 4}) {
		t.Fatal("5 of 8 with s=2 reported decodable")
	}
	if _, err := p.Decode([]int{0, 0, 1, 2, 3, 4}); !errors.Is(err, ErrBadRanks) {
		t.Fatalf("duplicate: got %v, want ErrBadRanks", err)
	}
	if _, err := p.EarliestDecodable([]int{-1}); !errors.Is(err, ErrBadRanks) {
		t.Fatalf("rank -1: got %v, want ErrBadRanks", err)
	}
	if _, err := p.EarliestDecodable([]int{0, 1, 2}); !errors.Is(err, ErrNotDecodable) {
		t.Fatalf("3 arrivals: got %v, want ErrNotDecodable", err)
	}
	a, err := p.Decode([]int{7, 1, 5, 3, 2, 6})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Decode([]int{1, 2, 3, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("decode depends on survivor order: %v vs %v", a, b)
	}
}

// More survivors than n−s are used, not ignored: the minimum-norm decode over
// everybody amplifies rounding no more than over the first n−s.
func TestDecodeUsesExtraSurvivors(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Hetero, N: 10, S: 2, Throughputs: []float64{1, 2, 3, 1, 2, 3, 1, 2, 3, 4}, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	all, err := p.Decode([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	if err != nil {
		t.Fatal(err)
	}
	some, err := p.Decode([]int{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	if amplification(all, p.B, p.K) > amplification(some, p.B, p.K)+1e-12 {
		t.Fatalf("all survivors amplify %v > n−s survivors %v", amplification(all, p.B, p.K), amplification(some, p.B, p.K))
	}
}

// For a generic plan (any n−s decode, nothing fewer) the earliest decodable
// point is exactly n−s arrivals.
func TestEarliestDecodableIsNMinusSForGenericPlans(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 9, S: 3, Construction: Random, Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	order := []int{8, 3, 0, 5, 1, 7, 2, 4, 6}
	l, err := p.EarliestDecodable(order)
	if err != nil {
		t.Fatal(err)
	}
	if l != 6 {
		t.Fatalf("earliest decodable after %d arrivals, want n−s = 6", l)
	}
}

// BenchmarkDecode times one decode of a 64-worker plan with 8 stragglers.
func BenchmarkDecode(b *testing.B) {
	p, err := NewPlan(Config{Scheme: Hetero, N: 64, S: 8, Throughputs: randomThroughputs(64, newRand(1))})
	if err != nil {
		b.Fatal(err)
	}
	survivors := complement(64, []int{3, 9, 17, 22, 30, 41, 50, 63})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Decode(survivors); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewPlan times building (and quality-checking) a 64-worker plan.
func BenchmarkNewPlan(b *testing.B) {
	thr := randomThroughputs(64, newRand(1))
	for i := 0; i < b.N; i++ {
		if _, err := NewPlan(Config{Scheme: Hetero, N: 64, S: 8, Throughputs: thr}); err != nil {
			b.Fatal(err)
		}
	}
}
