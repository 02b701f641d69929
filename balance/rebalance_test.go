package balance

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// CHRONICA §III/§V-C: two identical ranks, one holding the long videos.
// The shuffler moves just enough samples to even the epoch out.
func TestRebalanceEpoch_IdenticalRanksMoveOnlyTheOverflow(t *testing.T) {
	sizes := []float64{40, 30, 20, 10, 5, 5, 5, 5}
	parts := [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}} // 100 vs 20
	models := []LinearModel{{A: 1}, {A: 1}}
	rb, err := RebalanceEpoch(parts, sizes, models)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Target != 60 {
		t.Fatalf("target %v, want 60", rb.Target)
	}
	if slices.Max(rb.After) != 60 || rb.Moved != 1 {
		t.Fatalf("after %v with %d moved, want 60 with 1 moved (the size-40 sample)", rb.After, rb.Moved)
	}
	if !slices.Equal(rb.Parts[1], []int{4, 5, 6, 7, 0}) {
		t.Fatalf("rank 1 now holds %v, want [4 5 6 7 0]", rb.Parts[1])
	}
}

// Heterogeneous ranks: equal counts leave the slow rank far behind; the
// fluid target gives each rank equal time, not equal work.
func TestRebalanceEpoch_HeterogeneousRanksGetEqualTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	sizes := make([]float64, 4000)
	for i := range sizes {
		sizes[i] = math.Pow(64, rng.Float64())
	}
	models := []LinearModel{{A: 1.0 / 400, B: 1}, {A: 1.0 / 400, B: 1}, {A: 1.0 / 200, B: 1}, {A: 1.0 / 200, B: 1}}
	parts := make([][]int, 4)
	for i := range sizes {
		parts[i%4] = append(parts[i%4], i)
	}
	rb, err := RebalanceEpoch(parts, sizes, models)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Max(rb.After) > rb.Target*1.01 {
		t.Fatalf("after max %v, more than 1%% above the fluid target %v (before %v)", slices.Max(rb.After), rb.Target, slices.Max(rb.Before))
	}
	if speedup := slices.Max(rb.Before) / slices.Max(rb.After); speedup < 1.3 {
		t.Fatalf("speed-up %v; equal counts on 2:1 ranks should leave ≥ 1.3× on the table", speedup)
	}
}

// Property: samples are preserved exactly, the slowest rank never gets
// slower, After matches the returned partitions, and Moved counts them.
func TestRebalanceEpoch_PreservesSamplesAndNeverSlowsDown(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	for trial := range 300 {
		m := 1 + rng.IntN(12)
		models := make([]LinearModel, m)
		for r := range models {
			models[r] = LinearModel{A: 0.1 + rng.Float64(), B: 5 * rng.Float64()}
			if rng.IntN(10) == 0 {
				models[r].A = 0
			}
		}
		n := rng.IntN(300)
		sizes := make([]float64, n)
		parts := make([][]int, m)
		for i := range sizes {
			sizes[i] = 1 + 63*rng.Float64()
			r := rng.IntN(m)
			if rng.IntN(2) == 0 {
				r = 0 // skew
			}
			parts[r] = append(parts[r], i)
		}
		rb, err := RebalanceEpoch(parts, sizes, models)
		if err != nil {
			t.Fatal(err)
		}
		var all []int
		moved := 0
		for r, p := range rb.Parts {
			all = append(all, p...)
			for _, j := range p {
				if !slices.Contains(parts[r], j) {
					moved++
				}
			}
			if want := epochTime(p, sizes, models[r]); math.Abs(want-rb.After[r]) > 1e-9*(1+want) {
				t.Fatalf("trial %d: rank %d After %v, partition implies %v", trial, r, rb.After[r], want)
			}
		}
		slices.Sort(all)
		for i, j := range all {
			if i != j {
				t.Fatalf("trial %d: samples not preserved: %v", trial, all)
			}
		}
		if len(all) != n || moved != rb.Moved {
			t.Fatalf("trial %d: %d samples (want %d), moved %d (reported %d)", trial, len(all), n, moved, rb.Moved)
		}
		if slices.Max(rb.After) > slices.Max(rb.Before)*(1+1e-12) {
			t.Fatalf("trial %d: slowest rank got slower: %v → %v", trial, slices.Max(rb.Before), slices.Max(rb.After))
		}
	}
}

func benchRebalance(b *testing.B, m, perRank int) {
	rng := rand.New(rand.NewPCG(1, 2))
	models := make([]LinearModel, m)
	for r := range models {
		models[r] = LinearModel{A: 1 / (100 + 300*rng.Float64()), B: rng.Float64()}
	}
	sizes := make([]float64, m*perRank)
	parts := make([][]int, m)
	for i := range sizes {
		sizes[i] = math.Pow(64, rng.Float64())
		parts[i%m] = append(parts[i%m], i)
	}
	for b.Loop() {
		if _, err := RebalanceEpoch(parts, sizes, models); err != nil {
			b.Fatal(err)
		}
	}
}

// 1000 ranks with speeds spread 4:1 and equal counts: about half of the
// ranks shed samples.
func BenchmarkRebalanceEpoch1000Ranks10PerRank(b *testing.B)  { benchRebalance(b, 1000, 10) }
func BenchmarkRebalanceEpoch1000Ranks100PerRank(b *testing.B) { benchRebalance(b, 1000, 100) }

// shedSorted is the reference: walk the samples in decreasing size.
func shedSorted(part []int, sizes []float64, a, over float64) []int {
	desc := decreasingSizeOrder(sizes, part)
	var out []int
	for over > 0 && len(desc) > 0 {
		k := len(desc)
		for i, j := range desc {
			if a*sizes[j] <= over {
				k = i
				break
			}
		}
		if k == len(desc) {
			k = len(desc) - 1
			if a*sizes[desc[k]] >= 2*over {
				break
			}
		}
		out = append(out, desc[k])
		over -= a * sizes[desc[k]]
		desc = slices.Delete(desc, k, k+1)
	}
	return out
}

// The scan-then-sort shedding must pick exactly what the sorted walk
// picks, in the same order, on both sides of the scan budget.
func TestShedOverflow_MatchesSortedWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 28))
	for trial := range 2000 {
		n := rng.IntN(60)
		sizes := make([]float64, n)
		for i := range sizes {
			sizes[i] = float64(1 + rng.IntN(1+trial%20)) // many ties
		}
		part := rng.Perm(n)[:rng.IntN(n+1)]
		a := 0.5 + rng.Float64()
		over := rng.Float64() * 30 * float64(1+trial%5)
		got, want := shedOverflow(part, sizes, a, over), shedSorted(part, sizes, a, over)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: shed %v, sorted walk sheds %v (over %v, a %v)", trial, got, want, over, a)
		}
	}
}
