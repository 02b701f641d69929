package gradcode

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
)

// checkRobust is the naive check of Lemma 1 / condition (C1): for every set
// of s stragglers the decode vanishes on the stragglers and Σ a_i·B[i] = 1ᵀ,
// recomputed here independently of the solver.
func checkRobust(t *testing.T, p *Plan) {
	t.Helper()
	forEachSubset(p.N, p.S, func(st []int) {
		a, err := p.Decode(complement(p.N, st))
		if err != nil {
			t.Fatalf("%s/%s n=%d s=%d stragglers %v: %v", p.Scheme, p.Construction, p.N, p.S, st, err)
		}
		for _, r := range st {
			if a[r] != 0 {
				t.Fatalf("stragglers %v: straggler %d has coefficient %v", st, r, a[r])
			}
		}
		for j := 0; j < p.K; j++ {
			sum := 0.0
			for i := 0; i < p.N; i++ {
				sum += a[i] * p.B[i][j]
			}
			if math.Abs(sum-1) > 1e-8 {
				t.Fatalf("stragglers %v: partition %d gets weight %v, want 1", st, j, sum)
			}
		}
	})
}

// checkShape verifies that B lives on the assignment and every partition is
// held by s+1 distinct workers.
func checkShape(t *testing.T, p *Plan) {
	t.Helper()
	if len(p.B) != p.N || len(p.Assignment) != p.N {
		t.Fatalf("B has %d rows and assignment %d, want n = %d", len(p.B), len(p.Assignment), p.N)
	}
	held := make([]int, p.K)
	for i, parts := range p.Assignment {
		mine := make(map[int]bool)
		for _, j := range parts {
			if mine[j] {
				t.Fatalf("worker %d holds partition %d twice", i, j)
			}
			mine[j] = true
			held[j]++
		}
		for j, x := range p.B[i] {
			if x != 0 && !mine[j] {
				t.Fatalf("B[%d][%d] = %v but worker %d does not hold partition %d", i, j, x, i, j)
			}
		}
	}
	for j, h := range held {
		if h != p.S+1 {
			t.Fatalf("partition %d has %d holders, want s+1 = %d", j, h, p.S+1)
		}
	}
}

// Every scheme and construction tolerates every set of s stragglers, on small
// clusters where all sets can be enumerated.
func TestEveryPlanToleratesAnySStragglers(t *testing.T) {
	rng := newRand(11)
	for _, c := range [][2]int{{2, 1}, {3, 1}, {4, 1}, {5, 2}, {7, 2}, {8, 3}, {9, 2}, {10, 3}, {11, 4}, {13, 3}} {
		n, s := c[0], c[1]
		thr := randomThroughputs(n, rng)
		for _, scheme := range []Scheme{Cyclic, Hetero, Group} {
			for _, cons := range []Construction{Structured, Random} {
				t.Run(fmt.Sprintf("%s/%s/n=%d/s=%d", scheme, cons, n, s), func(t *testing.T) {
					p, err := NewPlan(Config{Scheme: scheme, N: n, S: s, Throughputs: thr, Seed: 5, Construction: cons})
					if err != nil {
						t.Fatal(err)
					}
					checkShape(t, p)
					checkRobust(t, p)
				})
			}
		}
	}
}

// The cyclic scheme keeps Tandon's support whatever the construction.
func TestCyclicAssignmentIsTandonSupport(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 7, S: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 0}, {6, 0, 1}}
	if !reflect.DeepEqual(p.Assignment, want) {
		t.Fatalf("assignment %v, want %v", p.Assignment, want)
	}
	if p.K != 7 {
		t.Fatalf("k = %d, want n", p.K)
	}
}

