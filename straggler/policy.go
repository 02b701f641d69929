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
// It is two halves with one seam: the estimation (estimate.go, an
// estimator) takes the report and keeps the ranks' forecasts; the
// decision (this file) reads them through estimates alone and chooses the
// next plan.
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
	cfg Config
	// obs is the estimation (estimate.go); est its view, all the decision
	// reads of it.
	obs *estimator
	est estimates
	// evictedAt is the step a rank became a child (−1: a member).
	evictedAt []int
	// excludedAt is the step a rank was excluded (ModeExclude; −1: not
	// excluded) and trial how many steps it stays out before it is
	// offered back (doubled each time, up to maxTrial).
	excludedAt []int
	trial      []int
	next       Plan
	prev       Plan // the plan of the step before next's
	// all and equal are every rank and the equal shares, shared by the
	// plans that use them (plans are never modified once made).
	all, equal []int
	// model is the decision's view of the ranks' affine fits (nil: no
	// material intercept); fixedLate counts the consecutive decisions in
	// which a rank's intercept alone exceeded the balanced time
	// (intercept.go).
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
	obs, err := newEstimator(cfg)
	if err != nil {
		return nil, err
	}
	n := cfg.World
	p := &Policy{cfg: cfg, obs: obs, est: obs.estimates(), evictedAt: filled(n, -1),
		excludedAt: filled(n, -1), trial: filled(n, minTrial), fixedLate: filled(n, 0)}
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
	p.decideReassign(&p.next)
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
	if rep.Step != p.next.Step {
		return p.next, fmt.Errorf("straggler: report of step %d, expected step %d: %w", rep.Step, p.next.Step, ErrOutOfOrder)
	}
	if n := p.cfg.World; len(rep.Current) != n || len(rep.Child) != n {
		return p.next, fmt.Errorf("straggler: report of step %d has %d/%d entries for %d ranks: %w",
			rep.Step, len(rep.Current), len(rep.Child), n, ErrInvalidConfig)
	}
	p.obs.observe(rep, p.next, p.prev.Members)
	plan, err := p.decide(rep.Step + 1)
	if err != nil {
		return p.next, err
	}
	plan.DecidedAt = rep.Step
	p.prev, p.next = p.next, plan
	return plan, nil
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
		if !p.est.seen[r] {
			known = false
			perSample.set(r, 0)
			continue
		}
		perSample.set(r, time.Duration(math.Round(p.est.tau[r])))
	}
	plan.PerSample = perSample.out
	plan.Collective = p.est.collective(plan.Members)
	plan.Phi = p.est.phi()
	plan.Classes = p.est.classes(plan.Classes)
	if !known {
		// Equal shares and the ring until every rank is measured; no
		// arrival is predicted.
		for r := 0; r < n; r++ {
			predicted.set(r, 0)
		}
		plan.Predicted = predicted.out
		p.decideReassign(&plan)
		return plan, nil
	}
	balanced := BalancedTime(cfg.GlobalBatch, p.est.tau, 0)
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
		keep := (1 - cfg.Hysteresis) * makespan(cur, p.est.tau)
		if !cfg.withinLimits(cur) {
			keep = math.Inf(1) // an exclusion's shares, beyond MaxAccum passes
		}
		shares := cur
		if float64(balanced) < keep && sharesCanBeat(cfg.GlobalBatch, cfg.MinShare, p.est.tau, keep) {
			better, err := cfg.proportionalShares(cfg.GlobalBatch, p.est.tau, cfg.MinShare, nil)
			if err != nil {
				return plan, err
			}
			if makespan(better, p.est.tau) < keep {
				shares = better
			}
		}
		plan.Shares = shares
	}
	if cfg.Budget {
		plan.Budget = time.Duration(math.Round(float64(balanced) * (1 + cfg.Slack)))
	}
	for r := 0; r < n; r++ {
		c := time.Duration(math.Round(float64(plan.Shares[r]) * p.est.tau[r]))
		if plan.Budget > 0 {
			c = plan.Budget
		}
		if am != nil {
			c = am.compute(r, plan.Shares[r], plan.Budget)
		}
		predicted.set(r, c+time.Duration(math.Round(p.est.over[r])))
	}
	plan.Predicted = predicted.out
	p.decideReassign(&plan)
	if !cfg.Evict && !cfg.Overlap && !cfg.Exclude {
		return plan, nil
	}
	// A step the surprise makes reassign keeps every rank in the ring:
	// what the predictions miss, reassignment removes within the step,
	// and ranks taken out on predictions that miss would be taken out for
	// nothing. Once the predictions hold again, the modes that take ranks
	// out are weighed as before. (Reassigning every step, ReassignAt < 0,
	// weighs them always: a step with a rank out computes shares.)
	keepRing := plan.Reassign && cfg.ReassignAt >= 0
	cycles := p.est.cycles
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
			p.est.forgetLate(c) // only new reports may confirm it again
			p.fixedLate[c] = 0  // nor may an intercept fitted before it left
			continue
		}
		confirmed = append(confirmed, c)
	}
	late := stragglersOf(plan.Predicted, cfg.Threshold)
	for _, r := range late {
		if p.est.lateRun[r] >= 2 {
			confirmed = append(confirmed, r)
		}
	}
	confirmed = p.confirmFixedLate(confirmed, am)
	confirmed = append(confirmed, slow...)
	in := ModeInput{
		Arrivals: plan.Predicted, Shares: plan.Shares, Collective: p.est.collective, Cycle: cycles,
		Phi: plan.Phi, Threshold: cfg.Threshold, MaxEvict: cfg.maxEvict(), Evict: cfg.Evict && !keepRing, Overlap: cfg.Overlap,
		Exclude: cfg.Exclude && !keepRing, DiscountStale: cfg.DiscountStale,
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
	plan.Reassign = plan.Reassign && !pick.Mode.evicts() // a rank outside the ring cannot take part
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

// decideReassign sets whether plan (its mode a ring, its budget decided)
// reassigns work within its step, and the surprise it decided on: under
// Config.Reassign, never for a policy with a budget (a rank computes for a
// time, not its rows), until the predictions are trusted and then while
// they miss by ReassignAt (surprise.go).
func (p *Policy) decideReassign(plan *Plan) {
	if !p.cfg.Reassign || p.cfg.Budget || plan.Budget > 0 {
		return
	}
	var trusted bool
	plan.Surprise, trusted = p.est.surprise()
	plan.Reassign = reassignNext(p.next.Reassign, trusted, plan.Surprise, p.cfg.ReassignAt)
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
		since := max(p.est.lastFold[a.Child], p.evictedAt[a.Child])
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
		tau[i] = p.est.tau[m]
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
		c := time.Duration(math.Round(float64(shares[m]) * p.est.tau[m]))
		if budget > 0 {
			c = budget
		}
		if p.model != nil {
			c = p.model.compute(m, shares[m], budget)
		}
		out[m] = c + time.Duration(math.Round(p.est.over[m]))
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
