package balance

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// CHRONICA §V-B: rank 0 is three times faster than rank 1. Splitting by
// count alone gives both ranks two samples; size-aware packing gives the
// fast rank the big samples so both finish together.
func TestPackStep_FastRankTakesTheLargeSamples(t *testing.T) {
	models := []LinearModel{{A: 1}, {A: 3}}
	sizes := []float64{60, 3, 57, 2}
	p, err := PackStep(sizes, models)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Rank; !slices.Equal(got, []int{0, 1, 0, 1}) {
		t.Fatalf("samples went to ranks %v, want the large ones (0 and 2) to the fast rank 0", got)
	}
	if slices.Max(p.Load) != 117 {
		t.Fatalf("makespan %v, want 117 (=60+57 vs 3·(3+2)=15)", slices.Max(p.Load))
	}
	// Count-only split (two each, in order) would take 3·(57+2) = 177.
}

// bruteMakespan tries every assignment of samples to ranks.
func bruteMakespan(sizes []float64, models []LinearModel) float64 {
	best := math.Inf(1)
	load := make([]float64, len(models))
	for r, m := range models {
		load[r] = m.B
	}
	var rec func(j int)
	rec = func(j int) {
		if j == len(sizes) {
			best = math.Min(best, slices.Max(load))
			return
		}
		for r, m := range models {
			load[r] += m.A * sizes[j]
			if load[r] < best {
				rec(j + 1)
			}
			load[r] -= m.A * sizes[j]
		}
	}
	rec(0)
	return best
}

// Gonzalez–Ibarra–Sahni: LPT on uniform machines is within 2m/(m+1) of the
// optimum; checked against exhaustive search.
func TestPackStep_WithinLPTBoundOfBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	worst := 1.0
	for trial := range 400 {
		m := 2 + rng.IntN(3)
		models := make([]LinearModel, m)
		for r := range models {
			models[r] = LinearModel{A: []float64{1, 0.5, 2, 1.5, 3}[rng.IntN(5)]}
		}
		sizes := make([]float64, 2+rng.IntN(7))
		for i := range sizes {
			sizes[i] = float64(1 + rng.IntN(64))
		}
		p, err := PackStep(sizes, models)
		if err != nil {
			t.Fatal(err)
		}
		opt := bruteMakespan(sizes, models)
		ratio := slices.Max(p.Load) / opt
		worst = math.Max(worst, ratio)
		if bound := 2 * float64(m) / float64(m+1); ratio > bound+1e-12 {
			t.Fatalf("trial %d: LPT %v / OPT %v = %v > 2m/(m+1) = %v (sizes %v models %v)", trial, slices.Max(p.Load), opt, ratio, bound, sizes, models)
		}
	}
	t.Logf("worst LPT/OPT ratio over 400 instances: %.3f", worst)
}

// With per-step intercepts the additive bound of PackStep's doc holds:
// makespan ≤ τ* + (m−1)·s_max/Σ 1/A_r whenever every B_r ≤ τ*.
func TestPackStep_AdditiveBoundWithIntercepts(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 300 {
		m := 1 + rng.IntN(16)
		models := make([]LinearModel, m)
		inv := 0.0
		for r := range models {
			models[r] = LinearModel{A: 0.2 + 2*rng.Float64(), B: rng.Float64()}
			inv += 1 / models[r].A
		}
		sizes := make([]float64, rng.IntN(200))
		total, smax := 0.0, 0.0
		for i := range sizes {
			sizes[i] = math.Pow(64, rng.Float64())
			total += sizes[i]
			smax = math.Max(smax, sizes[i])
		}
		tau := FluidMakespan(total, models)
		busy := true
		for _, md := range models {
			busy = busy && md.B <= tau
		}
		if !busy {
			continue
		}
		p, err := PackStep(sizes, models)
		if err != nil {
			t.Fatal(err)
		}
		if bound := tau + float64(m-1)*smax/inv; slices.Max(p.Load) > bound*(1+1e-9) {
			t.Fatalf("trial %d: makespan %v > bound %v (τ*=%v)", trial, slices.Max(p.Load), bound, tau)
		}
		if slices.Max(p.Load) < tau*(1-1e-9) {
			t.Fatalf("trial %d: makespan %v below the fluid lower bound %v", trial, slices.Max(p.Load), tau)
		}
		// Loads must be what the assignment implies.
		for r, md := range models {
			want := md.B
			for j, q := range p.Rank {
				if q == r {
					want += md.A * sizes[j]
				}
			}
			if math.Abs(want-p.Load[r]) > 1e-9*want {
				t.Fatalf("trial %d: rank %d load %v, members imply %v", trial, r, p.Load[r], want)
			}
		}
	}
}

