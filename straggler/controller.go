package straggler

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Controller is the straggler policy as a state machine in the style of
// etcd's raft: it starts no goroutines and reads no clock; observations
// come in through Step, logical time through Tick, and decisions go out
// through Ready/Advance.
//
// Protocol. Ranks report one Observation per step. When the Controller has
// an observation of the open step s from every rank — or Config.StepTimeoutTicks
// Ticks after the first of them — it closes s: it feeds the observations to
// the Monitor and the predictors in rank order, predicts every rank's next
// arrival, chooses the mode, and emits the Plan for step s+Lead. With the
// default Lead = 1 a plan decided at the boundary s→s+1 governs the
// collective of step s+1, so a mode change costs at most the one step during
// which it is decided; Lead = 2 leaves a whole step for the plan to reach the
// ranks. Steps before the first decided plan run the plain ring.
//
// Because observations are buffered per step and processed in rank order,
// the Plans depend only on the multiset of observations and the sequence of
// Tick/Step calls that close steps, never on the order in which ranks
// reported: the same inputs give byte-identical Plan dumps.
type Controller struct {
	cfg      Config
	monitor  *Monitor
	preds    []Predictor
	maxEvict int
	phi      float64

	open    int // step being collected
	ticks   int // ticks since the open step received its first observation
	pending map[int]*stepObservations
	spare   []*stepObservations

	collective     float64 // EWMA of the collective duration, ns
	haveCollective bool

	plans  map[int]Plan // decided plans for steps ≥ open
	last   Plan
	ready  []Plan
	handed int // plans returned by the last Ready

	// scratch, reused across decisions
	arrivals []time.Duration
	classes  []Class
	ends     []time.Duration
}

// stepObservations buffers one step's observations, indexed by rank.
type stepObservations struct {
	obs  []Observation
	have []bool
	n    int
}

// Ready holds the Controller's output since the last Advance.
type Ready struct {
	// Plans are the plans decided since the last Advance, in step order.
	// Each must be in effect at every rank before the collective of its
	// Plan.Step begins; the caller may log or dump them first.
	Plans []Plan
}

// NewController fills cfg's defaults, validates it and returns a Controller
// whose open step is 0.
func NewController(cfg Config) (*Controller, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mon, err := NewMonitor(cfg.monitorConfig())
	if err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:      cfg,
		monitor:  mon,
		preds:    make([]Predictor, cfg.World),
		maxEvict: cfg.maxEvict(),
		phi:      cfg.Phi,
		pending:  map[int]*stepObservations{},
		plans:    map[int]Plan{},
		arrivals: make([]time.Duration, cfg.World),
	}
	for r := range c.preds {
		c.preds[r] = cfg.newPredictor()
	}
	c.last = c.planFor(0)
	return c, nil
}

// Step records one observation. It returns an error wrapping
// ErrBadObservation, ErrStaleObservation (its step is already closed),
// ErrTooFarAhead (more than MaxAhead steps past the open one) or
// ErrDuplicateObservation. Completing the open step closes it, and any
// buffered steps that are complete after it.
func (c *Controller) Step(o Observation) error {
	if err := o.Validate(c.cfg.World); err != nil {
		return err
	}
	switch {
	case o.Step < c.open:
		return fmt.Errorf("rank %d step %d (open step %d): %w", o.Rank, o.Step, c.open, ErrStaleObservation)
	case o.Step > c.open+c.cfg.MaxAhead:
		return fmt.Errorf("rank %d step %d (open step %d, max ahead %d): %w", o.Rank, o.Step, c.open, c.cfg.MaxAhead, ErrTooFarAhead)
	}
	so := c.pending[o.Step]
	if so == nil {
		so = c.takeBuffer()
		c.pending[o.Step] = so
	}
	if so.have[o.Rank] {
		return fmt.Errorf("rank %d step %d: %w", o.Rank, o.Step, ErrDuplicateObservation)
	}
	so.obs[o.Rank], so.have[o.Rank] = o, true
	so.n++
	for {
		cur := c.pending[c.open]
		if cur == nil || cur.n < c.cfg.World {
			return nil
		}
		c.closeOpen()
	}
}

// Tick advances logical time by one tick. When the open step has had at
// least one observation for StepTimeoutTicks ticks, it is closed without
// the missing ranks.
func (c *Controller) Tick() {
	cur := c.pending[c.open]
	if cur == nil || cur.n == 0 || c.cfg.StepTimeoutTicks < 0 {
		return
	}
	c.ticks++
	if c.ticks >= c.cfg.StepTimeoutTicks {
		c.closeOpen()
		// Later steps may already be complete.
		for cur := c.pending[c.open]; cur != nil && cur.n == c.cfg.World; cur = c.pending[c.open] {
			c.closeOpen()
		}
	}
}

// HasReady reports whether Ready has plans to hand out.
func (c *Controller) HasReady() bool { return len(c.ready) > 0 }

// Ready returns the plans decided since the last Advance. Calling it again
// before Advance returns them again (plus any decided meanwhile).
func (c *Controller) Ready() Ready {
	c.handed = len(c.ready)
	return Ready{Plans: slices.Clone(c.ready)}
}

// Advance acknowledges the plans returned by the last Ready.
func (c *Controller) Advance() {
	c.ready = slices.Delete(c.ready, 0, c.handed)
	c.handed = 0
}

// Plan returns the most recently decided plan (the default ring plan for
// step 0 before any decision).
func (c *Controller) Plan() Plan { return c.last }

