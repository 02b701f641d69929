package straggler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// ModeInput is what ChooseMode decides from: predictions for the next
// step.
type ModeInput struct {
	// Arrivals are the predicted arrivals at the reduction, by rank, under
	// Shares (measured from the step start).
	Arrivals []time.Duration
	// Shares are the samples each rank computes per iteration.
	Shares []int
	// Collective predicts the reduction time among members (ascending
	// ranks) once they have all arrived.
	Collective func(members []int) time.Duration
	// Cycle is each rank's predicted iteration time as a child: its
	// compute plus sending its gradient to a parent (0: unknown, taken as
	// its arrival plus the reduction among everyone).
	Cycle []time.Duration
	// Phi is the gradient noise scale φ in samples.
	Phi float64
	// Threshold is the straggler deviation ratio (STAR/FlexRR: 0.2).
	Threshold float64
	// MaxEvict caps the evicted ranks.
	MaxEvict int
	// Evict, Overlap and Exclude enable those modes.
	Evict, Overlap, Exclude bool
	// Reassign predicts, for the exact eviction (ModeExclude), the
	// arrivals (by rank) of members that take the evicted ranks' rows
	// between them; nil: ModeExclude is not weighed.
	Reassign func(members []int) []time.Duration
	// DiscountStale prices a child's gradient by the progress it buys: a
	// gradient τ steps stale counts 1/(1+τ) of a fresh one (staleness-
	// aware SGD), τ being the steps its cycle spans, plus one. Without
	// it, STAR's Eq. 3: a child's samples count whole.
	DiscountStale bool
	// LateUnits is how many units each early rank's segment is cut into
	// in the exact mode's completion (ring.AllReduceLate; 0: 16). Fewer
	// units pipeline worse: the completion after the late rank arrives
	// costs G/B·(1 + (2m−2)/(u·m)) for m early ranks.
	LateUnits int
	// WorstLinks orders ranks by their slowest link, worst first (nil
	// without link measurements): eviction candidates besides the latest
	// arrivals, for stragglers that compute on time but reduce slowly.
	WorstLinks []int
	// Pinned ranks are never evicted (the parents of children that stay
	// evicted: a child keeps its parent while it is a child).
	Pinned []int
	// Confirmed, when not nil, are the only ranks that may be newly
	// evicted: those observed late in two reports in a row and predicted
	// late now (or already children, or behind a slow link), so that one
	// noisy step evicts nobody.
	Confirmed []int
	// Ranks, when not nil, is every rank in order (0…n−1), which the ring
	// and the exact mode are among: a caller deciding every step keeps
	// one rather than have ChooseMode build it each time.
	Ranks []int
}

// Choice is the mode ChooseMode picked, with every mode it weighed.
type Choice struct {
	ModeCost
	// Members are the ranks in the ring, ascending.
	Members []int
	// Stragglers are the ranks predicted more than Threshold after the
	// fastest, ascending.
	Stragglers []int
	// Costs lists the modes weighed, in the order weighed.
	Costs []ModeCost
}

