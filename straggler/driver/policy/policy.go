package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/topology"
)

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("policy: invalid config")

// ErrOutOfOrder is wrapped when a Report is not of the step the Policy
// expects next.
var ErrOutOfOrder = errors.New("policy: report out of order")

// Policy names, for Preset and the command-line tools.
const (
	// NameBSP is the plain ring over all ranks with equal shares.
	NameBSP = "bsp"
	// NameAdaptive is the bench's policy: shares proportional to
	// predicted speed and a compute budget (no eviction: nothing is late
	// under a budget).
	NameAdaptive = "adaptive"
	// NameSTAR is STAR's eviction alone: equal shares, no budget.
	NameSTAR = "star"
	// NameShares is shares and eviction without the budget (what a job
	// with a fixed data order, like examples/train, can use).
	NameShares = "shares"
)

// Policies returns the preset names.
func Names() []string { return []string{NameBSP, NameAdaptive, NameSTAR, NameShares} }

// Defaults applied by Config.WithDefaults.
const (
	// DefaultSpeedAlpha smooths the per-sample time and overhead estimates.
	DefaultSpeedAlpha = 0.5
	// DefaultCollectiveAlpha smooths the reduction-time estimate.
	DefaultCollectiveAlpha = 0.3
	// DefaultHysteresis is Config.Hysteresis's default.
	DefaultHysteresis = 0.03
)

// Config configures a Policy. Zero fields take defaults
// (WithDefaults); World and GlobalBatch are required.
type Config struct {
	// World is N, the number of ranks.
	World int `json:"world"`
	// GlobalBatch is M, the samples of one step summed over all ranks.
	GlobalBatch int `json:"global_batch"`
	// Shares gives each rank a batch share proportional to its predicted
	// speed (AntDT ADJUST_BS); otherwise shares are equal.
	Shares bool `json:"shares"`
	// Budget gives every rank the same compute time, M / Σ predicted speed
	// (× 1+Slack): a rank computes until it is spent and reports how many
	// samples it finished, so nobody waits for a rank slowed beyond
	// prediction and nobody idles. Requires Shares (a share is then the
	// prediction of what the budget buys). Jobs that cannot take more than
	// their share stop at whichever comes first.
	Budget bool `json:"budget"`
	// Evict lets STAR Eq. 3 evict ranks still predicted late under the
	// shares (and budget) into parents that wait for them.
	Evict bool `json:"evict"`
	// Slack stretches the budget by this fraction (default 0).
	Slack float64 `json:"slack,omitempty"`
	// Hysteresis keeps the shares in effect unless new ones are predicted
	// to shorten the slowest rank's compute by more than this fraction
	// (default DefaultHysteresis): with equal speeds, measurement noise
	// would otherwise move a sample back and forth, and with 16 samples a
	// rank one extra sample costs 6%.
	Hysteresis float64 `json:"hysteresis,omitempty"`
	// MinShare is the smallest share a rank gets, so that a rank given
	// (almost) nothing keeps being measured. Default 1 when M ≥ N with
	// Shares, else 0.
	MinShare int `json:"min_share,omitempty"`
	// SpeedAlpha smooths the per-sample time and overhead estimates.
	SpeedAlpha float64 `json:"speed_alpha,omitempty"`
	// CollectiveAlpha smooths the reduction-time estimate C.
	CollectiveAlpha float64 `json:"collective_alpha,omitempty"`
	// Phi is the gradient noise scale φ for Eq. 3 (default M).
	Phi float64 `json:"phi,omitempty"`
	// Threshold is the straggler deviation ratio (default 0.2).
	Threshold float64 `json:"threshold,omitempty"`
	// MaxEvictFraction caps evictions at this fraction of World (0.5).
	MaxEvictFraction float64 `json:"max_evict_fraction,omitempty"`
	// WaitCandidates are extra t_w values for Eq. 3.
	WaitCandidates []time.Duration `json:"wait_candidates,omitempty"`
	// MaxChildren caps the children of one parent (default: no cap beyond
	// what balance needs; topology spreads children over parents).
	MaxChildren int `json:"max_children,omitempty"`
	// Bandwidth is the measured link bandwidth between ranks for parent
	// choice (topology.AssignParents); nil means unmeasured (one host),
	// where every parent is as good and only the fewest-children rule
	// applies.
	Bandwidth topology.Matrix `json:"-"`
	// Lambda, ShortWindow and LongWindow configure AntDT classification
	// (straggler.Monitor) on equal-share arrivals.
	Lambda                  float64 `json:"lambda,omitempty"`
	ShortWindow, LongWindow int     `json:",omitempty"`
}

