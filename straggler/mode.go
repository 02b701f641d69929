package straggler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Mode is the all-reduce mode of a step.
type Mode int

const (
	// ModeRing is the plain ring over all ranks (BSP).
	ModeRing Mode = iota
	// ModeEvict is the ring without the evicted ranks, each of which sends
	// its gradient to a parent that waits up to t_w (STAR §IV-B).
	ModeEvict
)

// String returns "ring" or "evict".
func (m Mode) String() string {
	switch m {
	case ModeRing:
		return "ring"
	case ModeEvict:
		return "evict"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// MarshalText encodes the mode as its name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// ModeInput is what ChooseMode decides from.
type ModeInput struct {
	// Arrivals are the predicted arrivals at the collective, by rank.
	Arrivals []time.Duration
	// Collective is the predicted duration of the ring collective once
	// every ring member has arrived (C).
	Collective time.Duration
	// Phi is the gradient noise scale φ in samples (≥ 0).
	Phi float64
	// GlobalBatch is M, the samples of one step summed over all ranks.
	GlobalBatch int
	// Threshold is the straggler deviation ratio (STAR/FlexRR: 0.2): rank
	// i is a straggler when a_i > (1+Threshold)·min_j a_j.
	Threshold float64
	// MaxEvict caps x; at most len(Arrivals)−1 ranks are ever evicted.
	MaxEvict int
	// WaitCandidates are extra t_w values to weigh, besides each x's own
	// ring spread; they need not be sorted.
	WaitCandidates []time.Duration
}

// Candidate is one (x, t_w) the mode choice weighed, with the terms of
// STAR Eq. 3.
type Candidate struct {
	// Evict is x, the number of evicted ranks (0 = plain ring).
	Evict int
	// Wait is t_w, measured from the fastest predicted arrival.
	Wait time.Duration
	// InTime is q, the evicted ranks predicted to arrive within t_w.
	InTime int
	// RingTime is t_ring = fastest predicted arrival + collective.
	RingTime time.Duration
	// Updates is 1 + φ/((N−x+q)·M/N), the relative number of updates the
	// mode needs for the same progress.
	Updates float64
	// Cost is T_a = Updates·(t_ring + t_w), in seconds.
	Cost float64
}

// Choice is the result of ChooseMode.
type Choice struct {
	// Mode is ModeRing when x = 0, else ModeEvict.
	Mode Mode
	// Evicted are the evicted ranks, sorted.
	Evicted []int
	// Wait is the chosen t_w. For ModeRing it is the predicted spread of
	// arrivals, max − min.
	Wait time.Duration
	// Deadline is the fastest predicted arrival plus t_w, from the start
	// of the step: when parents stop waiting for their children.
	Deadline time.Duration
	// Cost is the chosen candidate's T_a in seconds.
	Cost float64
	// Stragglers are the predicted stragglers, sorted.
	Stragglers []int
	// Candidates are all candidates weighed, in (x, t_w) order.
	Candidates []Candidate
}

// ChooseMode picks the all-reduce mode that minimises STAR Eq. 3,
//
//	T_a = (1 + φ/((N−x+q)·M/N)) · (t_ring + t_w),
//
// over x ∈ 0..X and t_w, where X = min(#predicted stragglers, MaxEvict,
// N−1) and the evicted ranks are always the x latest predicted arrivals.
// Times are measured from the step start: t_ring is the fastest predicted
// arrival a_min plus the collective C, and t_w is the wait after a_min
// that the step tolerates, so it is never less than the spread of the ring
// members, s_x = max_{ring} a − a_min. For x = 0 this gives the plain ring
// exactly: t_w = max − min and t_ring + t_w = max arrival + C. For each x the
// candidates are t_w = s_x and every WaitCandidates value above s_x; q
// counts the evicted ranks with a − a_min ≤ t_w. Ties go to the smaller x,
// then the smaller t_w, so equal costs never cause an eviction.
func ChooseMode(in ModeInput) (Choice, error) {
	n := len(in.Arrivals)
	switch {
	case n == 0:
		return Choice{}, fmt.Errorf("choose mode: no arrivals: %w", ErrInvalidConfig)
	case in.GlobalBatch < 1 || !(in.Phi >= 0) || math.IsInf(in.Phi, 0) || !(in.Threshold >= 0) || in.MaxEvict < 0 || in.Collective < 0:
		return Choice{}, fmt.Errorf("choose mode: need M ≥ 1, finite φ ≥ 0, threshold ≥ 0, MaxEvict ≥ 0, C ≥ 0: %w", ErrInvalidConfig)
	}
	type ranked struct {
		a    time.Duration
		rank int
	}
	byArrival := make([]ranked, n)
	for r, a := range in.Arrivals {
		byArrival[r] = ranked{a, r}
	}
	slices.SortFunc(byArrival, func(x, y ranked) int {
		if x.a != y.a {
			return cmp.Compare(x.a, y.a)
		}
		return cmp.Compare(x.rank, y.rank)
	})
	order := make([]int, n)
	sorted := make([]time.Duration, n)
	for i, ra := range byArrival {
		order[i], sorted[i] = ra.rank, ra.a
	}
	amin := sorted[0]
	limit := time.Duration(float64(amin) * (1 + in.Threshold))
	firstStraggler := sort.Search(n, func(i int) bool { return sorted[i] > limit })
	stragglers := slices.Clone(order[firstStraggler:])
	slices.Sort(stragglers)

	maxEvict := min(n-firstStraggler, in.MaxEvict, n-1)
	waits := slices.Clone(in.WaitCandidates)
	slices.Sort(waits)
	perRank := float64(in.GlobalBatch) / float64(n)
	ringTime := amin + in.Collective
	eval := func(x int, wait time.Duration) Candidate {
		// q = evicted ranks (sorted[n−x:]) arriving by amin + wait.
		q := max(0, sort.Search(n, func(i int) bool { return sorted[i]-amin > wait })-(n-x))
		updates := 1 + in.Phi/(float64(n-x+q)*perRank)
		return Candidate{Evict: x, Wait: wait, InTime: q, RingTime: ringTime, Updates: updates,
			Cost: updates * (ringTime + wait).Seconds()}
	}
	cands := make([]Candidate, 0, (maxEvict+1)*(len(waits)+1))
	best := -1
	for x := 0; x <= maxEvict; x++ {
		spread := sorted[n-x-1] - amin
		consider := func(c Candidate) {
			cands = append(cands, c)
			if best < 0 || c.Cost < cands[best].Cost*(1-1e-12) {
				best = len(cands) - 1
			}
		}
		consider(eval(x, spread))
		if x == 0 {
			continue // nothing to wait for beyond the ring itself
		}
		for _, w := range waits {
			if w > spread && (len(cands) == 0 || w != cands[len(cands)-1].Wait) {
				consider(eval(x, w))
			}
		}
	}
	b := cands[best]
	ch := Choice{Mode: ModeRing, Wait: b.Wait, Deadline: amin + b.Wait, Cost: b.Cost, Stragglers: stragglers, Candidates: cands}
	if b.Evict > 0 {
		ch.Mode = ModeEvict
		ch.Evicted = slices.Clone(order[n-b.Evict:])
		slices.Sort(ch.Evicted)
	}
	return ch, nil
}
