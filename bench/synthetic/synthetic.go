package synthetic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// Config configures one run of the synthetic data-parallel job of
// `ringtail bench straggler`.
type Config struct {
	// Ranks is the number of ranks, run in this process (one goroutine and
	// one Comm over real sockets each), or the world that Join joins.
	Ranks int
	// Policy is a straggler.Preset name (straggler.NameBSP, NameAdaptive, …).
	Policy string
	// Injector slows ranks' compute; nil injects nothing. Its world must
	// be Ranks.
	Injector *inject.Injector
	// Warmup steps run before the measured Steps (the policy learns).
	Warmup, Steps int
	// GlobalBatch is the samples of one step over all ranks.
	GlobalBatch int
	// PerSample is the unslowed compute of one sample, a timer sleep so it
	// takes no CPU from the reductions.
	PerSample time.Duration
	// GradBytes is the size of the reduced gradient (float32s).
	GradBytes int
	// OpTimeout bounds every collective and wait (default 2 minutes).
	OpTimeout time.Duration
	// Logger receives the drivers' decisions.
	Logger zerolog.Logger
	// Join, when set, makes this process one rank of the run, the other
	// ranks running Run with the same configuration in processes
	// of their own (a launcher's, a test bed's hosts): it returns a new
	// communicator of a world of Ranks for this run. Nil: every rank runs
	// in this process.
	Join func(ctx context.Context) (*ringtail.Comm, error)
	// Links stalls a rank's link at the step the Injector says
	// (Effect.LinkStall); nil: such a step fails the run, since nothing
	// could apply the stall.
	Links LinkShaper
	// Probe makes every rank's Driver measure the links when it starts
	// (Config.Probe), so that the policy sees a rank behind a slow link.
	Probe bool
	// Reassign, when its UnitSize is > 0, runs every step whose plan says
	// so under in-step reassignment (driver.Reassign; the policy's
	// Config.Reassign on): each unit a timer sleep of its rows at the
	// rank's injected rate, after the step's injected fixed delay (a step
	// that reassigns keeps every rank in the ring).
	Reassign straggler.ReassignConfig
	// ReassignAt is the policy's Config.ReassignAt under Reassign (0: its
	// default; negative: every step that can).
	ReassignAt float64
}

func (c Config) validate() error {
	switch {
	case c.Ranks < 1:
		return fmt.Errorf("driver: synthetic job needs ≥ 1 rank, got %d", c.Ranks)
	case c.Steps < 1 || c.Warmup < 0:
		return fmt.Errorf("driver: synthetic job needs ≥ 1 step and ≥ 0 warmup, got %d and %d", c.Steps, c.Warmup)
	case c.GlobalBatch < c.Ranks:
		return fmt.Errorf("driver: global batch %d smaller than %d ranks", c.GlobalBatch, c.Ranks)
	case c.PerSample <= 0:
		return fmt.Errorf("driver: per-sample compute %v must be > 0", c.PerSample)
	case c.GradBytes < 4:
		return fmt.Errorf("driver: gradient of %d bytes is smaller than one float32", c.GradBytes)
	case c.Injector != nil && c.Injector.World() != c.Ranks:
		return fmt.Errorf("driver: injector for %d ranks, job of %d", c.Injector.World(), c.Ranks)
	}
	_, err := straggler.Preset(c.Policy, c.Ranks, c.GlobalBatch)
	return err
}

// Result is what one run measured (rank 0's clock).
type Result struct {
	// Policy and Ranks echo the configuration.
	Policy string `json:"policy"`
	Ranks  int    `json:"ranks"`
	// Steps is the number of measured steps.
	Steps int `json:"steps"`
	// Wall is the measured steps' wall time, the final flush included.
	Wall time.Duration `json:"wall_ns"`
	// Applied is the samples whose gradients the measured steps (and the
	// flush) applied; Computed the samples the ranks computed in them.
	Applied  int64 `json:"applied"`
	Computed int64 `json:"computed"`
	// PerBatch is the time per global batch of applied samples,
	// Wall × GlobalBatch ÷ Applied: delaying or dropping work can never
	// make it smaller.
	PerBatch time.Duration `json:"per_batch_ns"`
	// Modes counts the measured steps by how they ran.
	Modes
	// Total is every sample any rank computed in the run, warm-up
	// included; TotalApplied every sample the run applied: they are equal
	// (no gradient is lost or folded twice), which Run checks.
	Total, TotalApplied int64 `json:"-"`
	// Policy is the policy configuration the ranks ran; Reports and Plans
	// the report of every step and the plan decided from it, as the
	// members saw them.
	PolicyConfig straggler.Config   `json:"-"`
	Reports      []straggler.Report `json:"-"`
	Plans        []straggler.Plan   `json:"-"`
	// Reduction is the mean over measured steps of the time from the last
	// rank's entering the step's reduction to the last rank's leaving it:
	// the reduction with nobody left to wait for, under the run's load.
	Reduction time.Duration `json:"reduction_ns"`
}

