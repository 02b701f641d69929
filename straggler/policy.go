package straggler

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
	"github.com/ringtail-ml/ringtail/topology"
)

// Policy is the pure per-step decision: the ranks feed it the Report of
// each step (decoded from the reduced buffer, identical on every member;
// a child replays the reports its parent forwards) and get the Plan of the
// next. It starts no goroutines, reads no clock and is deterministic: the
// same reports give byte-identical plans.
//
// Model. Rank r computes a sample in τ_r, forecast by a Predictor (RLS on
// the rank's telemetry — CPU, GPU utilisation and clock — falling back to
// an EWMA) from its reports, and reaches the reduction o_r after it stops
// computing (an EWMA of arrival − compute). With shares B_r the predicted
// arrival is o_r + B_r·τ_r, or o_r + budget with a budget. Shares are
// AntDT's ADJUST_BS on speeds 1/τ_r (balance.AdjustBS, integers summing to
// M, at least MinShare each); the budget is M / Σ_r 1/τ_r. The reduction
// time among any set of members is the link model 2(k−1)/k·G/bandwidth
// (from the probed bandwidth matrix) calibrated by the measured reduction
// time, or the measured time scaled by (k−1)/k without links. ChooseMode
// then weighs the ring, the exact overlap and evictions; the mode changes
// only when another is cheaper by ModeHysteresis. A child's cycle is
// measured from its gradients; its edge becomes Must when Staleness steps
// have passed since its last gradient was folded. Ranks are classified
// (Monitor) on their equal-share arrival τ_r·M/N + o_r.
//
// A rank whose compute has a material intercept (a fixed delay per step,
// late whatever its share) is modelled as a_r + b_r·B_r instead, fitted
// from its reports (intercept.go): shares and the budget are then
// water-filled over the intercepts, and a rank whose intercept alone
// exceeds the balanced time is offered to the mode choice for exclusion.
type Policy struct {
	cfg   Config
	preds []Predictor // RLS (nil with EWMA, kept in ewmas by value: a decision at 16,384 ranks is memory-bound)
	ewmas []EWMA
	tau   []float64 // ns per sample, forecast
	over  []float64 // ns from compute end to reduction entry
	cycle []float64 // ns between a child's gradients (0: never a child)
	// cycles is cycle rounded to whole nanoseconds, as ChooseMode takes
	// it: updated with cycle, so a decision does not rebuild it.
	cycles    []time.Duration
	seen      []bool
	monitor   *Monitor
	coll      float64 // measured reduction time, ns
	collWith  []int   // the members it was measured among
	hasColl   bool
	lastFold  []int // last step a child gradient of the rank was folded (−1: none)
	evictedAt []int // step the rank became a child (−1: a member)
	lateRun   []int // consecutive reports in which the rank arrived late
	// excludedAt is the step a rank was excluded (ModeExclude; −1: not
	// excluded) and trial how many steps it stays out before it is
	// offered back (doubled each time, up to maxTrial).
	excludedAt []int
	trial      []int
	next       Plan
	prev       Plan // the plan of the step before next's
	features   []float64
	// noiseS and noiseG are the smoothed estimates of tr Σ (the per-sample
	// gradient variance) and |G|² (the true gradient's squared norm);
	// their ratio is the noise scale φ.
	noiseS, noiseG float64
	noiseN         int
	// all and equal are every rank and the equal shares, shared by the
	// plans that use them (plans are never modified once made).
	all, equal []int
	// clocks scale the EWMA's forecasts by each rank's GPU clock
	// (clockscale.go).
	clocks []clockScale
	// fits are the ranks' affine fits, compute = a + b·samples; model is
	// the decision's view of them (nil: no material intercept); fixedLate
	// counts the consecutive decisions in which a rank's intercept alone
	// exceeded the balanced time (intercept.go).
	fits      []affineFit
	model     *affineModel
	modelBuf  affineModel
	fixedLate []int
}

