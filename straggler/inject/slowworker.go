package inject

import (
	"math"
	"sort"
)

// SlowWorker is FlexRR's slow-worker pattern (§5.1), read as follows.
//
// At each of 10 delay points of an iteration — at 0, 1/10, …, 9/10 of its
// progress — each rank independently starts, with probability Prob, a
// slowdown lasting a period drawn uniformly from [0, 2) iterations. Periods
// are measured in units of unslowed iterations (the progress the rank makes),
// so they spill into the next one or two iterations, and overlapping periods
// merge (a rank is either slowed or not). While slowed, a rank runs
// (1 + DelayPercent/100) times slower: FlexRR inserts d·t/1000 of sleep at
// each of 1000 points of a t-long iteration, i.e. an iteration spent wholly
// slowed takes (1+d)·t ("100% delay means runs twice as slow"). The extra
// time of an iteration is therefore d·t·c, where c ∈ [0,1] is the fraction
// of the iteration's progress covered by slowdown periods.
//
// Measuring periods in progress rather than wall time is the one liberty
// taken; it keeps the pattern a pure function of (seed, rank, step) that does
// not depend on the durations of earlier steps.
type SlowWorker struct {
	// Prob is the probability of starting a slowdown at each delay point,
	// in (0, 1]. FlexRR uses 0.01.
	Prob float64
	// DelayPercent is the transient delay intensity d in percent (> 0).
	DelayPercent float64
}

const (
	// slowWorkerPoints is the number of delay points per iteration.
	slowWorkerPoints = 10
	// slowWorkerMaxPeriod is the longest slowdown, in iterations.
	slowWorkerMaxPeriod = 2.0
)

func (w SlowWorker) clause() string {
	return "flexrr-slow=" + formatFloat(w.Prob) + ":" + formatFloat(w.DelayPercent) + "%"
}

func (w SlowWorker) validate() error {
	if !(w.Prob > 0 && w.Prob <= 1) {
		return &SpecError{Clause: w.clause(), Reason: "probability must be in (0, 1]"}
	}
	if !(w.DelayPercent > 0) || math.IsInf(w.DelayPercent, 0) {
		return &SpecError{Clause: w.clause(), Reason: "delay must be a finite percentage > 0"}
	}
	return nil
}

// coverage returns the fraction of step's progress that rank spends slowed,
// and whether it is slowed at the very end of the step.
func (w SlowWorker) coverage(seed uint64, rank, step int) (covered float64, atEnd bool) {
	type span struct{ lo, hi float64 }
	var buf [3 * slowWorkerPoints]span
	spans := buf[:0]
	lo, hi := float64(step), float64(step+1)
	// A period started in step s reaches at most s + 0.9 + 2 < s + 3.
	for s := step - int(slowWorkerMaxPeriod); s <= step; s++ {
		if s < 0 {
			continue
		}
		for k := 0; k < slowWorkerPoints; k++ {
			st := newStream(seed, patternSlowWorker, rank, s, k)
			if st.float64() >= w.Prob {
				continue
			}
			start := float64(s) + float64(k)/slowWorkerPoints
			end := start + slowWorkerMaxPeriod*st.float64()
			a, b := math.Max(start, lo), math.Min(end, hi)
			if b > a {
				spans = append(spans, span{a, b})
			}
			if start < hi && end >= hi {
				atEnd = true
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	cur := lo
	for _, sp := range spans {
		if sp.hi <= cur {
			continue
		}
		covered += sp.hi - math.Max(sp.lo, cur)
		cur = sp.hi
	}
	return covered, atEnd
}