// Preset returns the named policy for a world and global batch.
func Preset(name string, world, globalBatch int) (Config, error) {
	c := Config{World: world, GlobalBatch: globalBatch}
	switch name {
	case NameBSP:
	case NameAdaptive:
		// Under a budget every rank reaches the reduction together by
		// construction; eviction would only react to arrival noise (see
		// docs/straggler.md, "Driver").
		c.Shares, c.Budget = true, true
	case NameSTAR:
		c.Evict = true
	case NameShares:
		c.Shares, c.Evict = true, true
	default:
		return c, fmt.Errorf("policy: unknown policy %q (want one of %s): %w", name, strings.Join(Names(), ", "), ErrInvalidConfig)
	}
	return c, nil
}

// WithDefaults returns c with zero fields replaced by their defaults.
func (c Config) WithDefaults() Config {
	if c.SpeedAlpha == 0 {
		c.SpeedAlpha = DefaultSpeedAlpha
	}
	if c.CollectiveAlpha == 0 {
		c.CollectiveAlpha = DefaultCollectiveAlpha
	}
	if c.Hysteresis == 0 {
		c.Hysteresis = DefaultHysteresis
	}
	if c.Phi == 0 {
		c.Phi = float64(c.GlobalBatch)
	}
	if c.Threshold == 0 {
		c.Threshold = straggler.DefaultThreshold
	}
	if c.MaxEvictFraction == 0 {
		c.MaxEvictFraction = straggler.DefaultMaxEvictFraction
	}
	if c.Lambda == 0 {
		c.Lambda = straggler.DefaultLambda
	}
	if c.ShortWindow == 0 {
		c.ShortWindow = straggler.DefaultShortWindow
	}
	if c.LongWindow == 0 {
		c.LongWindow = straggler.DefaultLongWindow
	}
	if c.MinShare == 0 && c.Shares && c.GlobalBatch >= c.World {
		c.MinShare = 1
	}
	return c
}

// Validate checks a configuration after WithDefaults.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("policy: "+format+": %w", append(args, ErrInvalidConfig)...)
	}
	unit := func(f float64) bool { return f > 0 && f <= 1 }
	switch {
	case c.World < 1:
		return bad("world %d must be ≥ 1", c.World)
	case c.GlobalBatch < 1:
		return bad("global batch %d must be ≥ 1", c.GlobalBatch)
	case c.Budget && !c.Shares:
		return bad("a compute budget needs shares")
	case !(c.Slack >= 0) || math.IsInf(c.Slack, 0):
		return bad("slack %v must be finite and ≥ 0", c.Slack)
	case !(c.Hysteresis >= 0 && c.Hysteresis < 1):
		return bad("hysteresis %v not in [0,1)", c.Hysteresis)
	case c.MinShare < 0 || c.MinShare*c.World > c.GlobalBatch:
		return bad("min share %d × world %d exceeds global batch %d (or is negative)", c.MinShare, c.World, c.GlobalBatch)
	case !unit(c.SpeedAlpha) || !unit(c.CollectiveAlpha):
		return bad("speed alpha %v and collective alpha %v must be in (0,1]", c.SpeedAlpha, c.CollectiveAlpha)
	case !(c.Phi > 0) || math.IsInf(c.Phi, 0):
		return bad("φ=%v must be finite and > 0", c.Phi)
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return bad("threshold %v must be finite and > 0", c.Threshold)
	case !(c.MaxEvictFraction > 0 && c.MaxEvictFraction < 1):
		return bad("max evict fraction %v not in (0,1)", c.MaxEvictFraction)
	case c.MaxChildren < 0:
		return bad("max children %d must be ≥ 0", c.MaxChildren)
	}
	for _, w := range c.WaitCandidates {
		if w <= 0 {
			return bad("wait candidate %v must be > 0", w)
		}
	}
	return c.monitorConfig().Validate()
}