// NewPolicy fills cfg's defaults, validates it and returns a Policy whose
// next plan is the initial one: step 0, the plain ring, equal shares.
func NewPolicy(cfg Config) (*Policy, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mon, err := NewMonitor(cfg.monitorConfig())
	if err != nil {
		return nil, fmt.Errorf("straggler: %w", err)
	}
	n := cfg.World
	p := &Policy{cfg: cfg, tau: filled(n, 0.0), over: filled(n, 0.0), cycle: filled(n, 0.0), cycles: filled(n, time.Duration(0)),
		seen: filled(n, false), monitor: mon, lastFold: filled(n, -1), evictedAt: filled(n, -1), lateRun: filled(n, 0),
		excludedAt: filled(n, -1), trial: filled(n, minTrial), fits: make([]affineFit, n), fixedLate: filled(n, 0)}
	if cfg.Predictor == PredictEWMA {
		e, err := NewEWMA(cfg.EWMAAlpha)
		if err != nil {
			return nil, fmt.Errorf("straggler: %w", err)
		}
		p.ewmas = make([]EWMA, n)
		for r := range p.ewmas {
			p.ewmas[r] = *e
		}
	} else {
		p.preds = make([]Predictor, n)
		for r := range p.preds {
			if p.preds[r], err = NewRLS(cfg.RLSForgetting, cfg.EWMAAlpha); err != nil {
				return nil, fmt.Errorf("straggler: %w", err)
			}
		}
	}
	p.next = Ring(0, n, cfg.GlobalBatch)
	p.all, p.equal = p.next.Members, p.next.Shares
	if cfg.Shares && cfg.Prior != nil {
		// Device priors seed step 0's shares (AntDT-DD starts
		// throughput-proportional); measured times replace them.
		shares, err := cfg.proportionalShares(cfg.GlobalBatch, cfg.Prior, cfg.MinShare, nil)
		if err != nil {
			return nil, fmt.Errorf("straggler: shares from priors: %w", err)
		}
		p.next.Shares = shares
	}
	p.prev = p.next
	return p, nil
}

// Config returns the configuration in effect (defaults filled).
func (p *Policy) Config() Config { return p.cfg }

// Plan returns the plan of the next step.
func (p *Policy) Plan() Plan { return p.next }

// Ring returns the plain-ring plan of step for world ranks and a global
// batch: every rank a member, equal shares, no budget. It is the plan of
// step 0 and of a driver's final flush.
func Ring(step, world, globalBatch int) Plan {
	return Plan{Step: step, DecidedAt: -1, Mode: ModeRing, Members: allRanks(world), Late: -1,
		Shares: EqualShares(globalBatch, world), PerSample: make([]time.Duration, world), Predicted: make([]time.Duration, world)}
}

// sharedTimes builds one of a plan's per-rank durations (PerSample,
// Predicted) from the previous plan's. Plans are never modified once made,
// so while every rank's value is the same the new plan shares the old
// one's slice, and the first change copies it: predictions that have
// settled cost no fresh slice per step (at 16,384 ranks, 128 KiB that a
// long run's growing heap takes from new pages, faulted in one by one).
type sharedTimes struct {
	out    []time.Duration
	copied bool
}

// set makes rank r's value v.
func (s *sharedTimes) set(r int, v time.Duration) {
	if s.out[r] == v {
		return
	}
	if !s.copied {
		s.out, s.copied = slices.Clone(s.out), true
	}
	s.out[r] = v
}