// Modes counts how a run's measured steps ran (a Result's, and a
// BenchRow's for the policy's run).
type Modes struct {
	// EvictSteps and OverlapSteps count measured steps run in those
	// modes; ReassignSteps those whose plan reassigned work within the
	// step (Plan.Reassign); Folded the children's samples folded in them
	// and Staleness their mean staleness (steps); Cut the rank-steps the
	// budget ended.
	EvictSteps    int     `json:"evict_steps"`
	OverlapSteps  int     `json:"overlap_steps"`
	ReassignSteps int     `json:"reassign_steps"`
	Folded        int64   `json:"folded"`
	Staleness     float64 `json:"staleness"`
	Cut           int64   `json:"cut"`
}

// rankRecord is what one rank of the synthetic job saw.
type rankRecord struct {
	policy                straggler.Config
	reports               []straggler.Report
	plans                 []straggler.Plan
	computed, computedAll int64
	applied               []int // by step, as a member (−1: not a member)
	folded                []int
	stale                 []float64
	mode                  []straggler.Mode
	cut                   []int
	enter, leave          []time.Time // member steps' reduction entry and exit
	start                 []time.Time // member steps' start
	flushApplied          int
	end                   time.Time
}

// Run runs the synthetic job: every iteration each rank computes
// its share (or, under a budget, as many samples as fit in it) with a timer
// sleep of the injected duration, puts the sample count in its gradient,
// and hands it to its Driver; an evicted rank iterates at its own pace. It
// returns the Steps after the warmup, flush included, as the members saw
// them, and checks that every sample computed was applied exactly once.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 2 * time.Minute
	}
	if cfg.Join != nil {
		return runSyntheticRank(ctx, cfg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	comms, err := ringtail.NewLocal(ctx, cfg.Ranks, func(c *ringtail.Config) {
		c.JobID = "ringtail-bench-straggler"
		c.Secret = []byte("ringtail-bench-straggler-in-process")
		c.OpTimeout = cfg.OpTimeout
		c.ConnectTimeout = 30 * time.Second
	})
	if err != nil {
		return Result{}, fmt.Errorf("driver: %w", err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	recs := make([]rankRecord, cfg.Ranks)
	errs := make([]error, cfg.Ranks)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			errs[r] = syntheticRank(ctx, cfg, comms[r], &recs[r])
			if errs[r] != nil {
				cancel() // unblock the others at once
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return Result{Policy: cfg.Policy, Ranks: cfg.Ranks}, err
	}
	return summarize(cfg, recs)
}

// runSyntheticRank runs this process's rank of the job on a communicator
// from cfg.Join, then shares every rank's record with every rank, so that
// each summarises the run alike.
func runSyntheticRank(ctx context.Context, cfg Config) (Result, error) {
	fail := Result{Policy: cfg.Policy, Ranks: cfg.Ranks}
	comm, err := cfg.Join(ctx)
	if err != nil {
		return fail, fmt.Errorf("driver: joining the run: %w", err)
	}
	defer comm.Close()
	if comm.Size() != cfg.Ranks {
		return fail, fmt.Errorf("driver: the run's communicator has %d ranks, the job %d: %w", comm.Size(), cfg.Ranks, driver.ErrInvalidConfig)
	}
	var rec rankRecord
	if err := syntheticRank(ctx, cfg, comm, &rec); err != nil {
		return fail, err
	}
	recs, err := gatherRecords(ctx, comm, &rec, cfg.Warmup+cfg.Steps)
	if err != nil {
		return fail, err
	}
	return summarize(cfg, recs)
}

// summarize turns the ranks' records into the run's result: each step as
// any member saw it (members see identical reports).
func summarize(cfg Config, recs []rankRecord) (Result, error) {
	out := Result{Policy: cfg.Policy, Ranks: cfg.Ranks, Steps: cfg.Steps}
	total := cfg.Warmup + cfg.Steps
	var t0 time.Time
	staleSum, staleN := 0.0, 0
	for s := 0; s < total; s++ {
		member, full := -1, -1
		for r := range recs {
			if recs[r].applied[s] >= 0 {
				if member < 0 {
					member = r
				}
				if full < 0 && recs[r].reports != nil {
					full = r
				}
			}
		}
		if member < 0 {
			return out, fmt.Errorf("driver: synthetic job: no member ran step %d", s)
		}
		rec := &recs[member]
		out.TotalApplied += int64(rec.applied[s])
		// Members see identical reports and plans; only this process's
		// records hold them when every rank is a process of its own.
		var report straggler.Report
		var plan straggler.Plan
		if full >= 0 {
			report, plan = recs[full].reports[s], recs[full].plans[s]
			out.PolicyConfig = recs[full].policy
		}
		out.Reports, out.Plans = append(out.Reports, report), append(out.Plans, plan)
		if s < cfg.Warmup {
			continue
		}
		if s == cfg.Warmup {
			for r := range recs {
				if st := recs[r].start[s]; !st.IsZero() && (t0.IsZero() || st.Before(t0)) {
					t0 = st
				}
			}
		}
		out.Applied += int64(rec.applied[s])
		out.Folded += int64(rec.folded[s])
		out.Cut += int64(rec.cut[s])
		if rec.folded[s] > 0 {
			staleSum += rec.stale[s] * float64(rec.folded[s])
			staleN += rec.folded[s]
		}
		switch rec.mode[s] {
		case straggler.ModeEvict:
			out.EvictSteps++
		case straggler.ModeOverlap:
			out.OverlapSteps++
		}
		var in, lv time.Time
		for r := range recs {
			if e := recs[r].enter[s]; !e.IsZero() && e.After(in) {
				in = e
			}
			if l := recs[r].leave[s]; l.After(lv) {
				lv = l
			}
		}
		out.Reduction += lv.Sub(in)
	}
	out.Reduction /= time.Duration(cfg.Steps)
	for s := max(cfg.Warmup, 1); s < total; s++ {
		if out.Plans[s-1].Reassign { // the plan decided from step s−1's report governs step s
			out.ReassignSteps++
		}
	}
	if staleN > 0 {
		out.Staleness = staleSum / float64(staleN)
	}
	out.Applied += int64(recs[0].flushApplied)
	out.TotalApplied += int64(recs[0].flushApplied)
	end := time.Time{}
	for r := range recs {
		out.Computed += recs[r].computed
		out.Total += recs[r].computedAll
		if recs[r].end.After(end) {
			end = recs[r].end
		}
	}
	out.Wall = end.Sub(t0)
	if out.Applied > 0 {
		out.PerBatch = time.Duration(float64(out.Wall) * float64(cfg.GlobalBatch) / float64(out.Applied))
	}
	if out.Total != out.TotalApplied {
		return out, fmt.Errorf("driver: synthetic job: %d samples computed, %d applied: gradients lost or folded twice", out.Total, out.TotalApplied)
	}
	return out, nil
}

func syntheticRank(ctx context.Context, cfg Config, comm *ringtail.Comm, rec *rankRecord) error {
	r := comm.Rank()
	pol, err := straggler.Preset(cfg.Policy, cfg.Ranks, cfg.GlobalBatch)
	if err != nil {
		return err
	}
	if cfg.Reassign.UnitSize > 0 {
		pol.Reassign, pol.ReassignAt = true, cfg.ReassignAt
	}
	d, err := driver.New(ctx, driver.Config{Comm: comm, Payload: cfg.GradBytes / 4, Policy: pol, Probe: cfg.Probe, OpTimeout: cfg.OpTimeout, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	total := cfg.Warmup + cfg.Steps
	rec.policy = d.Policy()
	rec.reports, rec.plans = make([]straggler.Report, total), make([]straggler.Plan, total)
	rec.applied, rec.folded, rec.stale = make([]int, total), make([]int, total), make([]float64, total)
	rec.mode, rec.cut = make([]straggler.Mode, total), make([]int, total)
	rec.enter, rec.leave, rec.start = make([]time.Time, total), make([]time.Time, total), make([]time.Time, total)
	for s := range rec.applied {
		rec.applied[s] = -1
	}
	stepStart := time.Now()
	stalled := false
	for {
		member := d.Role() != straggler.RoleChild
		if member && d.Plan().Step >= total {
			break
		}
		s := min(d.Next(), total-1)
		if st := linkStall(cfg.Injector, r, s); st > 0 && !stalled {
			stalled = true // once: a child may iterate at one step index twice
			if cfg.Links == nil {
				return fmt.Errorf("driver: synthetic rank %d step %d: the pattern stalls this rank's link, and nothing shapes links here (run the ranks on a test bed): %w", r, s, driver.ErrInvalidConfig)
			}
			if err := cfg.Links.Stall(ctx, r, st); err != nil {
				return fmt.Errorf("driver: synthetic rank %d step %d: stalling its link: %w", r, s, err)
			}
		}
		p := d.Plan()
		n, cut := p.Shares[r], false
		compute := workload.Compute(cfg.Injector, r, s, n, cfg.PerSample)
		if member && p.Budget > 0 {
			// Compute for the budget, however many samples that is: a rank
			// slowed beyond prediction stops on time, a fast one keeps going.
			n, cut = workload.SamplesWithin(cfg.Injector, r, s, p.Budget, cfg.PerSample), true
			compute = workload.Compute(cfg.Injector, r, s, n, cfg.PerSample)
		}
		busy := compute
		if cut {
			busy = p.Budget // the rank works on one more sample until the budget ends
		}
		buf := d.Buffer()
		clear(buf[:1])
		if len(buf) > 0 {
			buf[0] = float32(n) // the rest of the gradient stays zero: the bytes move all the same
		}
		if member {
			rec.start[s] = stepStart
		}
		entered := time.Time{}
		if cfg.Reassign.UnitSize > 0 && !cut && d.CanReassign() {
			call := time.Now()
			out, err := reassignStep(ctx, cfg, d, r, s)
			if err != nil {
				return err
			}
			n, compute, entered = out.Samples, out.Compute, call.Add(out.Elapsed)
			if len(buf) > 0 {
				buf[0] = float32(n)
			}
		} else if err := ringtail.Sleep(ctx, time.Until(stepStart.Add(busy))); err != nil {
			return fmt.Errorf("driver: synthetic rank %d step %d: %w", r, s, err)
		}
		rec.computedAll += int64(n)
		if s >= cfg.Warmup {
			rec.computed += int64(n)
		}
		// The reduction is entered now: after a reassigned step's compute,
		// when every rank's units are done (the wait for the others' ends
		// is the step's, not the reduction's: Ideal takes the reduction
		// from Reduction). The policy's arrival is the end of this rank's
		// own work.
		reducing := time.Now()
		if entered.IsZero() {
			entered = reducing
		}
		res, err := d.Step(ctx, driver.StepInput{Samples: n, Compute: compute, Arrival: entered.Sub(stepStart), Cut: cut})
		stepStart = time.Now()
		if err != nil {
			return err
		}
		if res.Role == straggler.RoleChild {
			if res.Done {
				break
			}
			continue
		}
		if len(buf) > 0 && int(buf[0]) != res.Applied {
			return fmt.Errorf("driver: synthetic rank %d step %d: gradient sums %v samples, driver says %d", r, res.Step, buf[0], res.Applied)
		}
		st := res.Step
		rec.applied[st], rec.folded[st], rec.stale[st], rec.mode[st] = res.Applied, res.Report.ChildSamples(), res.Staleness, res.Plan.Mode
		rec.enter[st], rec.leave[st] = reducing, stepStart
		rec.reports[st], rec.plans[st] = res.Report, res.Next
		for _, rr := range res.Report.Current {
			if rr.Cut {
				rec.cut[st]++
			}
		}
	}
	buf := d.Buffer()
	f, err := d.Flush(ctx)
	if err != nil {
		return err
	}
	if len(buf) > 0 && int(buf[0]) != f.Applied {
		return fmt.Errorf("driver: synthetic rank %d flush: gradient sums %v samples, driver says %d", r, buf[0], f.Applied)
	}
	rec.flushApplied, rec.end = f.Applied, time.Now()
	return nil
}

// linkStall is the link stall the injector puts on rank at step (0: none).
// reassignStep computes rank's step s under in-step reassignment: the
// injected fixed delay first (messages answered meanwhile), then each unit
// a sleep of its rows at the rank's injected rate (workload's patterns are
// affine in the rows: Compute(n) = delay + rate·n).
func reassignStep(ctx context.Context, cfg Config, d *driver.Driver, r, s int) (driver.ReassignOutput, error) {
	const probe = 64
	delay := workload.Compute(cfg.Injector, r, s, 0, cfg.PerSample)
	rate := float64(workload.Compute(cfg.Injector, r, s, probe, cfg.PerSample)-delay) / probe
	own := d.Share(r)
	// The units' sleeps keep to the rows' running total: a timer that
	// overran is made up by the next unit's, as one sleep for a whole
	// share would be (the emulation's overshoot is not the protocol's).
	var owed, busy time.Duration
	out, err := d.Reassign(ctx, driver.ReassignInput{Config: cfg.Reassign, Rows: cfg.GlobalBatch, Delay: delay,
		Expect: max(time.Duration(rate*float64(own)), time.Millisecond),
		Compute: func(ctx context.Context, u straggler.Unit) error {
			t0 := time.Now()
			owed += time.Duration(rate * float64(u.Hi-u.Lo))
			err := ringtail.Sleep(ctx, owed-busy)
			busy += time.Since(t0)
			return err
		}})
	if err != nil {
		return out, fmt.Errorf("driver: synthetic rank %d step %d: %w", r, s, err)
	}
	out.Compute += delay // the policy's compute: the whole of the rank's own time, as without reassignment
	return out, nil
}

func linkStall(in *inject.Injector, rank, step int) time.Duration {
	if in == nil {
		return 0
	}
	return in.At(rank, step, 0).LinkStall
}

func firstError(errs []error) error {
	var real []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			real = append(real, err)
		}
	}
	if len(real) > 0 {
		return real[0]
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