// PlanFor returns the plan in effect for step: the decided one if it is
// still held (steps ≥ the open step), else the plain ring.
func (c *Controller) PlanFor(step int) Plan { return c.planFor(step) }

// Open returns the step being collected.
func (c *Controller) Open() int { return c.open }

// SetPhi replaces φ for the decisions that follow (e.g. from a
// GNSEstimator or a pre-computed schedule, STAR §IV-C1).
func (c *Controller) SetPhi(phi float64) error {
	if !(phi > 0) || math.IsInf(phi, 0) {
		return fmt.Errorf("straggler: φ=%v must be finite and > 0: %w", phi, ErrInvalidConfig)
	}
	c.phi = phi
	return nil
}

// Classes returns every rank's current class, indexed by rank.
func (c *Controller) Classes() []Class { return c.monitor.Classify(nil) }

func (c *Controller) planFor(step int) Plan {
	if p, ok := c.plans[step]; ok {
		return p
	}
	return Plan{Step: step, DecidedAt: -1, Choice: Choice{Mode: ModeRing}, Phi: c.phi}
}

func (c *Controller) takeBuffer() *stepObservations {
	if n := len(c.spare); n > 0 {
		so := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return so
	}
	return &stepObservations{obs: make([]Observation, c.cfg.World), have: make([]bool, c.cfg.World)}
}

func (c *Controller) releaseBuffer(so *stepObservations) {
	clear(so.have)
	so.n = 0
	c.spare = append(c.spare, so)
}

// closeOpen decides the plan for open+Lead from the open step's
// observations and opens the next step.
func (c *Controller) closeOpen() {
	s := c.open
	so := c.pending[s]
	if so == nil {
		so = c.takeBuffer()
	}
	delete(c.pending, s)

	var missing []int
	latest := time.Duration(-1)
	for r := 0; r < c.cfg.World; r++ {
		if !so.have[r] {
			missing = append(missing, r)
			continue
		}
		o := so.obs[r]
		c.monitor.Observe(r, o.Arrival)
		c.preds[r].Observe(o)
		latest = max(latest, o.Arrival)
	}
	c.observeCollective(c.planFor(s), so)

	for r := 0; r < c.cfg.World; r++ {
		p, ok := c.preds[r].Predict()
		if !ok {
			p = max(latest, 0) // never observed: assume it is as late as the latest
		}
		if !so.have[r] {
			p = max(p, latest) // censored: it had not arrived when the others had
		}
		c.arrivals[r] = p
	}
	coll := time.Duration(math.Round(c.collective))
	choice, err := ChooseMode(ModeInput{
		Arrivals:       c.arrivals,
		Collective:     coll,
		Phi:            c.phi,
		GlobalBatch:    c.cfg.GlobalBatch,
		Threshold:      c.cfg.Threshold,
		MaxEvict:       c.maxEvict,
		WaitCandidates: c.cfg.WaitCandidates,
	})
	if err != nil {
		// Inputs are validated by NewController and SetPhi, and arrivals
		// are never negative; this cannot happen.
		panic(fmt.Sprintf("straggler: choose mode: %v", err))
	}
	plan := Plan{Step: s + c.cfg.Lead, DecidedAt: s, Choice: choice, Phi: c.phi, Collective: coll, Missing: missing}
	for _, r := range choice.Evicted {
		plan.Carry = append(plan.Carry, Carry{
			Rank: r, From: plan.Step, Latest: plan.Step + c.cfg.StalenessBound,
			PredictedLate: c.arrivals[r] > choice.Deadline,
		})
	}
	c.classes = c.monitor.Classify(c.classes)
	for r, cl := range c.classes {
		if cl != ClassNone {
			plan.Classes = append(plan.Classes, RankClass{Rank: r, Class: cl})
		}
	}

	c.plans[plan.Step] = plan
	delete(c.plans, s)
	c.last = plan
	c.ready = append(c.ready, plan)
	c.releaseBuffer(so)
	c.open = s + 1
	c.ticks = 0
}

// observeCollective updates the collective-duration estimate C from the
// step's ring members: C = median_i(a_i + wait_i) − gate, where the gate
// is when the ring could start: the last ring arrival, and under eviction
// no earlier than the parents' wait ended (the earlier of the last child's
// arrival and the fastest arrival + t_w).
func (c *Controller) observeCollective(plan Plan, so *stepObservations) {
	c.ends = c.ends[:0]
	gate := time.Duration(-1)
	first, lastChild := time.Duration(math.MaxInt64), time.Duration(-1)
	ei := 0
	for r := 0; r < c.cfg.World; r++ {
		evicted := ei < len(plan.Evicted) && plan.Evicted[ei] == r
		if evicted {
			ei++
		}
		if !so.have[r] {
			continue
		}
		o := so.obs[r]
		first = min(first, o.Arrival)
		if evicted {
			lastChild = max(lastChild, o.Arrival)
			continue
		}
		gate = max(gate, o.Arrival)
		c.ends = append(c.ends, o.Arrival+o.Wait)
	}
	if len(c.ends) == 0 {
		return
	}
	if plan.Mode == ModeEvict {
		parentsDone := first + plan.Wait
		if lastChild >= 0 {
			parentsDone = min(parentsDone, lastChild)
		}
		gate = max(gate, parentsDone)
	}
	slices.Sort(c.ends)
	obs := float64(max(0, c.ends[len(c.ends)/2]-gate))
	if !c.haveCollective {
		c.collective, c.haveCollective = obs, true
		return
	}
	c.collective += c.cfg.CollectiveAlpha * (obs - c.collective)
}