func TestPackStep_IsDeterministic(t *testing.T) {
	sizes := []float64{5, 5, 5, 5, 3, 3, 1}
	models := []LinearModel{{A: 1}, {A: 1}, {A: 1}}
	a, _ := PackStep(sizes, models)
	b, _ := PackStep(slices.Clone(sizes), slices.Clone(models))
	if !slices.Equal(a.Rank, b.Rank) {
		t.Fatalf("two runs differ: %v vs %v", a.Rank, b.Rank)
	}
	if want := []int{0, 1, 2, 0, 1, 2, 1}; !slices.Equal(a.Rank, want) {
		t.Fatalf("ties must go to the lowest rank: got %v, want %v", a.Rank, want)
	}
}

func benchPack(b *testing.B, ranks, perRank int) {
	rng := rand.New(rand.NewPCG(1, 1))
	models := make([]LinearModel, ranks)
	for r := range models {
		models[r] = LinearModel{A: 1 / (100 + 300*rng.Float64()), B: 0.01 * rng.Float64()}
	}
	sizes := make([]float64, ranks*perRank)
	for i := range sizes {
		sizes[i] = math.Pow(64, rng.Float64())
	}
	for b.Loop() {
		if _, err := PackStep(sizes, models); err != nil {
			b.Fatal(err)
		}
	}
}

// One sample per rank per step (global batch 1000).
func BenchmarkPackStep1000Ranks1PerRank(b *testing.B) { benchPack(b, 1000, 1) }

// Four samples per rank per step (global batch 4000).
func BenchmarkPackStep1000Ranks4PerRank(b *testing.B) { benchPack(b, 1000, 4) }

// naiveLPT is the reference rule: scan every rank, lowest finish time,
// ties to the lowest rank.
func naiveLPT(sizes []float64, models []LinearModel) []int {
	load := make([]float64, len(models))
	for r, m := range models {
		load[r] = m.B
	}
	out := make([]int, len(sizes))
	for _, j := range decreasingSizeOrder(sizes, allSamples(len(sizes))) {
		best, bestT := 0, math.Inf(1)
		for r, m := range models {
			if t := load[r] + m.A*sizes[j]; t < bestT {
				best, bestT = r, t
			}
		}
		load[best] = bestT
		out[j] = best
	}
	return out
}

// The kinetic tournament used for many ranks must make exactly the naive
// scan's choices, ties included. Integer data keeps the arithmetic exact;
// few distinct slopes and sizes make ties frequent.
func TestPackStep_TournamentMatchesNaiveScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 34))
	for trial := range 200 {
		m := 17 + rng.IntN(300)
		models := make([]LinearModel, m)
		for r := range models {
			models[r] = LinearModel{A: float64(1 + rng.IntN(1+trial%7)), B: float64(rng.IntN(1 + trial%50))}
		}
		sizes := make([]float64, 4+rng.IntN(5*m))
		for i := range sizes {
			sizes[i] = float64(rng.IntN(1 + trial%64))
		}
		p, err := PackStep(sizes, models)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveLPT(sizes, models); !slices.Equal(p.Rank, want) {
			for j := range want {
				if p.Rank[j] != want[j] {
					t.Fatalf("trial %d (m=%d): sample %d (size %v) went to rank %d, naive scan picks %d", trial, m, j, sizes[j], p.Rank[j], want[j])
				}
			}
		}
	}
}