// When s+1 divides n the structured cyclic plan is fractional repetition in
// disguise: B is the 0/1 window matrix and the s+1 colour classes
// {c, c+s+1, …} are groups, so any s stragglers leave one class whole.
func TestCyclicStructuredIsZeroOneWhenSPlus1DividesN(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 9, S: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range p.B {
		for _, j := range p.Assignment[i] {
			if row[j] != 1 {
				t.Fatalf("B[%d][%d] = %v, want 1", i, j, row[j])
			}
		}
	}
	want := [][]int{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}
	if !reflect.DeepEqual(p.Groups, want) {
		t.Fatalf("groups %v, want %v", p.Groups, want)
	}
	a, err := p.Decode([]int{2, 3, 5, 6, 8, 7, 1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, []float64{0, 0, 1, 0, 0, 1, 0, 0, 1}) {
		t.Fatalf("decode %v, want the indicator of {2,5,8}", a)
	}
	if q := p.Quality; q.MaxAbsDecode != 1 || q.MaxAmplification > 1 || p.PayloadDType != Float32 {
		t.Fatalf("0/1 plan should be perfectly conditioned, got %+v (%s)", q, p.PayloadDType)
	}
}

// Alg. 1: loads are proportional to throughput; the CLI's example cluster
// 1,1,2,2,4,4 with s = 2 balances exactly at k = 14.
func TestHeteroLoadsFollowThroughput(t *testing.T) {
	thr := []float64{1, 1, 2, 2, 4, 4}
	p, err := NewPlan(Config{Scheme: Hetero, N: 6, S: 2, Throughputs: thr})
	if err != nil {
		t.Fatal(err)
	}
	if p.K != 14 {
		t.Fatalf("auto k = %d, want 14 (the smallest exactly balanced k)", p.K)
	}
	var got []int
	for i := range thr {
		got = append(got, p.Load(i))
	}
	if want := []int{3, 3, 6, 6, 12, 12}; !reflect.DeepEqual(got, want) {
		t.Fatalf("loads %v, want %v", got, want)
	}
	// Copies are laid out cyclically: worker 2 continues where worker 1 stopped.
	if want := []int{6, 7, 8, 9, 10, 11}; !reflect.DeepEqual(p.Assignment[2], want) {
		t.Fatalf("worker 2 holds %v, want %v", p.Assignment[2], want)
	}
	if want := []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0, 1}; !reflect.DeepEqual(p.Assignment[4], want) {
		t.Fatalf("worker 4 holds %v, want %v (copies 18…29)", p.Assignment[4], want)
	}
	checkShape(t, p)
	checkRobust(t, p)
}

