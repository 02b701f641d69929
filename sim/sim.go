package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
	"github.com/ringtail-ml/ringtail/straggler/driver/workload"
	"github.com/ringtail-ml/ringtail/straggler/inject"
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

// Config configures one simulated run.
type Config struct {
	// Ranks is the world size.
	Ranks int
	// Policy is a straggler/driver preset name.
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
	// EvictSteps counts measured steps in evict mode; Late the samples
	// folded a step late.
	EvictSteps int   `json:"evict_steps"`
	Late       int64 `json:"late"`
	// Decisions is the number of decisions timed; DecisionMean and
	// DecisionMax their wall time (zero without a Clock).
	Decisions    int           `json:"decisions"`
	DecisionMean time.Duration `json:"decision_mean_ns"`
	DecisionMax  time.Duration `json:"decision_max_ns"`
	// LastPlan is the plan decided after the last step.
	LastPlan policy.Plan `json:"-"`
}

// Run simulates cfg.Warmup + cfg.Steps steps and a final flush. Each step
// executes the plan the way straggler/driver's Driver does: every rank
// computes its share (or for the budget), evicted children send their
// gradient to their parent (Send), parents first wait for gradients owed
// from the previous step, then until WaitUntil after their step start for
// this step's, members reduce (Ring), parents send results to their
// children one after the other, and a child starts the next step when it
// has both sent its gradient and received the result. The report of the
// step — built like the reduced buffer — goes to the Policy, whose plan
// governs the next step.
func Run(cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	pc, err := policy.Preset(cfg.Policy, cfg.Ranks, cfg.GlobalBatch)
	if err != nil {
		return Result{}, err
	}
	pol, err := policy.New(pc)
	if err != nil {
		return Result{}, err
	}
	n := cfg.Ranks
	net := cfg.Network
	send := net.Send(cfg.GradBytes)
	start := make([]time.Duration, n)  // step start, by rank
	next := make([]time.Duration, n)   // next step's start
	arrive := make([]time.Duration, n) // entry into the reduction
	samples := make([]int, n)
	compute := make([]time.Duration, n)
	busy := make([]time.Duration, n)
	cut := make([]bool, n)
	wait := make([]time.Duration, n) // time in the previous reduction
	type owed struct {
		child  int
		parent int
		at     time.Duration // when its gradient reaches the parent
		report policy.RankReport
	}
	var carried []owed
	res := Result{Policy: cfg.Policy, Ranks: n, Steps: cfg.Steps}
	var t0 time.Duration
	var decisionSum time.Duration
	for s := 0; s < cfg.Warmup+cfg.Steps; s++ {
		measured := s >= cfg.Warmup
		if s == cfg.Warmup {
			t0 = start[0]
		}
		p := pol.Plan()
		rep := policy.Report{Step: s, Current: make([]policy.RankReport, n), Late: make([]policy.RankReport, n)}
		for r := 0; r < n; r++ {
			samples[r], cut[r] = p.Shares[r], false
			if p.Budget > 0 {
				samples[r], cut[r] = within(cfg.Injector, r, s, p.Budget, cfg.PerSample), true
			}
			compute[r] = workload.Compute(cfg.Injector, r, s, samples[r], cfg.PerSample)
			busy[r] = compute[r]
			if cut[r] {
				busy[r] = p.Budget // working on one more sample until the budget ends
			}
			arrive[r] = start[r] + busy[r]
			if measured {
				res.Computed += int64(samples[r])
			}
		}
		// Parents: owed gradients of the previous step, then children.
		done := make([]time.Duration, n)
		copy(done, arrive)
		for _, o := range carried {
			done[o.parent] = max(done[o.parent], o.at)
			rep.Late[o.child] = o.report
		}
		carried = carried[:0]
		present := make([]bool, n)
		for _, m := range p.Members {
			present[m] = true
		}
		byParent := map[int][]int{}
		for _, a := range p.Parents {
			byParent[a.Parent] = append(byParent[a.Parent], a.Child)
		}
		for _, m := range p.Members {
			kids := byParent[m]
			if len(kids) == 0 {
				continue
			}
			t := done[m]
			deadline := max(t, start[m]+p.WaitUntil)
			last := t
			for _, c := range kids {
				at := arrive[c] + send
				if at <= deadline {
					present[c] = true
					last = max(last, at)
				} else {
					carried = append(carried, owed{child: c, parent: m, at: at})
				}
			}
			done[m] = last
			if len(carried) > 0 && carried[len(carried)-1].parent == m {
				done[m] = deadline // waited the whole window for a late child
			}
		}
		gate := time.Duration(0)
		for _, m := range p.Members {
			gate = max(gate, done[m])
		}
		end := gate + net.Ring(len(p.Members), cfg.GradBytes)
		for _, m := range p.Members {
			next[m] = end + time.Duration(len(byParent[m]))*send
			for j, c := range byParent[m] {
				next[c] = max(arrive[c]+send, end+time.Duration(j+1)*send)
			}
		}
		for r := 0; r < n; r++ {
			rr := policy.RankReport{Present: true, Samples: samples[r], Compute: compute[r], Arrival: busy[r], Cut: cut[r], Wait: wait[r]}
			if present[r] {
				rep.Current[r] = rr
				rep.Applied += samples[r]
			}
			for i := range carried {
				if carried[i].child == r {
					carried[i].report = rr
				}
			}
		}
		for _, rr := range rep.Late {
			rep.Applied += rr.Samples
		}
		if measured {
			res.Applied += int64(rep.Applied)
			for _, rr := range rep.Late {
				res.Late += int64(rr.Samples)
			}
			if p.Mode == straggler.ModeEvict {
				res.EvictSteps++
			}
		}
		for r := 0; r < n; r++ {
			wait[r] = next[r] - arrive[r]
		}
		var began time.Time
		if cfg.Clock != nil {
			began = cfg.Clock()
		}
		if _, err := pol.Observe(rep); err != nil {
			return res, fmt.Errorf("sim: step %d: %w", s, err)
		}
		if cfg.Clock != nil {
			d := cfg.Clock().Sub(began)
			decisionSum += d
			res.DecisionMax = max(res.DecisionMax, d)
			res.Decisions++
		}
		copy(start, next)
	}
	// Flush: one more reduction over every rank folds what is still owed.
	end := time.Duration(0)
	for r := 0; r < n; r++ {
		end = max(end, start[r])
	}
	for _, o := range carried {
		end = max(end, o.at)
		res.Applied += int64(o.report.Samples)
		res.Late += int64(o.report.Samples)
	}
	end += net.Ring(n, cfg.GradBytes)
	res.Wall = end - t0
	if res.Applied > 0 {
		res.PerBatch = time.Duration(float64(res.Wall) * float64(cfg.GlobalBatch) / float64(res.Applied))
	}
	if res.Decisions > 0 {
		res.DecisionMean = decisionSum / time.Duration(res.Decisions)
	}
	res.LastPlan = pol.Plan()
	return res, nil
}

// within is how many samples rank finishes at step within budget. Every
// injected pattern is affine in the work (c(k) = a + b·k), so it is
// ⌊(budget − a)/b⌋ from two evaluations of the injector rather than the
// real job's search (driver.SamplesWithin), which at 4096 ranks would
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
// (driver.IdealCompute) plus the ring all-reduce over every rank.
func Ideal(in *inject.Injector, ranks, from, to, globalBatch int, perSample time.Duration, gradBytes int, net Network) time.Duration {
	var sum time.Duration
	for s := from; s < to; s++ {
		sum += workload.IdealCompute(in, ranks, s, globalBatch, perSample)
	}
	return sum/time.Duration(to-from) + net.Ring(ranks, gradBytes)
}