// ChooseMode picks the mode with the least predicted time to progress,
// STAR Eq. 3 extended to the exact modes and to children at their own
// pace:
//
//	cost = (1 + φ/B) · T
//
// where T is the predicted step time and B the samples a step applies,
// (1 + φ/B) being the relative number of updates needed for the same
// progress with B samples per update (McCandlish et al., STAR Eq. 1).
//
//   - ring: T = max_r a_r + C(all), B = Σ shares.
//   - overlap (the latest rank L arrives into a reduction the others have
//     reduce-scattered among themselves; G/B = C(all)·n/(2(n−1)), m = n−1
//     early ranks, u units per segment): T = G/B·(1 + (2m−2)/(u·m)) plus
//     max(a_L, a₂ + G/B·(m−1)/m), B = Σ shares — the same sum, exactly.
//   - evict a set E (the x latest arrivals, or the x ranks with the worst
//     links): T = max over the members of a + C(members), B = the members'
//     shares + each child's share at the rate its cycle keeps up,
//     share_c · min(1, T/cycle_c) — discounted by 1/(1+τ_c) with
//     DiscountStale, τ_c = ⌈cycle_c/T⌉ + 1 the staleness its gradients
//     arrive with.
//   - exclude a set E (ModeExclude; the same candidates): the members take
//     E's rows, T = max over the members of their arrival with the larger
//     shares (Reassign) + C(members), B = Σ shares — every sample, fresh.
//
// Ties go to the earlier candidate (ring, overlap, then fewer evictions,
// exact before stale), so equal costs never change the mode.
func ChooseMode(in ModeInput) (Choice, error) {
	n := len(in.Arrivals)
	switch {
	case n == 0:
		return Choice{}, fmt.Errorf("choose mode: no arrivals: %w", ErrInvalidConfig)
	case len(in.Shares) != n || (in.Cycle != nil && len(in.Cycle) != n) || in.Collective == nil:
		return Choice{}, fmt.Errorf("choose mode: %d arrivals, %d shares, %d cycles, collective %v: %w",
			n, len(in.Shares), len(in.Cycle), in.Collective != nil, ErrInvalidConfig)
	case in.Ranks != nil && len(in.Ranks) != n:
		return Choice{}, fmt.Errorf("choose mode: %d ranks for %d arrivals: %w", len(in.Ranks), n, ErrInvalidConfig)
	case !(in.Phi >= 0) || math.IsInf(in.Phi, 0) || !(in.Threshold >= 0) || in.MaxEvict < 0:
		return Choice{}, fmt.Errorf("choose mode: need finite φ ≥ 0, threshold ≥ 0, MaxEvict ≥ 0: %w", ErrInvalidConfig)
	}
	// Ranks by predicted arrival, earliest first, ties by rank: only the
	// latest few matter (the stragglers, and the two latest for the exact
	// mode), so only they are sorted — at 16,384 ranks a full sort would
	// be a good part of a decision.
	byArrival := func(x, y int) int {
		if c := cmp.Compare(in.Arrivals[x], in.Arrivals[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	}
	amin := slices.Min(in.Arrivals)
	var stragglers []int
	for r, a := range in.Arrivals {
		if float64(a) > float64(amin)*(1+in.Threshold) {
			stragglers = append(stragglers, r)
		}
	}
	late := slices.SortedStableFunc(slices.Values(stragglers), byArrival)
	// latest returns order[n−1−i] of the full order: the (i+1)-th latest.
	latestOf := func(i int) int {
		if i < len(late) {
			return late[len(late)-1-i]
		}
		// Among the ranks that are not stragglers, the k-th latest (k ≤ 2
		// here: one scan keeping the k latest).
		k := i - len(late) + 1
		top := make([]int, k) // latest first; −1: none yet
		for j := range top {
			top[j] = -1
		}
		s := 0 // stragglers[s] is the next straggler by rank
		for r, a := range in.Arrivals {
			if s < len(stragglers) && stragglers[s] == r {
				s++
				continue
			}
			if top[k-1] >= 0 && a < in.Arrivals[top[k-1]] {
				continue // earlier than the k latest so far (ties go to the higher rank)
			}
			j := k - 1
			for ; j > 0 && (top[j-1] < 0 || byArrival(r, top[j-1]) > 0); j-- {
				top[j] = top[j-1]
			}
			top[j] = r
		}
		return top[k-1]
	}

	all := in.Ranks
	if all == nil {
		all = allRanks(n)
	}
	total := 0
	for _, s := range in.Shares {
		total += s
	}
	cost := func(t time.Duration, b float64) float64 {
		if b <= 0 {
			return math.Inf(1)
		}
		return (1 + in.Phi/b) * t.Seconds()
	}
	var costs []ModeCost
	best, bestMembers := -1, all
	consider := func(mc ModeCost, members []int) {
		costs = append(costs, mc)
		if best < 0 || mc.Cost < costs[best].Cost*(1-1e-9) {
			best, bestMembers = len(costs)-1, members
		}
	}
	cAll := in.Collective(all)
	last := latestOf(0)
	latest := in.Arrivals[last]
	ring := latest + cAll
	consider(ModeCost{Mode: ModeRing, Late: -1, Time: ring, Samples: float64(total), Cost: cost(ring, float64(total))}, all)

	if in.Overlap && n > 2 && slices.Contains(stragglers, last) {
		// Only for a rank predicted late (Threshold): the model's margin
		// for one merely a little behind is smaller than the exact
		// mode's costs it leaves out (more, smaller messages).
		second := in.Arrivals[latestOf(1)]
		// The ring moves G/B·2(n−1)/n; the early ranks' reduce-scatter
		// G/B·(m−1)/m; the completion G/B·(1 + (2m−2)/(u·m)) — so with
		// nobody late the exact mode costs more than the ring, and is
		// worth it only when the late rank is late enough.
		k, m := float64(n), float64(n-1)
		u := float64(in.LateUnits)
		if u <= 0 {
			u = 16
		}
		gb := float64(cAll) * k / (2 * (k - 1))
		before := time.Duration(gb * (m - 1) / m)
		after := time.Duration(gb * (1 + (2*m-2)/(u*m)))
		t := max(latest, second+before) + after
		consider(ModeCost{Mode: ModeOverlap, Late: last, Time: t, Samples: float64(total), Cost: cost(t, float64(total))}, all)
	}

	exclude := in.Exclude && in.Reassign != nil
	if (in.Evict || exclude) && n > 1 {
		seen := map[string]bool{}
		tryEvict := func(evicted []int) {
			e := slices.Clone(evicted)
			slices.Sort(e)
			for _, r := range e {
				if slices.Contains(in.Pinned, r) || in.Confirmed != nil && !slices.Contains(in.Confirmed, r) {
					return
				}
			}
			key := fmt.Sprint(e)
			if seen[key] {
				return
			}
			seen[key] = true
			members := make([]int, 0, n-len(e))
			for r := 0; r < n; r++ {
				if _, out := slices.BinarySearch(e, r); !out {
					members = append(members, r)
				}
			}
			if exclude {
				arr := in.Reassign(members)
				slowest := time.Duration(0)
				for _, m := range members {
					slowest = max(slowest, arr[m])
				}
				t := slowest + in.Collective(members)
				consider(ModeCost{Mode: ModeExclude, Late: -1, Evicted: e, Time: t, Samples: float64(total), Cost: cost(t, float64(total))}, members)
			}
			if !in.Evict {
				return
			}
			slowest := time.Duration(0)
			samples := 0.0
			for _, m := range members {
				slowest = max(slowest, in.Arrivals[m])
				samples += float64(in.Shares[m])
			}
			t := slowest + in.Collective(members)
			for _, c := range e {
				cycle := in.Arrivals[c] + cAll
				if in.Cycle != nil && in.Cycle[c] > 0 {
					cycle = in.Cycle[c]
				}
				worth := math.Min(1, float64(t)/float64(max(cycle, 1)))
				if in.DiscountStale {
					worth /= 2 + math.Ceil(float64(cycle)/float64(max(t, 1)))
				}
				samples += float64(in.Shares[c]) * worth
			}
			consider(ModeCost{Mode: ModeEvict, Late: -1, Evicted: e, Time: t, Samples: samples, Cost: cost(t, samples)}, members)
		}
		for x := 1; x <= min(in.MaxEvict, n-1); x++ {
			if x <= len(stragglers) {
				tryEvict(late[len(late)-x:])
			}
			if len(in.WorstLinks) >= x {
				tryEvict(in.WorstLinks[:x])
			}
		}
	}
	return Choice{ModeCost: costs[best], Members: bestMembers, Stragglers: stragglers, Costs: costs}, nil
}