func (c Config) monitorConfig() straggler.MonitorConfig {
	return straggler.MonitorConfig{World: c.World, ShortWindow: c.ShortWindow, LongWindow: c.LongWindow, Lambda: c.Lambda}
}

// Plan is the decision for one step, identical on every rank. Plans are
// plain data: the Driver executes them, loggers print them, tests compare
// their dumps.
type Plan struct {
	// Step is the step the plan governs.
	Step int `json:"step"`
	// DecidedAt is the step whose report produced it (−1 for the initial
	// plan).
	DecidedAt int `json:"decided_at"`
	// Mode is ring (every member in one ring) or evict.
	Mode straggler.Mode `json:"mode"`
	// Members are the ranks in the ring, ascending.
	Members []int `json:"members"`
	// Evicted are the evicted ranks, ascending; Parents gives each its
	// parent, ordered by child.
	Evicted []int                 `json:"evicted,omitempty"`
	Parents []topology.Assignment `json:"parents,omitempty"`
	// WaitUntil is when, from their step start, parents stop waiting for
	// their children's gradients (STAR's a_min + t_w).
	WaitUntil time.Duration `json:"wait_until_ns,omitempty"`
	// Budget is the compute time every rank spends (0: none; compute the
	// share whatever it takes).
	Budget time.Duration `json:"budget_ns,omitempty"`
	// Shares are the samples each rank takes, summing to the global batch
	// (with a budget: what the budget is predicted to buy).
	Shares []int `json:"shares"`
	// PerSample is the predicted compute time of one sample, by rank (0:
	// not yet measured).
	PerSample []time.Duration `json:"per_sample_ns"`
	// Predicted is the predicted arrival at the reduction, by rank, under
	// the shares and budget (0: unknown).
	Predicted []time.Duration `json:"predicted_ns"`
	// Collective is the predicted reduction time C.
	Collective time.Duration `json:"collective_ns"`
	// Cost is STAR Eq. 3's T_a of the chosen mode, seconds (0 when not
	// weighed).
	Cost float64 `json:"cost"`
	// Stragglers are the predicted stragglers under the shares.
	Stragglers []int `json:"stragglers,omitempty"`
	// Carry says how each evicted rank's gradient is kept if it misses the
	// wait (bound 1: folded at Step+1 at the latest, never dropped).
	Carry []straggler.Carry `json:"carry,omitempty"`
	// Classes lists ranks whose AntDT class is not none.
	Classes []straggler.RankClass `json:"classes,omitempty"`
}

// Dump returns the plan as one line of JSON; equal plans give
// byte-identical dumps.
func (p Plan) Dump() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Plan holds only numbers, slices and text marshalers that cannot
		// fail; reaching this is a programming error.
		panic(fmt.Sprintf("policy: marshalling plan: %v", err))
	}
	return b
}

// String is a one-line summary for logs.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d: %s", p.Step, p.Mode)
	if p.Mode == straggler.ModeEvict {
		fmt.Fprintf(&b, " %v wait-until=%v", p.Evicted, p.WaitUntil)
	}
	if p.Budget > 0 {
		fmt.Fprintf(&b, " budget=%v", p.Budget)
	}
	if len(p.Shares) <= 16 {
		fmt.Fprintf(&b, " shares=%v", p.Shares)
	}
	return b.String()
}

// ParentOf returns rank's parent under the plan, if it is evicted.
func (p Plan) ParentOf(rank int) (int, bool) {
	for _, a := range p.Parents {
		if a.Child == rank {
			return a.Parent, true
		}
	}
	return 0, false
}

// Children returns the ranks whose parent is rank, ascending.
func (p Plan) Children(rank int) []int {
	var out []int
	for _, a := range p.Parents {
		if a.Parent == rank {
			out = append(out, a.Child)
		}
	}
	return out
}

