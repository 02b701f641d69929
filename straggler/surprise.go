package straggler

import "math"

// surpriseAlpha smooths the steps' surprise: about the last five steps
// count, so a pattern that turns unpredictable is met within a step or
// two. surpriseLongAlpha is the long memory's: rare, heavy misses (FlexRR's
// slow workers, a rank 4× slow for a few steps every few dozen) cost on
// average what their mean says, and reassignment that waits for each
// episode's first late step has already lost it; the long memory is the
// plain mean until it has seen 1/surpriseLongAlpha steps, so one early
// miss does not hold it up for long.
//
// surpriseWarmup is how many steps' surprise must be measured before the
// predictions are trusted: until then every plan reassigns (nothing yet
// says the predictions hold, and a rank slow from the first step would
// otherwise hold up the steps that measure it).
const (
	surpriseAlpha     = 0.2
	surpriseLongAlpha = 0.02
	surpriseWarmup    = 3
)

// surprise is the estimation of what predictions miss: over the recent
// steps, how much later than predicted the slowest rank would have
// finished its planned share. Shares balance what the estimator predicts;
// in-step reassignment (Reassigner) removes what it does not, at a cost
// of its own (a unit in progress cannot move, messages, a wait for the
// owners' grants), so the decision reassigns only while the predictions
// miss by more than that cost (Config.ReassignAt).
//
// A step's surprise is max(0, M_would/M_pred − 1): M_pred the largest
// predicted compute of a member's share under the plan that governed the
// step, M_would the largest compute a member would have spent on its
// share at the rate it showed in the step — its compute scaled from the
// rows it computed to its share (under reassignment a rank computes
// more or fewer rows than its share), or, for a rank whose every unit
// moved away, the time it spent before computing any plus its predicted
// compute. Scaling a fixed delay with the rows overstates a rank that
// gave rows away: it was late, which is what surprise measures.
//
// Two smoothings are kept, and the larger counts: a short one that meets
// a pattern turning unpredictable, and a long one that keeps the mean of
// rare misses.
type surprise struct {
	mean, long float64
	n          int
}

// observe adds one step's report under plan (the plan that governed it),
// with over the overheads the plan's predictions were made with. A step
// without predictions, or under a budget (a rank computes for a time, not
// a share), adds nothing.
func (s *surprise) observe(rep Report, plan Plan, over []float64) {
	if plan.Budget > 0 || len(plan.Predicted) != len(rep.Current) || len(plan.Shares) != len(rep.Current) {
		return
	}
	var pred, would float64
	for r := range rep.Current {
		rr := &rep.Current[r]
		share := plan.Shares[r]
		if !rr.Present || share <= 0 || rr.Cut {
			continue
		}
		p := float64(plan.Predicted[r]) - math.Round(over[r])
		if plan.Predicted[r] <= 0 || p <= 0 {
			return // a member without a prediction: nothing was predicted
		}
		w := float64(rr.Compute) + p // nothing computed: its wait, then its share as predicted
		if rr.Samples > 0 {
			w = float64(rr.Compute) * float64(share) / float64(rr.Samples)
		}
		pred, would = max(pred, p), max(would, w)
	}
	if pred <= 0 {
		return
	}
	v := max(0, would/pred-1)
	if s.n == 0 {
		s.mean = v
	} else {
		s.mean += surpriseAlpha * (v - s.mean)
	}
	s.n++
	s.long += max(surpriseLongAlpha, 1/float64(s.n)) * (v - s.long)
}

// value is the smoothed surprise, the larger of the short and the long
// memory's (0 before any step was predicted).
func (s *surprise) value() float64 { return max(s.mean, s.long) }

// trusted reports whether enough steps' surprise has been measured to
// trust the predictions (surpriseWarmup).
func (s *surprise) trusted() bool { return s.n >= surpriseWarmup }

// reassignNext decides whether the next plan reassigns: while the
// predictions are not yet trusted, and then while the smoothed surprise
// is at least at and, once on, until it falls below half of it (a step's
// surprise is noisy; switching costs nothing, but a flapping choice pays
// reassignment's cost without its gain). A negative at reassigns every
// step.
func reassignNext(on, trusted bool, value, at float64) bool {
	switch {
	case at < 0 || !trusted:
		return true
	case on:
		return value >= at/2
	}
	return value >= at
}
