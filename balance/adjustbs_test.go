package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// AntDT §I and §VII-A: cluster B has 4 V100s about three times faster than
// 4 P100s and a global batch of 768. Without memory limits Eq. 3 gives each
// V100 three times the P100 batch: 144 and 48, all finishing together.
func TestAntDTEq3_ClusterBV100P100(t *testing.T) {
	ranks := []RankSpeed{{Speed: 3}, {Speed: 3}, {Speed: 3}, {Speed: 3}, {Speed: 1}, {Speed: 1}, {Speed: 1}, {Speed: 1}}
	got, err := AdjustBS(768, ranks)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{144, 144, 144, 144, 48, 48, 48, 48}
	if !slices.Equal(got, want) {
		t.Fatalf("AdjustBS = %v, want %v", got, want)
	}
	if z := makespan(got, ranks); z != 48 {
		t.Fatalf("makespan %v, want 48 (= 768/Σv = 768/16)", z)
	}
}

// With a memory cap of 121 samples the V100s saturate and the P100s take
// the rest: LB-BSP's situation in AntDT Fig. 9.
func TestAdjustBS_MemoryCapPushesWorkToSlowRanks(t *testing.T) {
	var ranks []RankSpeed
	for i := range 8 {
		v := 1.0
		if i < 4 {
			v = 3
		}
		ranks = append(ranks, RankSpeed{Speed: v, MaxBatch: 121})
	}
	got, err := AdjustBS(768, ranks)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{121, 121, 121, 121, 71, 71, 71, 71}
	if !slices.Equal(got, want) {
		t.Fatalf("AdjustBS = %v, want %v", got, want)
	}
}

// bruteAdjustBS enumerates every composition of global within the bounds.
func bruteAdjustBS(global int, ranks []RankSpeed) (float64, bool) {
	best, found := math.Inf(1), false
	b := make([]int, len(ranks))
	var rec func(i, left int, z float64)
	rec = func(i, left int, z float64) {
		if i == len(ranks) {
			if left == 0 && z < best {
				best, found = z, true
			}
			return
		}
		for x := ranks[i].MinBatch; x <= min(left, ranks[i].maxBatch()); x++ {
			b[i] = x
			rec(i+1, left-x, math.Max(z, BatchTime(x, ranks[i].Speed)))
		}
	}
	rec(0, global, 0)
	return best, found
}

func TestAdjustBS_MatchesBruteForceOnSmallInstances(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 3000 {
		n := 1 + rng.IntN(4)
		ranks := make([]RankSpeed, n)
		for i := range ranks {
			ranks[i].Speed = []float64{0.5, 1, 1.5, 2, 3, 7, 0.3}[rng.IntN(7)]
			if rng.IntN(3) == 0 {
				ranks[i].MinBatch = rng.IntN(3)
			}
			if rng.IntN(2) == 0 {
				ranks[i].MaxBatch = ranks[i].MinBatch + rng.IntN(6)
			}
		}
		global := rng.IntN(15)
		want, ok := bruteAdjustBS(global, ranks)
		got, err := AdjustBS(global, ranks)
		if !ok {
			if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("trial %d: %v global %d: brute force finds no solution, AdjustBS err = %v", trial, ranks, global, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v global %d: %v", trial, ranks, global, err)
		}
		sum := 0
		for i, b := range got {
			sum += b
			if b < ranks[i].MinBatch || b > ranks[i].maxBatch() {
				t.Fatalf("trial %d: rank %d batch %d outside bounds %+v", trial, i, b, ranks[i])
			}
		}
		if sum != global {
			t.Fatalf("trial %d: batches %v sum to %d, want %d", trial, got, sum, global)
		}
		if z := makespan(got, ranks); math.Abs(z-want) > 1e-12*want {
			t.Fatalf("trial %d: %v global %d: makespan %v, brute force %v (batches %v)", trial, ranks, global, z, want, got)
		}
	}
}

func TestAdjustBS_RejectsImpossibleBounds(t *testing.T) {
	ranks := []RankSpeed{{Speed: 1, MaxBatch: 10}, {Speed: 2, MaxBatch: 10}}
	if _, err := AdjustBS(21, ranks); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("global above Σmax: err = %v, want ErrInfeasible", err)
	}
	ranks = []RankSpeed{{Speed: 1, MinBatch: 5}, {Speed: 2, MinBatch: 5}}
	if _, err := AdjustBS(9, ranks); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("global below Σmin: err = %v, want ErrInfeasible", err)
	}
	if _, err := AdjustBS(9, []RankSpeed{{Speed: 0}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("zero speed: err = %v, want ErrInvalidInput", err)
	}
	if _, err := AdjustBS(9, []RankSpeed{{Speed: math.NaN()}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("NaN speed: err = %v, want ErrInvalidInput", err)
	}
}

// A large global batch over 500 ranks: the result must match the
// unit-by-unit greedy (the naive reference, slow but obviously optimal).
func TestAdjustBS_LargeInstanceMatchesUnitGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ranks := make([]RankSpeed, 500)
	for i := range ranks {
		ranks[i] = RankSpeed{Speed: 50 + 400*rng.Float64(), MinBatch: rng.IntN(4), MaxBatch: 64 + rng.IntN(256)}
	}
	const global = 40000
	got, err := AdjustBS(global, ranks)
	if err != nil {
		t.Fatal(err)
	}
	naive := make([]int, len(ranks))
	left := global
	for i, r := range ranks {
		naive[i] = r.MinBatch
		left -= r.MinBatch
	}
	for ; left > 0; left-- {
		best := -1
		for i, r := range ranks {
			if naive[i] < r.maxBatch() && (best < 0 || BatchTime(naive[i]+1, r.Speed) < BatchTime(naive[best]+1, ranks[best].Speed)) {
				best = i
			}
		}
		naive[best]++
	}
	if zg, zn := makespan(got, ranks), makespan(naive, ranks); zg != zn {
		t.Fatalf("makespan %v, unit greedy %v", zg, zn)
	}
}

func BenchmarkAdjustBS1000Ranks(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	ranks := make([]RankSpeed, 1000)
	for i := range ranks {
		ranks[i] = RankSpeed{Speed: 50 + 400*rng.Float64(), MaxBatch: 512}
	}
	for b.Loop() {
		if _, err := AdjustBS(262144, ranks); err != nil {
			b.Fatal(err)
		}
	}
}

// makespan is max_i batches[i]/ranks[i].Speed, the objective z of AntDT
// Eq. 3 for an assignment.
func makespan(batches []int, ranks []RankSpeed) float64 {
	z := 0.0
	for i, b := range batches {
		z = math.Max(z, BatchTime(b, ranks[i].Speed))
	}
	return z
}
