package straggler

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
)

// estimator is the estimation half of the Policy: it takes each step's
// report and keeps what the decision needs to know about the ranks — each
// rank's forecast time per sample τ_r (a Predictor: RLS on the rank's
// telemetry — CPU, GPU utilisation and clock — or an EWMA scaled by the
// GPU clock), its overhead o_r from compute end to reduction entry (an
// EWMA of arrival − compute), its affine fit a_r + b_r·B_r (intercept.go),
// a child's cycle between gradients, the step it was last folded, how
// many reports in a row it arrived late, the class Monitor gives its
// equal-share arrival τ_r·M/N + o_r, the measured reduction time and the
// gradient noise scale φ. It decides nothing: the decision reads it
// through estimates alone.
type estimator struct {
	cfg   Config
	preds []Predictor // RLS (nil with EWMA, kept in ewmas by value: a decision at 16,384 ranks is memory-bound)
	ewmas []EWMA
	tau   []float64 // ns per sample, forecast
	over  []float64 // ns from compute end to reduction entry
	cycle []float64 // ns between a child's gradients (0: never a child)
	// cycles is cycle rounded to whole nanoseconds, as ChooseMode takes
	// it: updated with cycle, so a decision does not rebuild it.
	cycles   []time.Duration
	seen     []bool
	monitor  *Monitor
	coll     float64 // measured reduction time, ns
	collWith []int   // the members it was measured among
	hasColl  bool
	lastFold []int // last step a child gradient of the rank was folded (−1: none)
	lateRun  []int // consecutive reports in which the rank arrived late
	// noiseS and noiseG are the smoothed estimates of tr Σ (the per-sample
	// gradient variance) and |G|² (the true gradient's squared norm);
	// their ratio is the noise scale φ.
	noiseS, noiseG float64
	noiseN         int
	// clocks scale the EWMA's forecasts by each rank's GPU clock
	// (clockscale.go).
	clocks []clockScale
	// fits are the ranks' affine fits, compute = a + b·samples.
	fits []affineFit
	// surp is how much the predictions miss (surprise.go), measured only
	// for a policy that may reassign.
	surp surprise
}

// estimates is what the decision reads of the estimation, and all it
// reads: the per-rank slices are the estimator's own (views, not copies:
// at 16,384 ranks a copy per step would cost what a decision does), which
// the decision never writes; the functions read the estimator's current
// state. forgetLate is the one thing the decision tells the estimation: a
// rank it offers back into the ring is confirmed late again only by new
// reports.
type estimates struct {
	tau      []float64       // forecast ns per sample, by rank
	over     []float64       // ns from compute end to reduction entry
	cycles   []time.Duration // a child's time between gradients (0: never a child)
	seen     []bool          // the rank has been measured
	lateRun  []int           // consecutive reports in which the rank arrived late
	lastFold []int           // last step a gradient of the child was folded (−1: none)
	fits     []affineFit     // compute = a + b·samples, where material

	phi        func() float64                    // the gradient noise scale in effect
	surprise   func() (float64, bool)            // how much the predictions miss, and whether measured long enough to trust (surprise.go)
	collective func(members []int) time.Duration // the predicted reduction among members
	classes    func(dst []RankClass) []RankClass // the Monitor's classes, appended to dst
	forgetLate func(r int)                       // restart r's count of late reports
}

