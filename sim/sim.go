package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("sim: invalid config")

// Network is the link model: one message of b bytes between two ranks
// takes Alpha + b/BytesPerSec.
type Network struct {
	// Alpha is the per-message latency.
	Alpha time.Duration `json:"alpha_ns"`
	// BytesPerSec is the per-link bandwidth.
	BytesPerSec float64 `json:"bytes_per_sec"`
}

// The default link model is close to what ranks of one 2-core host measure
// through shared memory under load: 20 µs per message, 1 GB/s (a 16 MiB
// ring all-reduce over 4 ranks in ≈ 25 ms).
const (
	DefaultAlpha       = 20 * time.Microsecond
	DefaultBytesPerSec = 1e9
)

// DefaultNetwork returns the default link model.
func DefaultNetwork() Network { return Network{Alpha: DefaultAlpha, BytesPerSec: DefaultBytesPerSec} }

// link is the network's one link, as the cost model prices it.
func (n Network) link() cost.Link { return cost.Link{Alpha: n.Alpha, BytesPerSec: n.BytesPerSec} }

// Send is the time of one message of b bytes.
func (n Network) Send(b int) time.Duration { return n.link().Send(b) }

// Ring is the time of a ring all-reduce of b bytes over k ranks
// (internal/cost's price: reduce-scatter and all-gather, 2(k−1) steps of
// b/k bytes each).
func (n Network) Ring(k, b int) time.Duration { return n.link().Ring(k, b) }

// Late is the time of the exact mode's allreduce (ring.AllReduceLate) of
// b bytes over k ranks, one of them late, arriving at late, the others by
// early (internal/cost's price, cost.LateOver).
func (n Network) Late(k, b int, early, late time.Duration) time.Duration {
	return cost.LateOver(n.link(), n.link(), k, b, early, late)
}

// Work is the simulated ranks' compute: how long rank takes for samples
// at step, how many samples it finishes within a budget, and how long
// after its compute it reaches the reduction.
type Work interface {
	Compute(rank, step, samples int) time.Duration
	Within(rank, step int, budget time.Duration) int
	Late(rank, step int) time.Duration
}

// injected is the Work of straggler/workload: PerSample per sample, slowed
// by an injector.
type injected struct {
	in        *inject.Injector
	perSample time.Duration
}

func (w injected) Compute(rank, step, samples int) time.Duration {
	return workload.Compute(w.in, rank, step, samples, w.perSample)
}

func (w injected) Within(rank, step int, budget time.Duration) int {
	return workload.SamplesWithin(w.in, rank, step, budget, w.perSample)
}

func (w injected) Late(int, int) time.Duration { return 0 }

// Config configures one simulated run.
type Config struct {
	// Ranks is the world size.
	Ranks int
	// Policy is a straggler preset name.
	Policy string
	// Injector slows ranks' compute; nil injects nothing.
	Injector *inject.Injector
	// Warmup steps run before the measured Steps.
	Warmup, Steps int
	// GlobalBatch is the samples of one step over all ranks.
	GlobalBatch int
	// PerSample is the unslowed compute of one sample.
	PerSample time.Duration
	// GradBytes is the gradient size.
	GradBytes int
	// Network is the link model (zero: DefaultNetwork()).
	Network Network
	// Clock, when set, measures each decision's wall time (a real clock
	// such as time.Now); the simulation itself never reads it.
	Clock func() time.Time
	// PolicyConfig, when set, is the policy the ranks run instead of the
	// preset named by Policy (a recorded run's, links included).
	PolicyConfig *straggler.Config
	// Continue, when set, is the policy the ranks run, continued from the
	// step it is at (Policy and PolicyConfig are then ignored): a
	// scenario script simulates steps between reports of its own.
	Continue *straggler.Policy
	// Work, when set, is the ranks' compute model instead of Injector and
	// PerSample.
	Work Work
	// Reports, when set, are the members' reports of every step (a
	// recorded run's, in step order): each step's decision is taken from
	// its report rather than from the simulated one, so the run decides
	// what the recorded run decided (the timeline follows those plans).
	Reports []straggler.Report
	// Reassign, when its UnitSize is > 0, tells the policy its ranks can
	// reassign work within a step (straggler.Config.Reassign, with
	// ReassignAt): a step whose plan says so is simulated by
	// straggler.SimulateReassign over the plan's shares (each rank's
	// compute affine in its rows, as Work gives it), every rank's report
	// carrying the rows it computed.
	Reassign   straggler.ReassignConfig
	ReassignAt float64
}

