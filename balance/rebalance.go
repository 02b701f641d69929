package balance

import (
	"fmt"
	"slices"
)

// Rebalance is the result of RebalanceEpoch.
type Rebalance struct {
	// Parts[r] lists the sample indices rank r trains next epoch: the
	// samples it kept, in their old order, then those moved to it.
	Parts [][]int
	// Moved is how many samples changed rank.
	Moved int
	// Before and After are the per-rank predicted epoch times
	// B_r + A_r·Σ sizes, before and after the move.
	Before, After []float64
	// Target is the fluid optimum τ* the shuffler aims at.
	Target float64
}

// RebalanceEpoch is CHRONICA's data shuffler (§V-C, Alg. 3): between epochs
// it moves samples from ranks predicted to finish late to ranks predicted to
// finish early, moving as few samples as it can. models[r] gives rank r's
// epoch time as B_r + A_r·Σ sizes (B_r is the per-epoch fixed cost).
//
// Each overloaded rank (time above the target) puts samples into storage,
// each time the largest sample whose time A_r·size fits in the remaining
// overflow (or, when none fits, the smallest sample if that brings the rank
// closer to the target). Storage is then placed largest first on the rank
// that would finish it earliest, with the sample's time recomputed for the
// receiving rank (Alg. 3 line 23).
//
// Deviation from Alg. 3: the paper's target is the mean of the rank times,
// which is only right for identical ranks; here it is the fluid optimum τ*
// (FluidMakespan), so heterogeneous ranks end up with equal times rather
// than equal work. Every placement finishes no later than its origin rank
// did before, so the slowest rank never gets slower (max After ≤ max Before).
func RebalanceEpoch(parts [][]int, sizes []float64, models []LinearModel) (Rebalance, error) {
	if err := validatePackInput(sizes, models); err != nil {
		return Rebalance{}, err
	}
	if len(parts) != len(models) {
		return Rebalance{}, fmt.Errorf("%w: %d partitions for %d models", ErrInvalidInput, len(parts), len(models))
	}
	owner := make([]int, len(sizes))
	for i := range owner {
		owner[i] = -1
	}
	total := 0.0
	for r, p := range parts {
		for _, j := range p {
			if j < 0 || j >= len(sizes) {
				return Rebalance{}, fmt.Errorf("%w: rank %d holds sample %d outside [0, %d)", ErrInvalidInput, r, j, len(sizes))
			}
			if owner[j] >= 0 {
				return Rebalance{}, fmt.Errorf("%w: sample %d held by ranks %d and %d", ErrInvalidInput, j, owner[j], r)
			}
			owner[j] = r
			total += sizes[j]
		}
	}
	res := Rebalance{
		Before: make([]float64, len(models)),
		After:  make([]float64, len(models)),
		Parts:  make([][]int, len(models)),
		Target: FluidMakespan(total, models),
	}
	for r, p := range parts {
		res.Before[r] = epochTime(p, sizes, models[r])
	}
	copy(res.After, res.Before)

	removed := make([]bool, len(sizes))
	var storage []int
	for r, p := range parts {
		m := models[r]
		over := res.Before[r] - res.Target
		if over <= 0 || m.A == 0 {
			continue
		}
		for _, j := range shedOverflow(p, sizes, m.A, over) {
			res.After[r] -= m.A * sizes[j]
			removed[j] = true
			storage = append(storage, j)
		}
	}
	for r, p := range parts {
		for _, j := range p {
			if !removed[j] {
				res.Parts[r] = append(res.Parts[r], j)
			}
		}
	}
	lptAssign(decreasingSizeOrder(sizes, storage), sizes, models, res.After, func(j, r int) {
		res.Parts[r] = append(res.Parts[r], j)
		if r != owner[j] {
			res.Moved++
		}
	})
	return res, nil
}

// shedScans is how many removals shedOverflow does by linear scans
// before it sorts the rest (most ranks shed a handful of samples).
const shedScans = 8

// shedOverflow picks the samples an overloaded rank with slope a gives
// up to remove over seconds of work: repeatedly the largest sample whose
// time a·size fits in what is left (ties: lowest index), or, when none
// fits, the smallest sample (ties: highest index) if taking it gets closer
// to the target. That is the first, resp. last, sample in decreasing-size
// order, which is what the reference implementation in the tests walks.
func shedOverflow(part []int, sizes []float64, a, over float64) []int {
	cand := slices.Clone(part)
	var out []int
	take := func(pos int) {
		j := cand[pos]
		cand[pos] = cand[len(cand)-1]
		cand = cand[:len(cand)-1]
		over -= a * sizes[j]
		out = append(out, j)
	}
	for over > 0 && len(cand) > 0 && len(out) < shedScans {
		fit, small := -1, 0
		for pos, j := range cand {
			sj := sizes[j]
			if a*sj <= over && (fit < 0 || sj > sizes[cand[fit]] || (sj == sizes[cand[fit]] && j < cand[fit])) {
				fit = pos
			}
			if sj < sizes[cand[small]] || (sj == sizes[cand[small]] && j > cand[small]) {
				small = pos
			}
		}
		if fit < 0 {
			if a*sizes[cand[small]] >= 2*over {
				return out
			}
			fit = small
		}
		take(fit)
	}
	if over <= 0 || len(cand) == 0 {
		return out
	}
	desc := decreasingSizeOrder(sizes, cand)
	for over > 0 && len(desc) > 0 {
		// First (largest) sample whose time fits in the overflow.
		k, _ := slices.BinarySearchFunc(desc, over, func(j int, over float64) int {
			if a*sizes[j] > over {
				return -1
			}
			return 1
		})
		if k == len(desc) {
			k = len(desc) - 1
			if a*sizes[desc[k]] >= 2*over {
				break
			}
		}
		j := desc[k]
		desc = slices.Delete(desc, k, k+1)
		over -= a * sizes[j]
		out = append(out, j)
	}
	return out
}

// epochTime is B + A·Σ sizes over the samples in part.
func epochTime(part []int, sizes []float64, m LinearModel) float64 {
	s := 0.0
	for _, j := range part {
		s += sizes[j]
	}
	return m.Predict(s)
}