// newEstimator returns the estimation state of cfg (defaults filled,
// validated) before any report.
func newEstimator(cfg Config) (*estimator, error) {
	mon, err := NewMonitor(cfg.monitorConfig())
	if err != nil {
		return nil, fmt.Errorf("straggler: %w", err)
	}
	n := cfg.World
	es := &estimator{cfg: cfg, tau: filled(n, 0.0), over: filled(n, 0.0), cycle: filled(n, 0.0), cycles: filled(n, time.Duration(0)),
		seen: filled(n, false), monitor: mon, lastFold: filled(n, -1), lateRun: filled(n, 0), fits: make([]affineFit, n)}
	if cfg.Predictor == PredictEWMA {
		e, err := NewEWMA(cfg.EWMAAlpha)
		if err != nil {
			return nil, fmt.Errorf("straggler: %w", err)
		}
		es.ewmas = make([]EWMA, n)
		for r := range es.ewmas {
			es.ewmas[r] = *e
		}
	} else {
		es.preds = make([]Predictor, n)
		for r := range es.preds {
			if es.preds[r], err = NewRLS(cfg.RLSForgetting, cfg.EWMAAlpha); err != nil {
				return nil, fmt.Errorf("straggler: %w", err)
			}
		}
	}
	return es, nil
}

// estimates returns the decision's view of es (see estimates).
func (es *estimator) estimates() estimates {
	return estimates{tau: es.tau, over: es.over, cycles: es.cycles, seen: es.seen, lateRun: es.lateRun, lastFold: es.lastFold,
		fits: es.fits, phi: es.phi, surprise: func() (float64, bool) { return es.surp.value(), es.surp.trusted() }, collective: es.collective, classes: es.monitor.appendClassed,
		forgetLate: func(r int) { es.lateRun[r] = 0 }}
}

// observe takes a step's report (validated: of the step plan governs, an
// entry per rank); prevMembers are the members of the step before it,
// whose reduction the members' Wait measured.
func (es *estimator) observe(rep Report, plan Plan, prevMembers []int) {
	budget := plan.Budget
	if es.cfg.Reassign {
		es.surp.observe(rep, plan, es.over) // before the overheads take this step
	}
	// One pass over the report after the earliest arrival is known: at
	// 16,384 ranks the report is over a megabyte, and every rank's state
	// is visited once.
	first := firstArrival(rep)
	noise := es.startNoise(rep)
	minWait := time.Duration(-1)
	for r := range es.cfg.World {
		cur := &rep.Current[r]
		es.countLateArrival(r, cur, first)
		noise.add(cur)
		if c := &rep.Child[r]; c.Count > 0 {
			es.observeChild(r, *c, rep.Step)
		}
		es.observeMember(r, cur, budget)
		if cur.Present && cur.Wait > 0 && (minWait < 0 || cur.Wait < minWait) {
			minWait = cur.Wait
		}
	}
	es.observeNoise(noise)
	if minWait >= 0 && rep.Step > 0 {
		// Wait is each member's time in the previous step's reduction:
		// the smallest is the transfer alone (the last to arrive waited for
		// nobody), among the previous plan's members.
		if !es.hasColl || !slices.Equal(es.collWith, prevMembers) {
			es.coll, es.hasColl, es.collWith = float64(minWait), true, slices.Clone(prevMembers)
		} else {
			es.coll += es.cfg.CollectiveAlpha * (float64(minWait) - es.coll)
		}
	}
}

// noiseSums accumulates one report's estimates of the gradient noise
// scale's two parts over its members (McCandlish et al., "An Empirical
// Model of Large-Batch Training", App. A): for a member's sum of b samples
// and the reduced sum of B, with |G_b|², |G_B|² the squared norms of the
// mean gradients,
//
//	|G|² ≈ (B|G_B|² − b|G_b|²)/(B − b),   tr Σ ≈ (|G_b|² − |G_B|²)/(1/b − 1/B),
//
// averaged over the members. A report without norms, or one that folded
// children's (stale) gradients, adds nothing (on is false).
type noiseSums struct {
	on         bool
	big, gBig  float64
	applied    int
	sumS, sumG float64
	k          int
}

// startNoise begins the noise estimate of rep.
func (es *estimator) startNoise(rep Report) noiseSums {
	if !(rep.GradSq > 0) || rep.ChildSamples() > 0 || rep.Applied < 2 {
		return noiseSums{}
	}
	big := float64(rep.Applied)
	return noiseSums{on: true, big: big, gBig: rep.GradSq / (big * big), applied: rep.Applied}
}

