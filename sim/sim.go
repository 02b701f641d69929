package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

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

// Send is the time of one message of b bytes.
func (n Network) Send(b int) time.Duration {
	return n.Alpha + time.Duration(float64(b)/n.BytesPerSec*1e9)
}

// Ring is the time of a ring all-reduce of b bytes over k ranks:
// reduce-scatter and all-gather, 2(k−1) steps of b/k bytes each.
func (n Network) Ring(k, b int) time.Duration {
	if k <= 1 {
		return 0
	}
	return time.Duration(2*(k-1)) * n.Send(b/k)
}

// Late is the time of the exact mode's allreduce (ring.AllReduceLate) of
// b bytes over k ranks, one of them late: the k−1 early ranks
// reduce-scatter among themselves in units as soon as they have all
// arrived (early), and the completion takes u·m + 2m − 2 unit slots once
// the late rank has arrived too (m = k−1 early ranks, u units per
// segment: a sixteenth of a segment, 64 to 256 KiB), ending at the
// returned time.
func (n Network) Late(k, b int, early, late time.Duration) time.Duration {
	if k <= 2 {
		return max(early, late) + n.Ring(k, b)
	}
	m := k - 1
	seg := (b + m - 1) / m
	unit := min(max((seg+15)/16, 64<<10), 256<<10)
	u := max(1, (seg+unit-1)/unit)
	unit = (seg + u - 1) / u
	rs := time.Duration((m-1)*u) * n.Send(unit)
	return max(late, early+rs) + time.Duration(u*m+2*m-2)*n.Send(unit)
}

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
}