// Policy is the pure per-step decision: a rank feeds it the Report of each
// step (decoded from the reduced buffer, identical on every rank) and gets
// the Plan of the next. It starts no goroutines, reads no clock and is
// deterministic: the same reports give byte-identical plans.
//
// Model. Rank r computes a sample in τ_r (an EWMA of compute/samples over
// its reports) and reaches the reduction o_r after it stops computing (an
// EWMA of arrival − compute, or − budget when the budget stopped it). With shares B_r the predicted arrival is
// o_r + B_r·τ_r, or o_r + budget with a budget. Shares are AntDT's ADJUST_BS
// on speeds 1/τ_r (balance.AdjustBS, integers summing to M, at least
// MinShare each); the budget is M / Σ_r 1/τ_r, the time in which the ranks
// together compute M samples. STAR Eq. 3 (straggler.ChooseMode) then weighs
// evicting the latest predicted arrivals, with C the smallest time any rank
// spent in the previous reduction (the last to arrive waits only for the
// transfer), smoothed. Ranks are classified (straggler.Monitor) on their
// equal-share arrival τ_r·M/N + o_r, which shares do not hide.
type Policy struct {
	cfg     Config
	tau     []float64 // ns per sample
	over    []float64 // ns from compute end to reduction entry
	seen    []bool
	monitor *straggler.Monitor
	coll    float64
	hasColl bool
	next    Plan
	prev    Plan // the plan of the step before next's
	classes []straggler.Class
}

// NewPolicy fills cfg's defaults, validates it and returns a Policy whose
// next plan is the initial one: step 0, the plain ring, equal shares.
func New(cfg Config) (*Policy, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mon, err := straggler.NewMonitor(cfg.monitorConfig())
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p := &Policy{cfg: cfg, tau: make([]float64, cfg.World), over: make([]float64, cfg.World),
		seen: make([]bool, cfg.World), monitor: mon}
	p.next = p.initial(0)
	return p, nil
}

// Config returns the configuration in effect (defaults filled).
func (p *Policy) Config() Config { return p.cfg }

// Plan returns the plan of the next step.
func (p *Policy) Plan() Plan { return p.next }

func (p *Policy) initial(step int) Plan { return Ring(step, p.cfg.World, p.cfg.GlobalBatch) }

// Ring returns the plain-ring plan of step for world ranks and a global
// batch: every rank a member, equal shares, no budget. It is the plan of
// step 0 and of a driver's final flush.
func Ring(step, world, globalBatch int) Plan {
	return Plan{Step: step, DecidedAt: -1, Mode: straggler.ModeRing, Members: allRanks(world),
		Shares: EqualShares(globalBatch, world), PerSample: make([]time.Duration, world), Predicted: make([]time.Duration, world)}
}