// Observe feeds the report of the step the current plan governs and
// returns (and keeps) the plan of the step after it.
func (p *Policy) Observe(rep Report) (Plan, error) {
	n := p.cfg.World
	if rep.Step != p.next.Step {
		return p.next, fmt.Errorf("straggler: report of step %d, expected step %d: %w", rep.Step, p.next.Step, ErrOutOfOrder)
	}
	if len(rep.Current) != n || len(rep.Child) != n {
		return p.next, fmt.Errorf("straggler: report of step %d has %d/%d entries for %d ranks: %w",
			rep.Step, len(rep.Current), len(rep.Child), n, ErrInvalidConfig)
	}
	// One pass over the report after the earliest arrival is known: at
	// 16,384 ranks the report is over a megabyte, and every rank's state
	// is visited once.
	first := firstArrival(rep)
	noise := p.startNoise(rep)
	minWait := time.Duration(-1)
	for r := 0; r < n; r++ {
		cur := &rep.Current[r]
		p.countLateArrival(r, cur, first)
		noise.add(cur)
		if c := &rep.Child[r]; c.Count > 0 {
			p.observeChild(r, *c, rep.Step)
		}
		p.observeMember(r, cur, p.next.Budget)
		if cur.Present && cur.Wait > 0 && (minWait < 0 || cur.Wait < minWait) {
			minWait = cur.Wait
		}
	}
	p.observeNoise(noise)
	if minWait >= 0 && rep.Step > 0 {
		// Wait is each member's time in the previous step's reduction:
		// the smallest is the transfer alone (the last to arrive waited for
		// nobody), among the previous plan's members.
		if !p.hasColl || !slices.Equal(p.collWith, p.prev.Members) {
			p.coll, p.hasColl, p.collWith = float64(minWait), true, slices.Clone(p.prev.Members)
		} else {
			p.coll += p.cfg.CollectiveAlpha * (float64(minWait) - p.coll)
		}
	}
	plan, err := p.decide(rep.Step + 1)
	if err != nil {
		return p.next, err
	}
	plan.DecidedAt = rep.Step
	p.prev, p.next = p.next, plan
	return plan, nil
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
func (p *Policy) startNoise(rep Report) noiseSums {
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
func (p *Policy) observeNoise(ns noiseSums) {
	if ns.k == 0 {
		return
	}
	s, g := ns.sumS/float64(ns.k), ns.sumG/float64(ns.k)
	if math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(g) || math.IsInf(g, 0) {
		return
	}
	if p.noiseN == 0 {
		p.noiseS, p.noiseG = s, g
	} else {
		p.noiseS += p.cfg.NoiseAlpha * (s - p.noiseS)
		p.noiseG += p.cfg.NoiseAlpha * (g - p.noiseG)
	}
	p.noiseN++
}

// phi is the noise scale φ in effect: Config.Phi when set, else the
// estimate (between 1 and 10⁶ samples), else the global batch.
func (p *Policy) phi() float64 {
	switch {
	case p.cfg.Phi > 0:
		return p.cfg.Phi
	case p.noiseS > 0 && p.noiseG > 0:
		return min(max(p.noiseS/p.noiseG, 1), 1e6)
	}
	return float64(p.cfg.GlobalBatch)
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
func (p *Policy) countLateArrival(r int, rr *RankReport, first time.Duration) {
	switch {
	case !rr.Present:
		// a child: its lateness is judged by its cycle
	case first >= 0 && float64(rr.Arrival) > float64(first)*(1+p.cfg.Threshold):
		p.lateRun[r]++
	default:
		p.lateRun[r] = 0
	}
}

// observeSpeed feeds one per-sample time (with the rank's telemetry) to
// its predictor.
func (p *Policy) observeSpeed(r int, tau float64, rr *RankReport) {
	if p.ewmas != nil {
		e, c := &p.ewmas[r], p.clockOf(r)
		e.update(float64(time.Duration(c.normalise(tau, rr))))
		f, _ := e.Predict()
		p.tau[r] = c.forecast(float64(f))
	} else {
		o := Observation{Rank: r, Arrival: time.Duration(tau), CPU: rr.CPU}
		if rr.SMClockMHz > 0 {
			o.GPU = GPUReading{Valid: true, Util: rr.GPU, SMClockMHz: rr.SMClockMHz}
		}
		p.preds[r].Observe(o)
		if f, ok := p.preds[r].Predict(); ok {
			p.tau[r] = float64(f)
		}
	}
	if p.tau[r] <= 0 {
		p.tau[r] = tau
	}
	p.seen[r] = true
}

func (p *Policy) ewma(dst *float64, v float64, first bool) {
	if first {
		*dst = v
	} else {
		*dst += p.cfg.SpeedAlpha * (v - *dst)
	}
}

// observeMember feeds one rank's member report of a step whose plan had
// the given budget. Compute is the time spent on the samples finished, so
// τ = Compute/Samples; a rank cut by the budget before finishing any sample
// took more than the budget for one, and is taken at twice the budget.
// The overhead is the arrival after the compute, or after the budget for a
// cut report (the unfinished sample's time is not overhead).
func (p *Policy) observeMember(r int, rr *RankReport, budget time.Duration) {
	if !rr.Present {
		return
	}
	first := !p.seen[r]
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
		p.observeSpeed(r, tau, rr)
	}
	if rr.Compute > 0 {
		p.fits[r].observe(rr.Samples, float64(rr.Compute))
	}
	if p.seen[r] {
		p.ewma(&p.over[r], float64(max(0, rr.Arrival-end)), first)
		eq := p.tau[r]*float64(p.cfg.GlobalBatch)/float64(p.cfg.World) + p.over[r]
		p.monitor.Observe(r, time.Duration(eq))
	}
}

// observeChild feeds the gradients a child's parent folded at step.
func (p *Policy) observeChild(r int, c ChildReport, step int) {
	if c.Samples > 0 && c.Compute > 0 {
		p.observeSpeed(r, float64(c.Compute)/float64(c.Samples), &RankReport{})
	}
	if c.Cycle > 0 {
		cycle := float64(c.Cycle) / float64(c.Count)
		p.ewma(&p.cycle[r], cycle, p.cycle[r] == 0)
		p.cycles[r] = time.Duration(math.Round(p.cycle[r]))
		// A child reports no arrivals: its overhead is what its cycle
		// takes beyond its compute (less the reduction a member would
		// wait in too), so a rank that was late once and is on time
		// again is seen to be and can rejoin.
		if p.seen[r] {
			over := cycle - float64(c.Compute)/float64(c.Count)
			if p.hasColl {
				over -= p.coll
			}
			p.ewma(&p.over[r], max(0, over), false)
			eq := p.tau[r]*float64(p.cfg.GlobalBatch)/float64(p.cfg.World) + p.over[r]
			p.monitor.Observe(r, time.Duration(eq))
		}
	}
	p.lastFold[r] = step
}

// collective predicts the reduction time among members: the measured
// ring's time, scaled by the cost model's ratio of the members' ring to
// the measured one where links are measured (internal/cost prices both),
// by the ring's 2(k−1)/k otherwise.
func (p *Policy) collective(members []int) time.Duration {
	k := len(members)
	if k <= 1 {
		return 0
	}
	ringFactor := func(k int) float64 { return 2 * float64(k-1) / float64(k) }
	model := func(ms []int) float64 {
		if p.cfg.Bandwidth == nil || p.cfg.GradBytes == 0 {
			return 0
		}
		net := cost.Net{Bandwidth: p.cfg.Bandwidth}
		return float64(net.Ring(ms, p.cfg.GradBytes))
	}
	m := model(members)
	switch {
	case m > 0 && p.hasColl:
		// The link model says how the members' ring compares with the
		// one measured; the measurement says what a ring really takes
		// (CPU copies, protocol). Only the model's ratios are trusted: a
		// probe's absolute numbers can be off by orders of magnitude on
		// links faster than its latency noise.
		if base := model(p.collWith); base > 0 {
			return time.Duration(m * p.coll / base)
		}
		return time.Duration(m)
	case m > 0:
		return time.Duration(m)
	case p.hasColl && len(p.collWith) > 1:
		return time.Duration(p.coll * ringFactor(k) / ringFactor(len(p.collWith)))
	}
	return 0
}

// worstLinks returns the ranks whose links are materially slow — the
// median bandwidth of their links under half the job's typical one —
// worst first (nil without measurements): a rank behind a slow link has
// every link slow, its peers only the one to it.
func (p *Policy) worstLinks() []int {
	bw := p.cfg.Bandwidth
	if bw == nil {
		return nil
	}
	n := p.cfg.World
	worst := make([]float64, n)
	links := make([]float64, 0, n)
	for r := 0; r < n; r++ {
		links = links[:0]
		for q := 0; q < n; q++ {
			if q != r && bw[r][q] > 0 {
				links = append(links, bw[r][q])
			}
		}
		worst[r] = math.Inf(1)
		if len(links) > 0 {
			slices.Sort(links)
			worst[r] = links[len(links)/2]
		}
	}
	typical := slices.Clone(worst)
	slices.Sort(typical)
	median := typical[n/2]
	var order []int
	for r := 0; r < n; r++ {
		if worst[r] < median/2 {
			order = append(order, r)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case worst[a] < worst[b]:
			return -1
		case worst[a] > worst[b]:
			return 1
		}
		return 0
	})
	return order
}

func (p *Policy) decide(step int) (Plan, error) {
	cfg := p.cfg
	n := cfg.World
	plan := Plan{Step: step, DecidedAt: -1, Mode: ModeRing, Members: p.all, Late: -1, Shares: p.equal}
	perSample := sharedTimes{out: p.next.PerSample}
	predicted := sharedTimes{out: p.next.Predicted}
	known := true
	for r := 0; r < n; r++ {
		if !p.seen[r] {
			known = false
			perSample.set(r, 0)
			continue
		}
		perSample.set(r, time.Duration(math.Round(p.tau[r])))
	}
	plan.PerSample = perSample.out
	plan.Collective = p.collective(plan.Members)
	plan.Phi = p.phi()
	plan.Classes = p.monitor.appendClassed(plan.Classes)
	if !known {
		// Equal shares and the ring until every rank is measured; no
		// arrival is predicted.
		for r := 0; r < n; r++ {
			predicted.set(r, 0)
		}
		plan.Predicted = predicted.out
		return plan, nil
	}
	balanced := BalancedTime(cfg.GlobalBatch, p.tau, 0)
	am := p.affineModel()
	p.model = am
	if am != nil {
		balanced = time.Duration(math.Round(am.t))
	}
	if cfg.Shares && am != nil && cfg.Memory == nil {
		// (Under a memory plan the capped solve below decides the shares;
		// the intercepts still predict the arrivals and the exclusions.)
		plan.Shares = am.shares(p.next.Shares, cfg.GlobalBatch, cfg.MinShare, cfg.Exclude, cfg.Hysteresis)
	} else if cfg.Shares {
		// New shares replace the current ones only when they shorten the
		// slowest rank's compute by Hysteresis; no shares can beat the
		// balanced time (every rank busy all the time, BalancedTime), so
		// when that is not short enough the solve is skipped (at 16,384
		// ranks it is most of a decision).
		cur := p.next.Shares
		keep := (1 - cfg.Hysteresis) * makespan(cur, p.tau)
		if !cfg.withinLimits(cur) {
			keep = math.Inf(1) // an exclusion's shares, beyond MaxAccum passes
		}
		shares := cur
		if float64(balanced) < keep && sharesCanBeat(cfg.GlobalBatch, cfg.MinShare, p.tau, keep) {
			better, err := cfg.proportionalShares(cfg.GlobalBatch, p.tau, cfg.MinShare, nil)
			if err != nil {
				return plan, err
			}
			if makespan(better, p.tau) < keep {
				shares = better
			}
		}
		plan.Shares = shares
	}
	if cfg.Budget {
		plan.Budget = time.Duration(math.Round(float64(balanced) * (1 + cfg.Slack)))
	}
	for r := 0; r < n; r++ {
		c := time.Duration(math.Round(float64(plan.Shares[r]) * p.tau[r]))
		if plan.Budget > 0 {
			c = plan.Budget
		}
		if am != nil {
			c = am.compute(r, plan.Shares[r], plan.Budget)
		}
		predicted.set(r, c+time.Duration(math.Round(p.over[r])))
	}
	plan.Predicted = predicted.out
	if !cfg.Evict && !cfg.Overlap && !cfg.Exclude {
		return plan, nil
	}
	cycles := p.cycles
	var pinned []int
	for _, e := range p.next.Parents {
		pinned = append(pinned, e.Parent)
	}
	// Evict only what was predicted slow at the previous decision too (or
	// is already a child); a slow link is a measurement, not a prediction.
	// A rank excluded for its arrivals computes nothing, so nothing says
	// when it is on time again: after a trial period it is offered back
	// (not confirmed), and its next reports decide.
	slow := p.worstLinks()
	confirmed := make([]int, 0, len(p.next.Evicted))
	for _, c := range p.next.Evicted {
		if p.next.Mode == ModeExclude && !slices.Contains(slow, c) && step-p.excludedAt[c] >= p.trial[c] {
			p.trial[c] = min(2*p.trial[c], maxTrial)
			p.lateRun[c] = 0   // only new reports may confirm it again
			p.fixedLate[c] = 0 // nor may an intercept fitted before it left
			continue
		}
		confirmed = append(confirmed, c)
	}
	late := stragglersOf(plan.Predicted, cfg.Threshold)
	for _, r := range late {
		if p.lateRun[r] >= 2 {
			confirmed = append(confirmed, r)
		}
	}
	confirmed = p.confirmFixedLate(confirmed, am)
	confirmed = append(confirmed, slow...)
	in := ModeInput{
		Arrivals: plan.Predicted, Shares: plan.Shares, Collective: p.collective, Cycle: cycles,
		Phi: plan.Phi, Threshold: cfg.Threshold, MaxEvict: cfg.maxEvict(), Evict: cfg.Evict, Overlap: cfg.Overlap,
		Exclude: cfg.Exclude, DiscountStale: cfg.DiscountStale,
		WorstLinks: slow, Pinned: pinned, Confirmed: confirmed, LateUnits: cost.LateUnits(cfg.GradBytes, n),
		Ranks: p.all,
	}
	if cfg.Exclude {
		in.Reassign = func(members []int) []time.Duration {
			shares, budget := p.membersShares(members)
			return p.arrivals(members, shares, budget)
		}
	}
	choice, err := ChooseMode(in)
	if err != nil {
		return plan, fmt.Errorf("straggler: step %d: %w", step, err)
	}
	plan.Stragglers, plan.Costs = choice.Stragglers, choice.Costs
	pick, members := choice.ModeCost, choice.Members
	// Keep the mode in effect unless another is clearly cheaper — but not
	// an exact mode whose late rank is no longer predicted late: it would
	// only cost more than the ring.
	// Between the ring and the exact mode there is nothing to keep: both
	// apply every gradient of the step, so each step takes the cheaper
	// schedule; hysteresis guards what eviction changes (who computes at
	// its own pace, states sent down, rejoins).
	// The mode kept must still be predicted no slower to progress than
	// synchronous SGD (the ring, Costs[0]): hysteresis never keeps a mode
	// that loses to it.
	sync := choice.Costs[0].Cost
	for _, c := range choice.Costs {
		if c.Mode == ModeOverlap && !slices.Contains(choice.Stragglers, c.Late) {
			continue
		}
		if !pick.Mode.evicts() && !p.next.Mode.evicts() {
			break
		}
		if c.Mode == p.next.Mode && slices.Equal(c.Evicted, p.next.Evicted) && c.Late == p.next.Late {
			if pick.Cost >= c.Cost*(1-cfg.ModeHysteresis) && c.Cost <= sync {
				pick = c
				members = p.next.Members
				if !c.Mode.evicts() {
					members = p.all
				}
			}
			break
		}
	}
	plan.Mode, plan.Cost = pick.Mode, pick.Cost
	switch pick.Mode {
	case ModeOverlap:
		plan.Late = pick.Late
	case ModeEvict:
		if err := p.evict(&plan, pick, members, cycles, step); err != nil {
			return plan, err
		}
	case ModeExclude:
		if err := p.exclude(&plan, pick, members, step); err != nil {
			return plan, err
		}
	}
	// Only the children of the plan before and of this one can have
	// steps recorded (evict and exclude record them for this plan's; the
	// others' were cleared a decision ago).
	for _, children := range [][]int{p.next.Evicted, plan.Evicted} {
		for _, r := range children {
			_, out := slices.BinarySearch(plan.Evicted, r)
			if !out || plan.Mode != ModeEvict {
				p.evictedAt[r] = -1
			}
			if !out || plan.Mode != ModeExclude {
				p.excludedAt[r] = -1
			}
		}
	}
	return plan, nil
}

// filled returns n copies of v, every element written. A policy's state is
// allocated once and visited every step: written here, its pages are in
// memory before the first decision, where a large world's would otherwise
// be faulted in one by one during its first steps (tens of µs each on a
// loaded machine).
func filled[T any](n int, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// minTrial is the steps a rank excluded for its arrivals first stays out.
const minTrial = 8

// maxTrial caps the steps a rank excluded for its arrivals waits before it
// is offered back into the ring.
const maxTrial = 64

// evicts reports whether the mode takes ranks out of the ring.
func (m Mode) evicts() bool { return m == ModeEvict || m == ModeExclude }

// evict fills an evicting plan: members, parents, the staleness bound and
// which children must be waited for.
func (p *Policy) evict(plan *Plan, pick ModeCost, members []int, cycles []time.Duration, step int) error {
	cfg := p.cfg
	plan.Evicted, plan.Members = slices.Clone(pick.Evicted), slices.Clone(members)
	plan.WaitUntil = 0
	for _, m := range members {
		plan.WaitUntil = max(plan.WaitUntil, plan.Predicted[m])
	}
	parents, err := p.parents(plan.Evicted, members, step)
	if err != nil {
		return err
	}
	// K: enough steps for the slowest child's cycle, plus one.
	k := 1
	for _, c := range plan.Evicted {
		cycle := cycles[c]
		if cycle == 0 {
			cycle = plan.Predicted[c] + plan.Collective
		}
		k = max(k, int(math.Ceil(float64(cycle)/float64(max(pick.Time, 1))))+1)
	}
	plan.Staleness = min(k, cfg.MaxStaleness)
	for _, a := range parents {
		if p.evictedAt[a.Child] < 0 {
			p.evictedAt[a.Child] = step
		}
		since := max(p.lastFold[a.Child], p.evictedAt[a.Child])
		plan.Parents = append(plan.Parents, Edge{Child: a.Child, Parent: a.Parent, Must: step-since >= plan.Staleness})
	}
	return nil
}

// exclude fills an exact-eviction plan: the members take the evicted
// ranks' rows (shares, the budget and the predicted arrivals among the
// members), each evicted rank gets a parent that forwards the reports and
// sends it the whole state when it rejoins.
func (p *Policy) exclude(plan *Plan, pick ModeCost, members []int, step int) error {
	plan.Evicted, plan.Members = slices.Clone(pick.Evicted), slices.Clone(members)
	plan.Shares, plan.Budget = p.membersShares(members)
	plan.Predicted = p.arrivals(members, plan.Shares, plan.Budget)
	parents, err := p.parents(plan.Evicted, members, step)
	if err != nil {
		return err
	}
	for _, a := range parents {
		plan.Parents = append(plan.Parents, Edge{Child: a.Child, Parent: a.Parent})
		if p.excludedAt[a.Child] < 0 {
			p.excludedAt[a.Child] = step
		}
	}
	return nil
}

// membersShares splits the global batch among members only (by speed with
// Shares, else evenly; the others get 0) and returns the members' budget
// (with Budget).
func (p *Policy) membersShares(members []int) ([]int, time.Duration) {
	cfg := p.cfg
	if p.model != nil && cfg.Shares && cfg.Memory == nil {
		shares, budget := p.model.membersShares(members, cfg.GlobalBatch, min(cfg.MinShare, cfg.GlobalBatch/len(members)), cfg.Slack)
		if !cfg.Budget {
			budget = 0
		}
		return shares, budget
	}
	shares := make([]int, cfg.World)
	tau := make([]float64, len(members))
	for i, m := range members {
		tau[i] = p.tau[m]
	}
	var split []int
	if cfg.Shares {
		var err error
		if split, err = cfg.proportionalShares(cfg.GlobalBatch, tau, min(cfg.MinShare, cfg.GlobalBatch/len(members)), members); err != nil {
			split = EqualShares(cfg.GlobalBatch, len(members))
		}
	} else {
		split = EqualShares(cfg.GlobalBatch, len(members))
	}
	for i, m := range members {
		shares[m] = split[i]
	}
	var budget time.Duration
	if cfg.Budget {
		budget = BalancedTime(cfg.GlobalBatch, tau, cfg.Slack)
	}
	return shares, budget
}

// arrivals predicts the members' arrivals under shares (or the budget);
// the others' are 0.
func (p *Policy) arrivals(members []int, shares []int, budget time.Duration) []time.Duration {
	out := make([]time.Duration, p.cfg.World)
	for _, m := range members {
		c := time.Duration(math.Round(float64(shares[m]) * p.tau[m]))
		if budget > 0 {
			c = budget
		}
		if p.model != nil {
			c = p.model.compute(m, shares[m], budget)
		}
		out[m] = c + time.Duration(math.Round(p.over[m]))
	}
	return out
}

// parents gives every evicted rank a parent among the members: a child
// keeps its parent while it stays a child (its gradients, parameters and
// reports are on their way along that edge); new children get parents by
// bandwidth and balance.
func (p *Policy) parents(evicted, members []int, step int) ([]topology.Assignment, error) {
	cfg := p.cfg
	maxChildren := cfg.MaxChildren
	if maxChildren == 0 {
		maxChildren = len(evicted)
	}
	var parents []topology.Assignment
	var fresh []int
	for _, c := range evicted {
		if parent, ok := p.next.ParentOf(c); ok && slices.Contains(members, parent) {
			parents = append(parents, topology.Assignment{Child: c, Parent: parent})
		} else {
			fresh = append(fresh, c)
		}
	}
	if len(fresh) > 0 {
		more, err := topology.AssignParents(parentCandidates(members, len(fresh), cfg.Bandwidth), fresh, cfg.Bandwidth, maxChildren)
		if err != nil {
			return nil, fmt.Errorf("straggler: step %d: %w", step, err)
		}
		parents = append(parents, more...)
		slices.SortFunc(parents, func(a, b topology.Assignment) int { return a.Child - b.Child })
	}
	return parents, nil
}

// stragglersOf returns the ranks predicted more than threshold after the
// fastest.
func stragglersOf(arrivals []time.Duration, threshold float64) []int {
	if len(arrivals) == 0 {
		return nil
	}
	fastest := slices.Min(arrivals)
	var out []int
	for r, a := range arrivals {
		if float64(a) > float64(fastest)*(1+threshold) {
			out = append(out, r)
		}
	}
	return out
}

func allRanks(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// parentCandidates returns the members AssignParents chooses parents among.
// With measured bandwidth, all of them. Unmeasured, every member is as good
// a parent, and x children need at most x parents to have one each, so 2x
// members spread evenly over the ring are offered: the assignment is just
// as balanced, and its cost no longer grows with the world (at 1024 ranks
// and 51 children, 4 ms instead of 30 ms).
func parentCandidates(members []int, x int, bw topology.Matrix) []int {
	if bw != nil || len(members) <= 2*x {
		return members
	}
	k := 2 * x
	out := make([]int, k)
	for i := range out {
		out[i] = members[i*len(members)/k]
	}
	return out
}

// sharesCanBeat reports whether some shares of m samples, each at least
// minShare, could have a makespan under keep at per-sample times
// perSample: whether the samples each rank can do in less than keep add
// up to m. It is one pass over the ranks, where the exact solve
// (ProportionalShares) is a bisection of 64; when it says no, the solve's
// shares would be refused anyway. Its counts err on the high side (a
// relative 1e-9), so it never refuses shares the solve would find.
func sharesCanBeat(m, minShare int, perSample []float64, keep float64) bool {
	total := 0
	for _, t := range perSample {
		if !(t > 0) {
			return true // a rank whose time is unknown can take any number
		}
		most := math.Floor(keep / t * (1 + 1e-9)) // b·t < keep ⇒ b ≤ most
		if most < float64(minShare) {
			return false // its least share already takes keep or more
		}
		if most >= float64(m) {
			return true
		}
		if total += int(most); total >= m {
			return true
		}
	}
	return false
}

// makespan is the predicted compute of the slowest rank under shares.
func makespan(shares []int, perSample []float64) float64 {
	m := 0.0
	for r, b := range shares {
		m = max(m, float64(b)*perSample[r])
	}
	return m
}
