package balance

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Packing assigns the samples of one step to ranks.
type Packing struct {
	// Rank[j] is the rank that trains sample j.
	Rank []int
	// Load[r] is rank r's predicted step time: B_r + A_r·Σ sizes assigned.
	Load []float64
}

// PackStep distributes one step's variable-size samples over ranks so their
// predicted times are as equal as possible (CHRONICA §V-B, Alg. 2): samples
// are taken in decreasing size (ties by index) and each goes to the rank on
// which it would finish earliest, B_r + A_r·(assigned + size) (ties by rank
// index). This is LPT list scheduling on uniform machines whose ready
// times are the per-step intercepts B_r.
//
// Bounds. With all B_r = 0 it is the LPT rule of Gonzalez, Ibarra and Sahni
// (1977): makespan ≤ 2m/(m+1)·OPT for m ranks (≤ (4/3 − 1/(3m))·OPT when the
// ranks are identical, Graham 1969). With intercepts, and when every rank is
// busy at the fluid optimum τ* (B_r ≤ τ*, A_r > 0), the last sample s placed
// on the critical rank gives the additive bound
//
//	makespan ≤ τ* + (m−1)·s_max / Σ_r 1/A_r,  τ* ≤ OPT,
//
// where τ* solves Σ_r (τ* − B_r)/A_r = Σ sizes (FluidMakespan). Both bounds
// are checked by the tests (the first against brute force).
//
// Cost: O(n log n + n·log m) amortised for n samples and m ranks (see
// tournament).
func PackStep(sizes []float64, models []LinearModel) (Packing, error) {
	if err := validatePackInput(sizes, models); err != nil {
		return Packing{}, err
	}
	p := Packing{Rank: make([]int, len(sizes)), Load: make([]float64, len(models))}
	for r, m := range models {
		p.Load[r] = m.B
	}
	order := decreasingSizeOrder(sizes, allSamples(len(sizes)))
	lptAssign(order, sizes, models, p.Load, func(j, r int) { p.Rank[j] = r })
	return p, nil
}

func validatePackInput(sizes []float64, models []LinearModel) error {
	if len(models) == 0 {
		return fmt.Errorf("%w: no ranks", ErrInvalidInput)
	}
	for r, m := range models {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	for j, s := range sizes {
		if !(s >= 0) || math.IsInf(s, 0) {
			return fmt.Errorf("%w: sample %d size %v must be finite and non-negative", ErrInvalidInput, j, s)
		}
	}
	return nil
}

// decreasingSizeOrder returns the sample indices idx sorted by decreasing
// size, ties by increasing index.
func decreasingSizeOrder(sizes []float64, idx []int) []int {
	type item struct {
		size float64
		j    int
	}
	items := make([]item, len(idx))
	for i, j := range idx {
		items[i] = item{sizes[j], j}
	}
	slices.SortFunc(items, func(a, b item) int {
		if a.size != b.size {
			if a.size > b.size {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.j, b.j)
	})
	order := make([]int, len(items))
	for i, it := range items {
		order[i] = it.j
	}
	return order
}

// allSamples returns 0..n-1.
func allSamples(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// lptAssign places each sample of order (sizes non-increasing) on the rank
// minimising load[r] + A_r·size (ties: lowest r), updating load and calling
// place. Small rank counts scan; larger ones use a kinetic tournament.
func lptAssign(order []int, sizes []float64, models []LinearModel, load []float64, place func(sample, rank int)) {
	if len(models) <= 16 || len(order) < 4 {
		for _, j := range order {
			s := sizes[j]
			best, bestT := 0, math.Inf(1)
			for r, m := range models {
				if t := load[r] + m.A*s; t < bestT {
					best, bestT = r, t
				}
			}
			load[best] = bestT
			place(j, best)
		}
		return
	}
	t := newTournament(models, load, sizes[order[0]])
	for _, j := range order {
		r, v := t.best(sizes[j])
		t.set(r, v, sizes[j])
		load[r] = v
		place(j, r)
	}
}

// FluidMakespan returns τ*, the makespan if sizes were infinitely divisible:
// the smallest τ with Σ_r max(0, (τ − B_r)/A_r) ≥ total (a rank with A_r = 0
// absorbs everything once τ ≥ B_r). It is a lower bound on every packing's
// makespan and the target of RebalanceEpoch.
func FluidMakespan(total float64, models []LinearModel) float64 {
	capacity := func(tau float64) float64 {
		c := 0.0
		for _, m := range models {
			if tau < m.B {
				continue
			}
			if m.A == 0 {
				return math.Inf(1)
			}
			c += (tau - m.B) / m.A
		}
		return c
	}
	// capacity(lo) = 0 ≤ total; capacity(hi) ≥ total because the rank
	// attaining the maximum could train everything alone by hi.
	lo, hi := math.Inf(1), 0.0
	for _, m := range models {
		lo = math.Min(lo, m.B)
		hi = math.Max(hi, m.Predict(total))
	}
	if total <= 0 {
		return lo
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if capacity(mid) >= total {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
