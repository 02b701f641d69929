package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
	"github.com/ringtail-ml/ringtail/straggler/driver/workload"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// SyntheticConfig configures one run of the synthetic data-parallel job of
// `ringtail bench straggler`.
type SyntheticConfig struct {
	// Ranks is the number of ranks, run in this process (one goroutine and
	// one Comm over real sockets each).
	Ranks int
	// Policy is a preset name (PolicyBSP, PolicyAdaptive, …).
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
}

func (c SyntheticConfig) validate() error {
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
	_, err := policy.Preset(c.Policy, c.Ranks, c.GlobalBatch)
	return err
}

// SyntheticResult is what one run measured (rank 0's clock).
type SyntheticResult struct {
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
	// EvictSteps counts measured steps run in evict mode; Late the samples
	// folded a step late; Cut the rank-steps the budget ended.
	EvictSteps int   `json:"evict_steps"`
	Late       int64 `json:"late"`
	Cut        int64 `json:"cut"`
	// Reduction is the mean over measured steps of the time from the last
	// rank's entering the step's reduction to the last rank's leaving it:
	// the reduction with nobody left to wait for, under the run's load.
	Reduction time.Duration `json:"reduction_ns"`
}

// RunSynthetic runs the synthetic job: every step each rank computes its
// share (or, under a budget, as many samples as fit in it) with a timer
// sleep of the injected duration, puts the sample count in its gradient,
// and reduces the gradient through its Driver. It returns rank 0's
// measurement of the Steps after the warmup, flush included.
func RunSynthetic(ctx context.Context, cfg SyntheticConfig) (SyntheticResult, error) {
	if err := cfg.validate(); err != nil {
		return SyntheticResult{}, err
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 2 * time.Minute
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
		return SyntheticResult{}, fmt.Errorf("driver: %w", err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	out := SyntheticResult{Policy: cfg.Policy, Ranks: cfg.Ranks, Steps: cfg.Steps}
	computed := make([]int64, cfg.Ranks)
	enter := make([][]time.Time, cfg.Ranks)
	leave := make([][]time.Time, cfg.Ranks)
	errs := make([]error, cfg.Ranks)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res *SyntheticResult
			if r == 0 {
				res = &out
			}
			enter[r], leave[r] = make([]time.Time, cfg.Steps), make([]time.Time, cfg.Steps)
			errs[r] = syntheticRank(ctx, cfg, comms[r], res, &computed[r], enter[r], leave[r])
			if errs[r] != nil {
				cancel() // unblock the others at once
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return out, err
	}
	for _, c := range computed {
		out.Computed += c
	}
	for s := 0; s < cfg.Steps; s++ {
		var in, out2 time.Time
		for r := range enter {
			if enter[r][s].After(in) {
				in = enter[r][s]
			}
			if leave[r][s].After(out2) {
				out2 = leave[r][s]
			}
		}
		out.Reduction += out2.Sub(in)
	}
	out.Reduction /= time.Duration(cfg.Steps)
	if out.Applied > 0 {
		out.PerBatch = time.Duration(float64(out.Wall) * float64(cfg.GlobalBatch) / float64(out.Applied))
	}
	return out, nil
}

func syntheticRank(ctx context.Context, cfg SyntheticConfig, comm *ringtail.Comm, out *SyntheticResult, computed *int64, enter, leave []time.Time) error {
	r := comm.Rank()
	pol, err := policy.Preset(cfg.Policy, cfg.Ranks, cfg.GlobalBatch)
	if err != nil {
		return err
	}
	d, err := New(Config{Comm: comm, Payload: cfg.GradBytes / 4, Policy: pol, OpTimeout: cfg.OpTimeout, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	defer d.Close()
	var t0 time.Time
	stepStart := time.Now()
	for s := 0; s < cfg.Warmup+cfg.Steps; s++ {
		measured := s >= cfg.Warmup
		if s == cfg.Warmup {
			t0 = stepStart
		}
		p := d.Plan()
		n, cut := p.Shares[r], false
		compute := workload.Compute(cfg.Injector, r, s, n, cfg.PerSample)
		if p.Budget > 0 {
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
		buf[0] = float32(n) // the rest of the gradient stays zero: the bytes move all the same
		if err := ringtail.Sleep(ctx, time.Until(stepStart.Add(busy))); err != nil {
			return fmt.Errorf("driver: synthetic rank %d step %d: %w", r, s, err)
		}
		if measured {
			*computed += int64(n)
		}
		entered := time.Now()
		res, err := d.Step(ctx, StepInput{Samples: n, Compute: compute, Arrival: entered.Sub(stepStart), Cut: cut})
		stepStart = time.Now()
		if err != nil {
			return err
		}
		if int(buf[0]) != res.Applied {
			return fmt.Errorf("driver: synthetic rank %d step %d: gradient sums %v samples, driver says %d", r, s, buf[0], res.Applied)
		}
		if measured {
			enter[s-cfg.Warmup], leave[s-cfg.Warmup] = entered, stepStart
		}
		if out != nil && measured {
			out.Applied += int64(res.Applied)
			out.Late += int64(res.Late)
			if res.Plan.Mode == straggler.ModeEvict {
				out.EvictSteps++
			}
			for _, rr := range res.Report.Current {
				if rr.Cut {
					out.Cut++
				}
			}
		}
	}
	buf := d.Buffer()
	f, err := d.Flush(ctx)
	if err != nil {
		return err
	}
	if int(buf[0]) != f.Applied {
		return fmt.Errorf("driver: synthetic rank %d flush: gradient sums %v samples, driver says %d", r, buf[0], f.Applied)
	}
	if out != nil {
		out.Wall = time.Since(t0)
		out.Applied += int64(f.Applied)
		out.Late += int64(f.Late)
	}
	return nil
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