// A worker faster than the rest combined cannot hold a partition twice: its
// load is capped at k and the rest is spread over the others.
func TestHeteroCapsLoadAtK(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Hetero, N: 4, S: 1, K: 8, Throughputs: []float64{100, 1, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Load(0) != 8 {
		t.Fatalf("fast worker load %d, want k = 8", p.Load(0))
	}
	total := 0
	for i := 0; i < 4; i++ {
		total += p.Load(i)
	}
	if total != 16 {
		t.Fatalf("total load %d, want (s+1)k = 16", total)
	}
	checkShape(t, p)
	checkRobust(t, p)
}

// Alg. 2/3 on a cluster whose laps line up: six equal workers, s = 1, k = 6;
// worker i holds {2i, 2i+1} mod 6, so every choice from {0|3}×{1|4}×{2|5}
// is an exact cover. Pruning keeps two disjoint groups, and one whole group
// decodes with 0/1 coefficients after 3 arrivals instead of n−s = 5.
func TestGroupSchemeDecodesAsSoonAsOneGroupReports(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Group, N: 6, S: 1, K: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 2 {
		t.Fatalf("groups %v, want two disjoint exact covers", p.Groups)
	}
	seen := make(map[int]bool)
	for _, g := range p.Groups {
		if !isUnitGroup(g, p.Assignment, p.B, p.K) {
			t.Fatalf("group %v is not a 0/1 exact cover", g)
		}
		for _, w := range g {
			if seen[w] {
				t.Fatalf("groups %v share worker %d", p.Groups, w)
			}
			seen[w] = true
		}
	}
	g := p.Groups[1]
	partner := (g[0] + 3) % 6 // holds the same two partitions as g[0]
	if p.Decodable([]int{g[0], partner, g[1]}) {
		t.Fatal("three workers covering 4 of 6 partitions are decodable")
	}
	order := []int{g[0], partner, g[1], g[2]}
	for w := 0; w < 6; w++ {
		if !slices.Contains(order, w) {
			order = append(order, w)
		}
	}
	l, err := p.EarliestDecodable(order)
	if err != nil {
		t.Fatal(err)
	}
	if l != 4 {
		t.Fatalf("arrivals %v: decodable after %d, want 4 (when %v completes)", order, l, g)
	}
	a, err := p.Decode(order[:4])
	if err != nil {
		t.Fatal(err)
	}
	for w, x := range a {
		want := 0.0
		if slices.Contains(g, w) {
			want = 1
		}
		if x != want {
			t.Fatalf("decode %v, want the indicator of %v", a, g)
		}
	}
	checkRobust(t, p)
}

// Alg. 2/3 when only some workers form groups. Loads 4,3,3,4,2,4,4 on k = 8,
// s = 2: workers 0 (partitions 0–3) and 6 (4–7) tile the data, and so do 5
// and 6; pruning keeps {0,6}. Its members carry coefficient 1, the other five
// workers are coded through a 2-dimensional auxiliary matrix, and the plan
// still tolerates any 2 stragglers.
func TestGroupSchemeMixesGroupsAndCodedWorkers(t *testing.T) {
	thr := []float64{4, 3, 3, 4, 2, 4, 4}
	p, err := NewPlan(Config{Scheme: Group, N: 7, S: 2, K: 8, Throughputs: thr})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range thr {
		if p.Load(i) != int(c) {
			t.Fatalf("worker %d load %d, want %v", i, p.Load(i), c)
		}
	}
	if want := [][]int{{0, 6}}; !reflect.DeepEqual(p.Groups, want) {
		t.Fatalf("groups %v, want %v", p.Groups, want)
	}
	for _, w := range []int{0, 6} {
		for _, j := range p.Assignment[w] {
			if p.B[w][j] != 1 {
				t.Fatalf("group member %d has B[%d][%d] = %v, want 1", w, w, j, p.B[w][j])
			}
		}
	}
	coded := false
	for _, w := range []int{1, 2, 3, 4, 5} {
		for _, j := range p.Assignment[w] {
			coded = coded || p.B[w][j] != 1
		}
	}
	if !coded {
		t.Fatal("non-group workers should carry non-trivial coefficients")
	}
	checkShape(t, p)
	checkRobust(t, p)
}

// Every rank builds the same plan from the same Config.
func TestPlanIsDeterministic(t *testing.T) {
	rng := newRand(3)
	for _, scheme := range []Scheme{Cyclic, Hetero, Group} {
		for _, cons := range []Construction{Structured, Random} {
			cfg := Config{Scheme: scheme, N: 23, S: 5, Throughputs: randomThroughputs(23, rng), Seed: 99, Construction: cons}
			a, err := NewPlan(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewPlan(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s/%s: two builds of the same config differ", scheme, cons)
			}
		}
	}
	// The seed matters for random draws.
	x, _ := NewPlan(Config{Scheme: Cyclic, N: 8, S: 2, Seed: 1, Construction: Random})
	y, _ := NewPlan(Config{Scheme: Cyclic, N: 8, S: 2, Seed: 2, Construction: Random})
	if reflect.DeepEqual(x.B, y.B) {
		t.Fatal("different seeds gave the same random B")
	}
}

// Bad configurations are rejected with ErrInvalidConfig.
func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Scheme: "ring", N: 4, S: 1},
		{Scheme: Cyclic, N: 0},
		{Scheme: Cyclic, N: 4, S: 4},
		{Scheme: Cyclic, N: 4, S: -1},
		{Scheme: Cyclic, N: 4, S: 1, K: 5},
		{Scheme: Hetero, N: 3, S: 1, Throughputs: []float64{1, 2}},
		{Scheme: Hetero, N: 3, S: 1, Throughputs: []float64{1, 0, 2}},
		{Scheme: Hetero, N: 3, S: 1, Throughputs: []float64{1, math.NaN(), 2}},
		{Scheme: Hetero, N: 3, S: 1, K: -2},
		{Scheme: Hetero, N: 3, S: 1, Construction: "magic"},
		{Scheme: Hetero, N: 3, S: 1, PayloadDType: "bf16"},
		{Scheme: Hetero, N: 3, S: 1, TargetRelErr: -1},
	}
	for _, cfg := range bad {
		if _, err := NewPlan(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// A forced payload type wins over the measured choice; an impossible target
// forces float64.
func TestPayloadDTypeChoice(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Hetero, N: 8, S: 2, PayloadDType: Float64})
	if err != nil {
		t.Fatal(err)
	}
	if p.PayloadDType != Float64 {
		t.Fatalf("forced float64, got %s", p.PayloadDType)
	}
	q, err := NewPlan(Config{Scheme: Cyclic, N: 10, S: 2, TargetRelErr: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	if q.PayloadDType != Float64 {
		t.Fatalf("target 1e-12 is below float32 round-off, got %s (quality %+v)", q.PayloadDType, q.Quality)
	}
	r, err := NewPlan(Config{Scheme: Cyclic, N: 10, S: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.PayloadDType != Float32 || r.Quality.Target != TargetRelErrSmall {
		t.Fatalf("n=10 s=2 should be float32 against 1e-5, got %s %+v", r.PayloadDType, r.Quality)
	}
}

// s = 0 degenerates to plain data parallelism: one copy, coefficient 1.
func TestNoStragglersIsPlainSum(t *testing.T) {
	for _, cfg := range []Config{
		{Scheme: Cyclic}, {Scheme: Hetero}, {Scheme: Group}, {Scheme: Cyclic, Construction: Random}, {Scheme: Hetero, Construction: Random},
	} {
		scheme := cfg.Scheme
		cfg.N, cfg.S, cfg.Throughputs = 4, 0, []float64{1, 2, 3, 4}
		p, err := NewPlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, err := p.Decode([]int{0, 1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range a {
			for _, j := range p.Assignment[i] { // one copy each: a_i·B[i][j] = 1
				if math.Abs(x*p.B[i][j]-1) > 1e-12 {
					t.Fatalf("%s/%s: decode %v with B row %v", scheme, p.Construction, a, p.B[i])
				}
				if p.Construction == Structured && x != 1 {
					t.Fatalf("%s: structured decode %v, want all ones", scheme, a)
				}
			}
		}
		if _, err := p.Decode([]int{0, 1, 2}); scheme != Group && !errors.Is(err, ErrNotDecodable) {
			t.Fatalf("%s: decode without rank 3 should fail, got %v", scheme, err)
		}
	}
}