// add adds one member's estimates.
func (ns *noiseSums) add(rr *RankReport) {
	if !ns.on || !rr.Present || !(rr.GradSq > 0) || rr.Samples <= 0 || rr.Samples >= ns.applied {
		return
	}
	b := float64(rr.Samples)
	gSmall := rr.GradSq / (b * b)
	ns.sumS += (gSmall - ns.gBig) / (1/b - 1/ns.big)
	ns.sumG += (ns.big*ns.gBig - b*gSmall) / (ns.big - b)
	ns.k++
}

// observeNoise updates the gradient-noise-scale estimate with a report's
// sums, each part smoothed on its own (their ratio of noisy estimates is
// biased; the ratio of smoothed ones much less).
func (es *estimator) observeNoise(ns noiseSums) {
	if ns.k == 0 {
		return
	}
	s, g := ns.sumS/float64(ns.k), ns.sumG/float64(ns.k)
	if math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(g) || math.IsInf(g, 0) {
		return
	}
	if es.noiseN == 0 {
		es.noiseS, es.noiseG = s, g
	} else {
		es.noiseS += es.cfg.NoiseAlpha * (s - es.noiseS)
		es.noiseG += es.cfg.NoiseAlpha * (g - es.noiseG)
	}
	es.noiseN++
}

// phi is the noise scale φ in effect: Config.Phi when set, else the
// estimate (between 1 and 10⁶ samples), else the global batch.
func (es *estimator) phi() float64 {
	switch {
	case es.cfg.Phi > 0:
		return es.cfg.Phi
	case es.noiseS > 0 && es.noiseG > 0:
		return min(max(es.noiseS/es.noiseG, 1), 1e6)
	}
	return float64(es.cfg.GlobalBatch)
}

// firstArrival is the earliest arrival among rep's members (−1: none).
func firstArrival(rep Report) time.Duration {
	first := time.Duration(-1)
	for i := range rep.Current {
		if rr := &rep.Current[i]; rr.Present && (first < 0 || rr.Arrival < first) {
			first = rr.Arrival
		}
	}
	return first
}

// countLateArrival counts the consecutive reports in which rank r arrived
// more than Threshold after the earliest member (first): observed
// lateness, which one noisy step cannot make twice.
func (es *estimator) countLateArrival(r int, rr *RankReport, first time.Duration) {
	switch {
	case !rr.Present:
		// a child: its lateness is judged by its cycle
	case first >= 0 && float64(rr.Arrival) > float64(first)*(1+es.cfg.Threshold):
		es.lateRun[r]++
	default:
		es.lateRun[r] = 0
	}
}

// observeSpeed feeds one per-sample time (with the rank's telemetry) to
// its predictor.
func (es *estimator) observeSpeed(r int, tau float64, rr *RankReport) {
	if es.ewmas != nil {
		e, c := &es.ewmas[r], es.clockOf(r)
		e.update(float64(time.Duration(c.normalise(tau, rr))))
		f, _ := e.Predict()
		es.tau[r] = c.forecast(float64(f))
	} else {
		o := Observation{Rank: r, Arrival: time.Duration(tau), CPU: rr.CPU}
		if rr.SMClockMHz > 0 {
			o.GPU = GPUReading{Valid: true, Util: rr.GPU, SMClockMHz: rr.SMClockMHz}
		}
		es.preds[r].Observe(o)
		if f, ok := es.preds[r].Predict(); ok {
			es.tau[r] = float64(f)
		}
	}
	if es.tau[r] <= 0 {
		es.tau[r] = tau
	}
	es.seen[r] = true
}

func (es *estimator) ewma(dst *float64, v float64, first bool) {
	if first {
		*dst = v
	} else {
		*dst += es.cfg.SpeedAlpha * (v - *dst)
	}
}