func (c *Config) validate() error {
	if c.Network == (Network{}) {
		c.Network = DefaultNetwork()
	}
	switch {
	case c.Ranks < 1 || c.Steps < 1 || c.Warmup < 0:
		return fmt.Errorf("sim: need ≥ 1 rank and step, ≥ 0 warmup (got %d, %d, %d): %w", c.Ranks, c.Steps, c.Warmup, ErrInvalidConfig)
	case c.GlobalBatch < c.Ranks || c.PerSample <= 0 || c.GradBytes < 0:
		return fmt.Errorf("sim: need global batch ≥ ranks, per-sample > 0, gradient ≥ 0: %w", ErrInvalidConfig)
	case c.Injector != nil && c.Injector.World() != c.Ranks:
		return fmt.Errorf("sim: injector for %d ranks, %d simulated: %w", c.Injector.World(), c.Ranks, ErrInvalidConfig)
	case !(c.Network.BytesPerSec > 0) || c.Network.Alpha < 0:
		return fmt.Errorf("sim: network %+v: %w", c.Network, ErrInvalidConfig)
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

// gradient is a child's gradient on its way to its parent.
type gradient struct {
	at             time.Duration // when it reaches the parent
	samples        int
	compute, cycle time.Duration
	version        int
}

// state is parameters on their way to a child.
type state struct {
	at      time.Duration
	version int
}

// child is the simulated state of a rank computing as a child.
type child struct {
	free     time.Duration // when its next iteration starts
	version  int
	lastPost time.Duration
	unacked  int
	states   []state // in flight or arrived, not yet taken
	blocked  bool    // waiting for a state that is not posted yet
}

// Run simulates cfg.Warmup + cfg.Steps steps and a final flush of the
// straggler driver's protocol with virtual time, deciding every plan with
// the policy the ranks run (straggler.Policy; nothing of the decision is
// re-implemented here):
//
//   - members compute their share (or for the budget) from their step
//     start; parents fold the gradients their children's posts have
//     brought by the plan's WaitUntil (or, on a Must edge, wait for one);
//     the members reduce (Ring over the members); the report goes to the
//     policy; parents post parameters to the children whose gradients they
//     folded, and the step's report;
//   - a child iterates at its own pace on the newest parameters that have
//     reached it: it computes its share, posts its gradient (it arrives
//     after one Send), and starts again, waiting for parameters when two
//     gradients are unanswered;
//   - a child that rejoins finishes its iteration, gets the members' state,
//     and computes the step's share; its last gradients are folded first.
//
// Every sample computed is applied exactly once (Result.Total equals
// Result.TotalApplied).
func Run(cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	pc, err := straggler.Preset(cfg.Policy, cfg.Ranks, cfg.GlobalBatch)
	if err != nil {
		return Result{}, err
	}
	pc.GradBytes = cfg.GradBytes
	pol, err := straggler.NewPolicy(pc)
	if err != nil {
		return Result{}, err
	}
	n := cfg.Ranks
	net := cfg.Network
	msg := net.Send(cfg.GradBytes)
	start := make([]time.Duration, n) // members: the next step's start
	wait := make([]time.Duration, n)  // time in the previous reduction
	queue := make([][]gradient, n)    // by child: posts not yet folded, in order
	kids := make([]*child, n)         // ranks computing as children (nil: a member)
	lastParent := make([]int, n)      // the parent of a child, or of a former child
	res := Result{Policy: cfg.Policy, Ranks: n, Steps: cfg.Steps}
	total := cfg.Warmup + cfg.Steps
	var t0, decisionSum time.Duration
	staleSum := 0.0

	// advance runs child c's iterations that start by until.
	advance := func(c int, share int, until time.Duration) {
		if kids[c] == nil {
			return
		}
		k := kids[c]
		for !k.blocked && k.free <= until {
			// Take the newest parameters that have arrived.
			for len(k.states) > 0 && k.states[0].at <= k.free {
				k.version, k.unacked = max(k.version, k.states[0].version), 0
				k.states = k.states[1:]
			}
			compute := workload.Compute(cfg.Injector, c, min(k.version, total-1), share, cfg.PerSample)
			done := k.free + compute
			cycle := done - k.lastPost
			k.lastPost = done
			queue[c] = append(queue[c], gradient{at: done + msg, samples: share, compute: compute, cycle: cycle,
				version: k.version})
			res.Total += int64(share)
			if k.version >= cfg.Warmup {
				res.Computed += int64(share)
			}
			k.unacked++
			k.free = done + msg // the post holds the rank until the transport has taken it
			if k.unacked >= 2 {
				if len(k.states) == 0 {
					k.blocked = true // until its parent posts parameters
					return
				}
				k.free = max(k.free, k.states[0].at)
			}
		}
	}
	for s := 0; s < total; s++ {
		if s == cfg.Warmup {
			t0 = slices.Min(start)
			for _, k := range kids {
				if k != nil {
					t0 = min(t0, k.free)
				}
			}
		}
		p := pol.Plan()
		rep := straggler.Report{Step: s, Current: make([]straggler.RankReport, n), Child: make([]straggler.ChildReport, n)}
		arrive := make([]time.Duration, n)
		done := make([]time.Duration, n)
		for _, m := range p.Members {
			samples, cut := p.Shares[m], false
			if p.Budget > 0 {
				samples, cut = within(cfg.Injector, m, s, p.Budget, cfg.PerSample), true
			}
			compute := workload.Compute(cfg.Injector, m, s, samples, cfg.PerSample)
			busy := compute
			if cut {
				busy = p.Budget
			}
			arrive[m] = start[m] + busy
			done[m] = arrive[m]
			rep.Current[m] = straggler.RankReport{Present: true, Samples: samples, Compute: compute, Arrival: busy, Cut: cut, Wait: wait[m]}
			res.Total += int64(samples)
			if s >= cfg.Warmup {
				res.Computed += int64(samples)
			}
		}
		// Parents fold what their children (and former children) sent.
		for c, k := range kids {
			if k == nil && len(queue[c]) == 0 {
				continue
			}
			parent, isChild := p.ParentOf(c)
			if !isChild {
				parent = lastParent[c] // a former child's last gradients
			}
			deadline := time.Duration(math.MaxInt64)
			if isChild {
				deadline = max(arrive[parent], start[parent]+p.WaitUntil)
				advance(c, p.Shares[c], deadline)
				if i := slices.IndexFunc(p.Parents, func(e straggler.Edge) bool { return e.Child == c }); p.Parents[i].Must {
					for len(queue[c]) == 0 && !k.blocked {
						advance(c, p.Shares[c], k.free)
					}
					if len(queue[c]) > 0 {
						deadline = max(deadline, queue[c][0].at)
					}
				}
			}
			kept := queue[c][:0]
			for _, g := range queue[c] {
				if g.at > deadline {
					kept = append(kept, g)
					continue
				}
				cr := &rep.Child[c]
				cr.Count++
				cr.Samples += g.samples
				cr.Compute += g.compute
				cr.Cycle += g.cycle
				cr.Versions += g.version
				if p.IsMember(parent) {
					done[parent] = max(done[parent], g.at)
				}
			}
			queue[c] = kept
		}
		end := time.Duration(0)
		if p.Mode == straggler.ModeOverlap && p.Late >= 0 && len(p.Members) == cfg.Ranks {
			early := time.Duration(0)
			for _, m := range p.Members {
				if m != p.Late {
					early = max(early, done[m])
				}
			}
			end = net.Late(len(p.Members), cfg.GradBytes, early, done[p.Late])
		} else {
			for _, m := range p.Members {
				end = max(end, done[m])
			}
			end += net.Ring(len(p.Members), cfg.GradBytes)
		}
		for _, m := range p.Members {
			wait[m], start[m] = end-arrive[m], end
		}
		for _, cr := range rep.Child {
			rep.Applied += cr.Samples
		}
		for _, rr := range rep.Current {
			rep.Applied += rr.Samples
		}
		res.TotalApplied += int64(rep.Applied)
		var began time.Time
		if cfg.Clock != nil {
			began = cfg.Clock()
		}
		next, err := pol.Observe(rep)
		if err != nil {
			return res, fmt.Errorf("sim: step %d: %w", s, err)
		}
		if cfg.Clock != nil {
			d := time.Duration(cfg.Clock().Sub(began))
			decisionSum += d
			res.DecisionMax = max(res.DecisionMax, d)
			res.Decisions++
		}
		res.Reports, res.Plans = append(res.Reports, rep), append(res.Plans, next)
		if s >= cfg.Warmup {
			res.Applied += int64(rep.Applied)
			switch p.Mode {
			case straggler.ModeEvict:
				res.EvictSteps++
			case straggler.ModeOverlap:
				res.OverlapSteps++
			}
			for _, cr := range rep.Child {
				res.Folded += int64(cr.Samples)
				staleSum += cr.Staleness(s) * float64(cr.Count)
			}
		}
		// Parameters go down to the children whose gradients were folded;
		// ranks leave or rejoin the ring.
		for c, k := range kids {
			if k == nil {
				continue
			}
			if rep.Child[c].Count > 0 && !next.IsMember(c) {
				k.states = append(k.states, state{at: end + msg, version: s + 1})
				if k.blocked {
					k.blocked, k.free = false, max(k.free, end+msg)
				}
			}
			if next.IsMember(c) {
				// It finishes its iteration, gets the state, and joins;
				// its last gradients are folded at the next step.
				k.blocked = false
				start[c] = max(k.free, end+msg)
				kids[c] = nil
			}
		}
		for _, e := range next.Parents {
			if kids[e.Child] == nil {
				kids[e.Child] = &child{free: end, version: s + 1, lastPost: end}
			}
			lastParent[e.Child] = e.Parent
		}
	}
	// Flush: children get the final state and post their last gradient;
	// everything left is folded into one reduction over every rank.
	end := slices.Max(start)
	for c, k := range kids {
		if k != nil {
			k.blocked = false
			advance(c, pol.Plan().Shares[c], k.free)
		}
	}
	for c := range queue {
		for _, g := range queue[c] {
			end = max(end, g.at)
			res.Applied += int64(g.samples)
			res.TotalApplied += int64(g.samples)
			res.Folded += int64(g.samples)
		}
	}
	end += net.Ring(n, cfg.GradBytes)
	res.Wall = end - t0
	if res.Applied > 0 {
		res.PerBatch = time.Duration(float64(res.Wall) * float64(cfg.GlobalBatch) / float64(res.Applied))
	}
	if res.Decisions > 0 {
		res.DecisionMean = decisionSum / time.Duration(res.Decisions)
	}
	if res.Folded > 0 {
		res.Staleness = staleSum / float64(res.Folded)
	}
	if res.Total != res.TotalApplied {
		return res, fmt.Errorf("sim: %d samples computed, %d applied", res.Total, res.TotalApplied)
	}
	return res, nil
}

// within is how many samples rank finishes at step within budget. Every
// injected pattern is affine in the work (c(k) = a + b·k), so it is
// ⌊(budget − a)/b⌋ from two evaluations of the injector rather than the
// real job's search (workload.SamplesWithin), which at 4096 ranks would
// dominate the simulation.
func within(in *inject.Injector, rank, step int, budget, perSample time.Duration) int {
	a := float64(workload.Compute(in, rank, step, 0, perSample))
	const probe = 64
	b := (float64(workload.Compute(in, rank, step, probe, perSample)) - a) / probe
	if b <= 0 || float64(budget) < a {
		return 0
	}
	return int(math.Floor((float64(budget) - a) / b))
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