func (c *Config) validate() error {
	if c.Network == (Network{}) {
		c.Network = DefaultNetwork()
	}
	switch {
	case c.Ranks < 1 || c.Steps < 1 || c.Warmup < 0:
		return fmt.Errorf("sim: need ≥ 1 rank and step, ≥ 0 warmup (got %d, %d, %d): %w", c.Ranks, c.Steps, c.Warmup, ErrInvalidConfig)
	case c.GlobalBatch < c.Ranks || (c.Work == nil && c.PerSample <= 0) || c.GradBytes < 0:
		return fmt.Errorf("sim: need global batch ≥ ranks, per-sample > 0, gradient ≥ 0: %w", ErrInvalidConfig)
	case c.Reports != nil && len(c.Reports) < c.Warmup+c.Steps:
		return fmt.Errorf("sim: %d recorded reports for %d steps: %w", len(c.Reports), c.Warmup+c.Steps, ErrInvalidConfig)
	case c.Injector != nil && c.Injector.World() != c.Ranks:
		return fmt.Errorf("sim: injector for %d ranks, %d simulated: %w", c.Injector.World(), c.Ranks, ErrInvalidConfig)
	case !(c.Network.BytesPerSec > 0) || c.Network.Alpha < 0:
		return fmt.Errorf("sim: network %+v: %w", c.Network, ErrInvalidConfig)
	}
	if c.Reassign.UnitSize > 0 {
		if err := c.Reassign.Validate(); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	return nil
}

// Result is one simulated run.
type Result struct {
	// Policy and Ranks echo the configuration; Steps the measured steps.
	Policy string `json:"policy"`
	Ranks  int    `json:"ranks"`
	Steps  int    `json:"steps"`
	// Wall is the virtual time of the measured steps and the flush.
	Wall time.Duration `json:"wall_ns"`
	// Applied is the samples applied in them; Computed those computed.
	Applied  int64 `json:"applied"`
	Computed int64 `json:"computed"`
	// PerBatch is Wall × GlobalBatch ÷ Applied.
	PerBatch time.Duration `json:"per_batch_ns"`
	// EvictSteps and OverlapSteps count measured steps in those modes;
	// Folded the children's samples folded in them, Staleness their mean
	// staleness.
	EvictSteps   int     `json:"evict_steps"`
	OverlapSteps int     `json:"overlap_steps"`
	Folded       int64   `json:"folded"`
	Staleness    float64 `json:"staleness"`
	// ReassignSteps counts measured steps simulated under in-step
	// reassignment (Config.Reassign).
	ReassignSteps int `json:"reassign_steps,omitempty"`
	// Total and TotalApplied are every sample computed and applied over the
	// whole run, warm-up included: equal, since nothing is lost.
	Total, TotalApplied int64 `json:"-"`
	// Decisions is the number of decisions timed; DecisionMean and
	// DecisionMax their wall time (zero without a Clock).
	Decisions    int           `json:"decisions"`
	DecisionMean time.Duration `json:"decision_mean_ns"`
	DecisionMax  time.Duration `json:"decision_max_ns"`
	// Reports are the reports of every step, in order: what the ranks'
	// reduced buffers would say (Replay feeds them to the policy again).
	Reports []straggler.Report `json:"-"`
	// Plans are the plans decided after every step.
	Plans []straggler.Plan `json:"-"`
}

// decider is the one Policy of a simulated job, shared by every rank's
// Node: the ranks hold identical reports, so each step is decided once
// (timed with the clock) and the other ranks' Observe, members' and
// children's replays alike, take the plan decided.
type decider struct {
	pol   *straggler.Policy
	first int              // the step of plans[0]
	plans []straggler.Plan // plans[s-first] governs step s
	clock func() time.Time
	count int
	sum   time.Duration
	max   time.Duration
}

func (d *decider) Config() straggler.Config { return d.pol.Config() }

func (d *decider) Plan() straggler.Plan { return d.plans[0] }

func (d *decider) Observe(rep straggler.Report) (straggler.Plan, error) {
	if i := rep.Step + 1 - d.first; i > 0 && i < len(d.plans) {
		return d.plans[i], nil
	}
	var began time.Time
	if d.clock != nil {
		began = d.clock()
	}
	next, err := d.pol.Observe(rep)
	if err != nil {
		return next, err
	}
	if d.clock != nil {
		t := d.clock().Sub(began)
		d.count++
		d.sum += t
		d.max = max(d.max, t)
	}
	d.plans = append(d.plans, next)
	return next, nil
}

// gradient is a child's gradient on its way to its parent.
type gradient struct {
	at             time.Duration // when it reaches the parent
	samples        int
	compute, cycle time.Duration
	version        int
}

// message is a state or a report on its way to a child.
type message struct {
	at      time.Duration
	version int
	flags   straggler.StateFlags
	report  *straggler.Report // a forwarded report; nil for a state
}

// rank is one simulated rank: its Node and its timeline.
type rank struct {
	node        *straggler.Node
	start, wait time.Duration // as a member: the next step's start; the time in the previous reduction
	arrive      time.Duration // as a member: this step's arrival at the reduction
	ready       time.Duration // as a member: arrival, or the last gradient it folds
	// As a child: when its next iteration starts, its previous post, and
	// whether it waits for a state nobody has posted yet.
	free, lastPost time.Duration
	blocked        bool
	waiting        bool       // its last receive stopped for a state
	queue          []gradient // posted to its parent, not yet folded
	states         []message  // posted to it, not yet taken
	reports        []message  // forwarded to it, not yet replayed
	linkFree       time.Duration
	unsent         []int // as a parent: states skipped this step
	drain          []int // as a member: former children to drain this step
}

// simulation is one Run's state.
type simulation struct {
	cfg   Config
	n     int
	first int           // the first step simulated
	total int           // the step after the last
	msg   time.Duration // one gradient message
	full  time.Duration // one whole-state message
	dec   *decider
	ranks []rank
	res   Result
	stale float64
	err   error // the first protocol error a child met
}

// Run simulates cfg.Warmup + cfg.Steps steps and a final flush of the
// straggler protocol in virtual time. Every rank steps its own
// straggler.Node — the protocol the live driver runs, nothing of it
// re-implemented here — and the ranks share one Policy (they hold the same
// reports); the simulation supplies only time:
//
//   - members compute their share (or for the budget) from their step
//     start and post the states their Node asks for; parents fold what
//     their children's posts have brought by the plan's WaitUntil (or, on
//     a Must edge, wait for one) and drain former children up to their
//     last post; the members reduce (Network.Ring or Network.Late);
//   - a child iterates at its own pace on the newest parameters that
//     have reached it (its Node says when to wait for them), posting a
//     gradient per iteration (it arrives after one Send);
//   - at the end every child takes the final state and its last
//     gradients are folded into one reduction over every rank.
//
// Every sample computed is applied exactly once (Result.Total equals
// Result.TotalApplied).
func Run(cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	pol := cfg.Continue
	if pol == nil {
		var pc straggler.Config
		if cfg.PolicyConfig != nil {
			pc = *cfg.PolicyConfig
		} else {
			var err error
			if pc, err = straggler.Preset(cfg.Policy, cfg.Ranks, cfg.GlobalBatch); err != nil {
				return Result{}, err
			}
			pc.GradBytes = cfg.GradBytes
		}
		if cfg.Reassign.UnitSize > 0 {
			pc.Reassign, pc.ReassignAt = true, cfg.ReassignAt
		}
		var err error
		if pol, err = straggler.NewPolicy(pc); err != nil {
			return Result{}, err
		}
	}
	if pol.Config().World != cfg.Ranks {
		return Result{}, fmt.Errorf("sim: policy for %d ranks, %d simulated: %w", pol.Config().World, cfg.Ranks, ErrInvalidConfig)
	}
	if cfg.Work == nil {
		cfg.Work = injected{in: cfg.Injector, perSample: cfg.PerSample}
	}
	first := pol.Plan().Step
	s := &simulation{cfg: cfg, n: cfg.Ranks, first: first, total: first + cfg.Warmup + cfg.Steps, msg: cfg.Network.Send(cfg.GradBytes),
		dec: &decider{pol: pol, first: first, plans: []straggler.Plan{pol.Plan()}, clock: cfg.Clock}, ranks: make([]rank, cfg.Ranks)}
	var err error
	// A whole state is the parameters and as much optimizer state again
	// (SGD's momentum).
	s.full = cfg.Network.Send(2 * cfg.GradBytes)
	s.res = Result{Policy: cfg.Policy, Ranks: cfg.Ranks, Steps: cfg.Steps}
	for r := range s.ranks {
		if s.ranks[r].node, err = straggler.NewNode(r, s.dec); err != nil {
			return s.res, err
		}
	}
	var t0 time.Duration
	for step := first; step < s.total; step++ {
		if step == first+cfg.Warmup {
			t0 = s.now()
		}
		if err := s.step(step); err != nil {
			return s.res, fmt.Errorf("sim: step %d: %w", step, err)
		}
	}
	end, err := s.flush()
	if err != nil {
		return s.res, fmt.Errorf("sim: flush: %w", err)
	}
	res := &s.res
	res.Wall = end - t0
	if res.Applied > 0 {
		res.PerBatch = time.Duration(float64(res.Wall) * float64(cfg.GlobalBatch) / float64(res.Applied))
	}
	res.Decisions, res.DecisionMax = s.dec.count, s.dec.max
	if s.dec.count > 0 {
		res.DecisionMean = s.dec.sum / time.Duration(s.dec.count)
	}
	if res.Folded > 0 {
		res.Staleness = s.stale / float64(res.Folded)
	}
	if res.Total != res.TotalApplied {
		return *res, fmt.Errorf("sim: %d samples computed, %d applied", res.Total, res.TotalApplied)
	}
	return *res, nil
}

// now is the earliest time any rank is at: the start of the measured part.
func (s *simulation) now() time.Duration {
	t := time.Duration(math.MaxInt64)
	for i := range s.ranks {
		k := &s.ranks[i]
		if k.node.Role() == straggler.RoleChild {
			t = min(t, k.free)
		} else {
			t = min(t, k.start)
		}
	}
	return t
}

// computed counts samples computed for a step (the measured part from
// Warmup on).
func (s *simulation) computed(step, samples int) {
	s.res.Total += int64(samples)
	if step >= s.first+s.cfg.Warmup {
		s.res.Computed += int64(samples)
	}
}

// step runs member step `step`.
func (s *simulation) step(step int) error {
	p := s.dec.plans[step-s.first]
	rep := straggler.Report{Step: step, Current: make([]straggler.RankReport, s.n), Child: make([]straggler.ChildReport, s.n)}
	// Members whose Node already knows it computes first; a rejoining
	// rank learns from the report its parent forwarded and gets the
	// members' state when its parent arrives.
	for _, m := range p.Members {
		if s.ranks[m].node.Role() != straggler.RoleChild {
			s.member(m, step, &rep)
		}
	}
	for _, m := range p.Members {
		k := &s.ranks[m]
		if k.node.Role() != straggler.RoleChild {
			continue
		}
		s.advance(m, math.MaxInt64)
		if k.node.Role() == straggler.RoleChild {
			return fmt.Errorf("rank %d is a member of step %d but never took its rejoin state", m, step)
		}
		s.member(m, step, &rep)
	}
	if err := s.reassign(step, p, &rep); err != nil {
		return err
	}
	for _, m := range p.Members {
		k := &s.ranks[m]
		for _, c := range k.drain {
			s.fold(c, m, &rep, math.MaxInt64)
		}
		k.drain = nil
	}
	// Parents fold what their children sent (an exact eviction's children
	// send nothing: the members reduce among themselves).
	for _, e := range p.Parents {
		if p.Mode != straggler.ModeEvict {
			break
		}
		parent := &s.ranks[e.Parent]
		deadline := max(parent.arrive, parent.start+p.WaitUntil)
		s.advance(e.Child, deadline)
		c := &s.ranks[e.Child]
		if e.Must {
			for len(c.queue) == 0 && !c.blocked && !c.node.Done() && c.node.Role() == straggler.RoleChild {
				s.advance(e.Child, c.free)
			}
			if len(c.queue) > 0 {
				deadline = max(deadline, c.queue[0].at)
			}
		}
		s.fold(e.Child, e.Parent, &rep, deadline)
	}
	end := time.Duration(0)
	if p.Mode == straggler.ModeOverlap && p.Late >= 0 && len(p.Members) == s.n {
		early := time.Duration(0)
		for _, m := range p.Members {
			if m != p.Late {
				early = max(early, s.ranks[m].ready)
			}
		}
		end = s.cfg.Network.Late(len(p.Members), s.cfg.GradBytes, early, s.ranks[p.Late].ready)
	} else {
		for _, m := range p.Members {
			end = max(end, s.ranks[m].ready)
		}
		end += s.cfg.Network.Ring(len(p.Members), s.cfg.GradBytes)
	}
	for _, cr := range rep.Child {
		rep.Applied += cr.Samples
	}
	for _, rr := range rep.Current {
		rep.Applied += rr.Samples
	}
	s.res.TotalApplied += int64(rep.Applied)
	if s.cfg.Reports != nil {
		rep = s.cfg.Reports[step-s.first]
	}
	var next straggler.Plan
	for _, m := range p.Members {
		k := &s.ranks[m]
		mr, err := k.node.AdvanceMember(straggler.MemberOutcome{Report: rep, Unsent: k.unsent})
		if err != nil {
			return err
		}
		k.unsent, next = nil, mr.Next
		for _, c := range mr.Forward {
			s.ranks[c].reports = append(s.ranks[c].reports, message{at: end, report: &rep})
		}
		k.wait, k.start = end-k.arrive, end
		if mr.Evicted {
			k.free, k.lastPost, k.blocked = end, end, false
		}
	}
	if s.err != nil {
		return s.err
	}
	s.res.Reports, s.res.Plans = append(s.res.Reports, rep), append(s.res.Plans, next)
	if step >= s.first+s.cfg.Warmup {
		s.res.Applied += int64(rep.Applied)
		switch p.Mode {
		case straggler.ModeEvict:
			s.res.EvictSteps++
		case straggler.ModeOverlap:
			s.res.OverlapSteps++
		}
		for _, cr := range rep.Child {
			s.res.Folded += int64(cr.Samples)
			s.stale += cr.Staleness(step) * float64(cr.Count)
		}
	}
	return nil
}

// reassign re-runs the members' compute of a step whose plan reassigns
// (with Config.Reassign, every rank a member starting together): the
// plan's shares cut into units, straggler.SimulateReassign steps every
// rank's Reassigner in virtual time, each rank computing a unit of n rows
// in b_r·n after its late start a_r (Work's compute, affine in the rows),
// each message one Network.Send of ReassignMsgBytes; a rank arrives when
// its step is over, and reports the rows it computed in the time they
// took.
func (s *simulation) reassign(step int, p straggler.Plan, rep *straggler.Report) error {
	if s.cfg.Reassign.UnitSize <= 0 || !p.Reassign || len(p.Members) != s.n || len(p.Parents) > 0 {
		return nil
	}
	start := s.ranks[0].start
	for r := range s.ranks {
		if s.ranks[r].start != start || !rep.Current[r].Present {
			return nil // a rank rejoining this step: it computes its share (driver.CanReassign)
		}
	}
	if step >= s.first+s.cfg.Warmup {
		s.res.ReassignSteps++
	}
	const probe = 64
	begin, per := make([]time.Duration, s.n), make([]float64, s.n)
	expect := time.Duration(0)
	for r := range s.n {
		begin[r] = s.cfg.Work.Compute(r, step, 0)
		per[r] = float64(s.cfg.Work.Compute(r, step, probe)-begin[r]) / probe
		expect = max(expect, p.Predicted[r])
	}
	out, err := straggler.SimulateReassign(straggler.ReassignStep{Config: s.cfg.Reassign, Step: step, Shares: p.Shares,
		Expect: max(expect, time.Millisecond), Begin: begin, Latency: s.cfg.Network.Send(ReassignMsgBytes),
		UnitTime: func(r int, u straggler.Unit, _ time.Duration) time.Duration {
			return time.Duration(per[r] * float64(u.Hi-u.Lo))
		}})
	if err != nil {
		return fmt.Errorf("reassigning: %w", err)
	}
	units, _ := straggler.ReassignUnits(p.Shares, s.cfg.Reassign.UnitSize)
	for r := range s.n {
		rows := 0
		for _, u := range out.Computed[r] {
			rows += units[u].Hi - units[u].Lo
		}
		k := &s.ranks[r]
		late := s.cfg.Work.Late(r, step)
		k.arrive = start + out.Done[r] + late
		k.ready = k.arrive
		rr := &rep.Current[r]
		rr.Samples, rr.Compute, rr.Arrival = rows, begin[r]+time.Duration(per[r]*float64(rows)), out.Done[r]+late
	}
	return nil
}

// member runs member m's part of step up to the reduction: its Ready's
// compute and its state posts.
func (s *simulation) member(m, step int, rep *straggler.Report) {
	k := &s.ranks[m]
	rd := k.node.Ready()
	p := rd.Plan
	samples, cut := rd.Share, false
	if p.Budget > 0 {
		samples, cut = s.cfg.Work.Within(m, step, p.Budget), true
	}
	compute := s.cfg.Work.Compute(m, step, samples)
	busy := compute
	if cut {
		busy = p.Budget
	}
	busy += s.cfg.Work.Late(m, step)
	k.arrive = k.start + busy
	k.ready = k.arrive
	rep.Current[m] = straggler.RankReport{Present: true, Samples: samples, Compute: compute, Arrival: busy, Cut: cut, Wait: k.wait}
	s.computed(step, samples)
	k.unsent = s.post(k.arrive, rd.States)
	k.drain = rd.Drain
}

// post sends states at time at; a state to a child whose link still
// carries the previous one is skipped unless it must wait (StatePost.Wait),
// and returned.
func (s *simulation) post(at time.Duration, posts []straggler.StatePost) (unsent []int) {
	for _, sp := range posts {
		c := &s.ranks[sp.To]
		if c.linkFree > at && !sp.Wait {
			unsent = append(unsent, sp.To)
			continue
		}
		size := s.msg
		if sp.Flags&straggler.StateFull != 0 {
			size = s.full
		}
		c.linkFree = max(at, c.linkFree) + size
		c.states = append(c.states, message{at: c.linkFree, version: sp.Version, flags: sp.Flags})
		c.blocked = false // a waiting child takes it (advance)
	}
	return unsent
}

// fold folds into parent's contribution child's gradients that arrive by
// deadline.
func (s *simulation) fold(child, parent int, rep *straggler.Report, deadline time.Duration) {
	c := &s.ranks[child]
	kept := c.queue[:0]
	for _, g := range c.queue {
		if g.at > deadline {
			kept = append(kept, g)
			continue
		}
		cr := &rep.Child[child]
		cr.Count++
		cr.Samples += g.samples
		cr.Compute += g.compute
		cr.Cycle += g.cycle
		cr.Versions += g.version
		s.ranks[parent].ready = max(s.ranks[parent].ready, g.at)
	}
	c.queue = kept
}

// advance runs child c's iterations that start by until, as its Node
// says: compute the share on the parameters held, post the gradient, take
// what the parent sent (waiting for a state when the Node says so).
func (s *simulation) advance(c int, until time.Duration) {
	k := &s.ranks[c]
	if k.blocked || k.node.Role() != straggler.RoleChild || k.node.Done() {
		return
	}
	if k.waiting {
		s.receive(c, true) // it waited for a state, which has been posted since
	}
	for !k.blocked && k.free <= until && k.node.Role() == straggler.RoleChild && !k.node.Done() && k.node.Next() < s.total {
		rd := k.node.Ready()
		if rd.Idle {
			// It computes nothing: it takes the next message its parent
			// sends, when that comes.
			at := time.Duration(math.MaxInt64)
			if len(k.reports) > 0 {
				at = k.reports[0].at
			}
			if len(k.states) > 0 {
				at = min(at, k.states[0].at)
			}
			if at > until {
				return
			}
			k.free = max(k.free, at)
			s.receive(c, false)
			continue
		}
		compute := s.cfg.Work.Compute(c, min(rd.Step, s.total-1), rd.Share)
		done := k.free + compute + s.cfg.Work.Late(c, rd.Step)
		k.queue = append(k.queue, gradient{at: done + s.msg, samples: rd.Share, compute: compute, cycle: done - k.lastPost, version: rd.Step})
		k.lastPost = done
		s.computed(rd.Step, rd.Share)
		k.node.AdvanceChild()
		k.free = done + s.msg // the post holds the rank until the transport has taken it
		s.receive(c, rd.Await)
	}
}

// receive replays the reports that have reached child c and takes its
// states, oldest first; with block (or when its Node must await one) it
// waits for a state, blocking when none is on its way.
func (s *simulation) receive(c int, block bool) {
	k := &s.ranks[c]
	for {
		s.replay(c)
		block = block || k.node.MustAwait()
		if len(k.states) == 0 || (!block && k.states[0].at > k.free) {
			k.blocked, k.waiting = block, block
			return
		}
		st := k.states[0]
		k.states = k.states[1:]
		k.free = max(k.free, st.at) // waiting for it, if it is still on its way
		k.blocked, k.waiting = false, false
		a := k.node.Adopt(st.version, st.flags)
		if a.Done || a.Rejoin {
			s.replay(c)
			if a.Rejoin {
				if err := k.node.Rejoined(st.version); err != nil && s.err == nil {
					s.err = err
				}
				k.start = k.free
			}
			return
		}
		block = false
	}
}

// replay feeds child c's Node the forwarded reports that have reached it.
func (s *simulation) replay(c int) {
	k := &s.ranks[c]
	for len(k.reports) > 0 && k.reports[0].at <= k.free {
		if err := k.node.Replay(*k.reports[0].report); err != nil && s.err == nil {
			s.err = err
		}
		k.reports = k.reports[1:]
	}
}

// flush ends the run as the Nodes' Flush says: members post every child
// the final state and drain every child and former child up to its last
// post; children take the final state; one reduction over every rank sums
// what was left. It returns when that reduction ends.
func (s *simulation) flush() (time.Duration, error) {
	rep := straggler.Report{Step: s.total, Current: make([]straggler.RankReport, s.n), Child: make([]straggler.ChildReport, s.n)}
	var drains [][2]int // child, parent
	for r := range s.ranks {
		k := &s.ranks[r]
		if k.node.Role() == straggler.RoleChild {
			continue
		}
		rd := k.node.Flush()
		k.ready = k.start
		s.post(k.start, rd.States)
		for _, c := range rd.Drain {
			drains = append(drains, [2]int{c, r})
		}
	}
	for r := range s.ranks {
		k := &s.ranks[r]
		if k.node.Role() != straggler.RoleChild {
			continue
		}
		s.advance(r, math.MaxInt64)
		if !k.node.Done() {
			s.receive(r, true)
		}
		if !k.node.Done() {
			return 0, fmt.Errorf("rank %d never took the final state", r)
		}
	}
	if s.err != nil {
		return 0, s.err
	}
	for _, d := range drains {
		s.fold(d[0], d[1], &rep, math.MaxInt64)
	}
	end := time.Duration(0)
	for r := range s.ranks {
		k := &s.ranks[r]
		if len(k.queue) > 0 {
			return 0, fmt.Errorf("rank %d's last %d gradients were never folded", r, len(k.queue))
		}
		if k.node.Role() != straggler.RoleChild {
			end = max(end, k.ready)
		}
	}
	for _, cr := range rep.Child {
		s.res.Applied += int64(cr.Samples)
		s.res.TotalApplied += int64(cr.Samples)
		s.res.Folded += int64(cr.Samples)
	}
	return end + s.cfg.Network.Ring(s.n, s.cfg.GradBytes), nil
}

// Ideal is FlexRR's Ideal per global batch for steps [from, to): the
// batch's work perfectly balanced over the ranks' injected speeds
// (workload.IdealCompute) plus the ring all-reduce over every rank.
func Ideal(in *inject.Injector, ranks, from, to, globalBatch int, perSample time.Duration, gradBytes int, net Network) time.Duration {
	var sum time.Duration
	for s := from; s < to; s++ {
		sum += workload.IdealCompute(in, ranks, s, globalBatch, perSample)
	}
	return sum/time.Duration(to-from) + net.Ring(ranks, gradBytes)
}