// Observe feeds the report of the step the current plan governs and
// returns (and keeps) the plan of the step after it.
func (p *Policy) Observe(rep Report) (Plan, error) {
	n := p.cfg.World
	if rep.Step != p.next.Step {
		return p.next, fmt.Errorf("policy: report of step %d, expected step %d: %w", rep.Step, p.next.Step, ErrOutOfOrder)
	}
	if len(rep.Current) != n || len(rep.Late) != n {
		return p.next, fmt.Errorf("policy: report of step %d has %d/%d entries for %d ranks: %w",
			rep.Step, len(rep.Current), len(rep.Late), n, ErrInvalidConfig)
	}
	minWait := time.Duration(-1)
	for r := 0; r < n; r++ {
		// A late report is of the previous step: feed it first so that
		// each rank's estimates see its steps in order.
		p.observe(r, rep.Late[r], p.prev.Budget)
		cur := rep.Current[r]
		p.observe(r, cur, p.next.Budget)
		if cur.Present && cur.Wait > 0 && (minWait < 0 || cur.Wait < minWait) {
			minWait = cur.Wait
		}
	}
	if minWait >= 0 {
		if !p.hasColl {
			p.coll, p.hasColl = float64(minWait), true
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

// observe feeds one rank's report of a step whose plan had the given
// budget. Compute is the time spent on the samples finished, so τ =
// Compute/Samples; a rank cut by the budget before finishing any sample
// took more than the budget for one, and is taken at twice the budget.
// The overhead is the arrival after the compute, or after the budget for a
// cut report (the unfinished sample's time is not overhead).
func (p *Policy) observe(r int, rr RankReport, budget time.Duration) {
	if !rr.Present {
		return
	}
	a := p.cfg.SpeedAlpha
	first := !p.seen[r]
	ewma := func(dst *float64, v float64) {
		if first {
			*dst = v
		} else {
			*dst += a * (v - *dst)
		}
	}
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
		ewma(&p.tau[r], tau)
		ewma(&p.over[r], float64(max(0, rr.Arrival-end)))
		p.seen[r] = true
	} else if !first {
		ewma(&p.over[r], float64(max(0, rr.Arrival-end)))
	}
	if p.seen[r] {
		eq := p.tau[r]*float64(p.cfg.GlobalBatch)/float64(p.cfg.World) + p.over[r]
		p.monitor.Observe(r, time.Duration(eq))
	}
}

func (p *Policy) decide(step int) (Plan, error) {
	cfg := p.cfg
	n := cfg.World
	plan := p.initial(step)
	known := true
	for r := 0; r < n; r++ {
		if !p.seen[r] {
			known = false
			continue
		}
		plan.PerSample[r] = time.Duration(math.Round(p.tau[r]))
	}
	if p.hasColl {
		plan.Collective = time.Duration(math.Round(p.coll))
	}
	p.classes = p.monitor.Classify(p.classes)
	for r, cl := range p.classes {
		if cl != straggler.ClassNone {
			plan.Classes = append(plan.Classes, straggler.RankClass{Rank: r, Class: cl})
		}
	}
	if !known {
		return plan, nil // equal shares and the ring until every rank is measured
	}
	if cfg.Shares {
		shares, err := ProportionalShares(cfg.GlobalBatch, p.tau, cfg.MinShare)
		if err != nil {
			return plan, err
		}
		if cur := p.next.Shares; makespan(shares, p.tau) >= (1-cfg.Hysteresis)*makespan(cur, p.tau) {
			shares = slices.Clone(cur)
		}
		plan.Shares = shares
	}
	if cfg.Budget {
		plan.Budget = BalancedTime(cfg.GlobalBatch, p.tau, cfg.Slack)
	}
	for r := 0; r < n; r++ {
		c := time.Duration(math.Round(float64(plan.Shares[r]) * p.tau[r]))
		if plan.Budget > 0 {
			c = plan.Budget
		}
		plan.Predicted[r] = c + time.Duration(math.Round(p.over[r]))
	}
	if !cfg.Evict {
		return plan, nil
	}
	choice, err := straggler.ChooseMode(straggler.ModeInput{
		Arrivals: plan.Predicted, Collective: plan.Collective, Phi: cfg.Phi, GlobalBatch: cfg.GlobalBatch,
		Threshold: cfg.Threshold, MaxEvict: int(math.Floor(cfg.MaxEvictFraction * float64(n))),
		WaitCandidates: cfg.WaitCandidates,
	})
	if err != nil {
		return plan, fmt.Errorf("policy: step %d: %w", step, err)
	}
	plan.Cost, plan.Stragglers = choice.Cost, choice.Stragglers
	if choice.Mode != straggler.ModeEvict {
		return plan, nil
	}
	plan.Mode, plan.Evicted, plan.WaitUntil = straggler.ModeEvict, choice.Evicted, choice.Deadline
	plan.Members = plan.Members[:0]
	for r := 0; r < n; r++ {
		if _, ev := slices.BinarySearch(plan.Evicted, r); !ev {
			plan.Members = append(plan.Members, r)
		}
	}
	maxChildren := cfg.MaxChildren
	if maxChildren == 0 {
		maxChildren = len(plan.Evicted)
	}
	parents, err := topology.AssignParents(parentCandidates(plan.Members, len(plan.Evicted), cfg.Bandwidth), plan.Evicted, cfg.Bandwidth, maxChildren)
	if err != nil {
		return plan, fmt.Errorf("policy: step %d: %w", step, err)
	}
	plan.Parents = parents
	for _, r := range plan.Evicted {
		plan.Carry = append(plan.Carry, straggler.Carry{Rank: r, From: step, Latest: step + 1,
			PredictedLate: plan.Predicted[r] > plan.WaitUntil})
	}
	return plan, nil
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

// makespan is the predicted compute of the slowest rank under shares.
func makespan(shares []int, perSample []float64) float64 {
	m := 0.0
	for r, b := range shares {
		m = max(m, float64(b)*perSample[r])
	}
	return m
}