// observeMember feeds one rank's member report of a step whose plan had
// the given budget. Compute is the time spent on the samples finished, so
// τ = Compute/Samples; a rank cut by the budget before finishing any sample
// took more than the budget for one, and is taken at twice the budget.
// The overhead is the arrival after the compute, or after the budget for a
// cut report (the unfinished sample's time is not overhead).
func (es *estimator) observeMember(r int, rr *RankReport, budget time.Duration) {
	if !rr.Present {
		return
	}
	first := !es.seen[r]
	var tau float64
	switch {
	case rr.Samples > 0 && rr.Compute > 0:
		tau = float64(rr.Compute) / float64(rr.Samples)
	case rr.Cut && budget > 0:
		tau = 2 * float64(budget)
	}
	end := rr.Compute
	if rr.Cut && budget > 0 {
		end = budget
	}
	if tau > 0 {
		es.observeSpeed(r, tau, rr)
	}
	if rr.Compute > 0 {
		es.fits[r].observe(rr.Samples, float64(rr.Compute))
	}
	if es.seen[r] {
		es.ewma(&es.over[r], float64(max(0, rr.Arrival-end)), first)
		eq := es.tau[r]*float64(es.cfg.GlobalBatch)/float64(es.cfg.World) + es.over[r]
		es.monitor.Observe(r, time.Duration(eq))
	}
}

// observeChild feeds the gradients a child's parent folded at step.
func (es *estimator) observeChild(r int, c ChildReport, step int) {
	if c.Samples > 0 && c.Compute > 0 {
		es.observeSpeed(r, float64(c.Compute)/float64(c.Samples), &RankReport{})
	}
	if c.Cycle > 0 {
		cycle := float64(c.Cycle) / float64(c.Count)
		es.ewma(&es.cycle[r], cycle, es.cycle[r] == 0)
		es.cycles[r] = time.Duration(math.Round(es.cycle[r]))
		// A child reports no arrivals: its overhead is what its cycle
		// takes beyond its compute (less the reduction a member would
		// wait in too), so a rank that was late once and is on time
		// again is seen to be and can rejoin.
		if es.seen[r] {
			over := cycle - float64(c.Compute)/float64(c.Count)
			if es.hasColl {
				over -= es.coll
			}
			es.ewma(&es.over[r], max(0, over), false)
			eq := es.tau[r]*float64(es.cfg.GlobalBatch)/float64(es.cfg.World) + es.over[r]
			es.monitor.Observe(r, time.Duration(eq))
		}
	}
	es.lastFold[r] = step
}

// collective predicts the reduction time among members: the measured
// ring's time, scaled by the cost model's ratio of the members' ring to
// the measured one where links are measured (internal/cost prices both),
// by the ring's 2(k−1)/k otherwise.
func (es *estimator) collective(members []int) time.Duration {
	k := len(members)
	if k <= 1 {
		return 0
	}
	ringFactor := func(k int) float64 { return 2 * float64(k-1) / float64(k) }
	model := func(ms []int) float64 {
		if es.cfg.Bandwidth == nil || es.cfg.GradBytes == 0 {
			return 0
		}
		net := cost.Net{Bandwidth: es.cfg.Bandwidth}
		return float64(net.Ring(ms, es.cfg.GradBytes))
	}
	m := model(members)
	switch {
	case m > 0 && es.hasColl:
		// The link model says how the members' ring compares with the
		// one measured; the measurement says what a ring really takes
		// (CPU copies, protocol). Only the model's ratios are trusted: a
		// probe's absolute numbers can be off by orders of magnitude on
		// links faster than its latency noise.
		if base := model(es.collWith); base > 0 {
			return time.Duration(m * es.coll / base)
		}
		return time.Duration(m)
	case m > 0:
		return time.Duration(m)
	case es.hasColl && len(es.collWith) > 1:
		return time.Duration(es.coll * ringFactor(k) / ringFactor(len(es.collWith)))
	}
	return 0
}
