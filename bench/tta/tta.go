package tta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// ErrInvalidConfig is returned for a Config that cannot run.
var ErrInvalidConfig = errors.New("tta: invalid configuration")

// Config is one benchmark: every pattern × world size × policy.
type Config struct {
	// Ranks are the world sizes.
	Ranks []int
	// Patterns select compute patterns of workload.DefaultPatterns by
	// name; empty: all of them. Network patterns need a test bed and are
	// refused here.
	Patterns []string
	// Policies are the straggler presets compared with BSP (default:
	// straggler.NameShares).
	Policies []string
	// Epochs of each run (default 6) and the epoch whose BSP accuracy is
	// the target (default 4, at most Epochs).
	Epochs, TargetEpoch int
	// EvalEvery: rank 0 evaluates the held-out set every this many steps
	// (default 3): the curve time to accuracy is read from.
	EvalEvery int
	// Hidden are the MLP's hidden layer widths (default 64).
	Hidden []int
	// Batch is the global batch (default 64); StepCompute the padded
	// compute of an equal share (default 100 ms), which the patterns
	// scale.
	Batch       int
	StepCompute time.Duration
	// Seed seeds the data split, the weights, the shuffles and the
	// random patterns (default 1).
	Seed uint64
	// OpTimeout bounds every collective (default 2 minutes).
	OpTimeout time.Duration
	// Logger receives the drivers' logs.
	Logger zerolog.Logger
}

func (c *Config) withDefaults() error {
	if len(c.Policies) == 0 {
		c.Policies = []string{straggler.NameShares}
	}
	if c.Epochs == 0 {
		c.Epochs = 6
	}
	if c.TargetEpoch == 0 {
		c.TargetEpoch = min(4, c.Epochs)
	}
	if c.EvalEvery == 0 {
		c.EvalEvery = 3
	}
	if c.Hidden == nil {
		c.Hidden = []int{64}
	}
	if c.Batch == 0 {
		c.Batch = 64
	}
	if c.StepCompute == 0 {
		c.StepCompute = 100 * time.Millisecond
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 2 * time.Minute
	}
	var errs []error
	if len(c.Ranks) == 0 {
		errs = append(errs, errors.New("no world size"))
	}
	for _, n := range c.Ranks {
		if n < 2 {
			errs = append(errs, fmt.Errorf("world of %d ranks: want at least 2", n))
		}
	}
	if c.Epochs < 1 || c.TargetEpoch < 1 || c.TargetEpoch > c.Epochs {
		errs = append(errs, fmt.Errorf("target epoch %d of %d epochs: want 1 ≤ target ≤ epochs", c.TargetEpoch, c.Epochs))
	}
	if c.EvalEvery < 1 || c.Batch < 1 || c.StepCompute < 0 || c.OpTimeout < 0 {
		errs = append(errs, fmt.Errorf("evaluation every %d steps, batch %d, step compute %v, op timeout %v: want positive values",
			c.EvalEvery, c.Batch, c.StepCompute, c.OpTimeout))
	}
	for _, p := range c.Policies {
		if !slices.Contains(straggler.Names(), p) {
			errs = append(errs, fmt.Errorf("policy %q: want one of %v", p, straggler.Names()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Run is one training run's outcome, read from rank 0's report.
type Run struct {
	// TTA is the training time (evaluations taken out) at the first
	// evaluation at or above the target, in seconds; Reached is false
	// when no evaluation got there (TTA is then 0).
	TTA     float64 `json:"tta_s"`
	Reached bool    `json:"reached"`
	// Final is the held-out accuracy after the last epoch (0..1).
	Final float64 `json:"final_accuracy"`
	// Step is the mean step (seconds); Modes counts the steps by mode.
	Step  float64        `json:"step_s"`
	Modes map[string]int `json:"modes,omitempty"`
}

// Row is one (pattern, world size, policy) of the benchmark.
type Row struct {
	// Pattern and Spec name the straggler pattern; Ranks the world size;
	// Policy the preset compared with BSP.
	Pattern string `json:"pattern"`
	Spec    string `json:"spec"`
	Ranks   int    `json:"ranks"`
	Policy  string `json:"policy"`
	// Target is BSP's held-out accuracy after Config.TargetEpoch epochs
	// without a straggler, and NoStraggler the training time at which its
	// curve first reaches it (seconds).
	Target      float64 `json:"target_accuracy"`
	NoStraggler float64 `json:"no_straggler_s"`
	// BSP and Adaptive are the runs under the pattern.
	BSP      Run `json:"bsp"`
	Adaptive Run `json:"policy_run"`
	// BSPRatio and Ratio are their TTAs over NoStraggler (0: never
	// reached).
	BSPRatio float64 `json:"bsp_ratio"`
	Ratio    float64 `json:"ratio"`
}

// RunBench trains BSP without a straggler (the target), then BSP and each
// policy under every selected pattern and world size, and hands each row to
// emit as soon as it is measured.
func RunBench(ctx context.Context, cfg Config, emit func(Row) error) error {
	if err := cfg.withDefaults(); err != nil {
		return err
	}
	all, err := train.LoadDigits("")
	if err != nil {
		return err
	}
	trainSet, testSet, err := all.Split(0.2, cfg.Seed)
	if err != nil {
		return err
	}
	for _, n := range cfg.Ranks {
		// The trainer pads an equal share (Batch/n rows) to StepCompute.
		perSample := time.Duration(float64(cfg.StepCompute) * float64(n) / float64(cfg.Batch))
		pats, err := patterns(cfg, n, perSample)
		if err != nil {
			return err
		}
		job := func(policy, spec string) (train.Report, error) {
			return trainJob(ctx, cfg, n, policy, spec, trainSet, testSet)
		}
		clean, err := job(straggler.NameBSP, "")
		if err != nil {
			return fmt.Errorf("tta: %d ranks, no straggler, bsp: %w", n, err)
		}
		if len(clean.Epochs) < cfg.TargetEpoch {
			return fmt.Errorf("tta: %d ranks, no straggler, bsp: %d epochs, want %d", n, len(clean.Epochs), cfg.TargetEpoch)
		}
		target := clean.Epochs[cfg.TargetEpoch-1].TestAccuracy
		ref := runOf(clean, target)
		if !ref.Reached {
			return fmt.Errorf("tta: %d ranks, no straggler, bsp: the curve (every %d steps) never reaches its own epoch-%d accuracy %.4f",
				n, cfg.EvalEvery, cfg.TargetEpoch, target)
		}
		for _, pat := range pats {
			bsp := clean
			if pat.Spec != "" {
				if bsp, err = job(straggler.NameBSP, pat.Spec); err != nil {
					return fmt.Errorf("tta: %d ranks, %s, bsp: %w", n, pat.Name, err)
				}
			}
			for _, policy := range cfg.Policies {
				ad, err := job(policy, pat.Spec)
				if err != nil {
					return fmt.Errorf("tta: %d ranks, %s, %s: %w", n, pat.Name, policy, err)
				}
				row := Row{Pattern: pat.Name, Spec: pat.Spec, Ranks: n, Policy: policy, Target: target, NoStraggler: ref.TTA,
					BSP: runOf(bsp, target), Adaptive: runOf(ad, target)}
				row.BSPRatio, row.Ratio = ratio(row.BSP, ref), ratio(row.Adaptive, ref)
				if err := emit(row); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// patterns returns the selected compute patterns for n ranks.
func patterns(cfg Config, n int, perSample time.Duration) ([]workload.Pattern, error) {
	sel, err := workload.Select(workload.DefaultPatterns(n, cfg.Batch, perSample, cfg.Seed), cfg.Patterns)
	if err != nil {
		return nil, fmt.Errorf("%w: %d ranks: %w (network patterns need a test bed: scripts/bench-tta.sh)", ErrInvalidConfig, n, err)
	}
	return sel, nil
}

// trainJob trains the model on n ranks in this process under the pattern
// spec ("" injects nothing): plain synchronous SGD for straggler.NameBSP,
// else through the straggler driver with the policy's preset. It returns
// rank 0's report; the trainer has checked that every rank ends with the
// same parameters.
func trainJob(ctx context.Context, cfg Config, n int, policy, spec string, trainSet, testSet *train.Dataset) (train.Report, error) {
	var in *inject.Injector
	if spec != "" {
		s, err := inject.Parse(spec)
		if err != nil {
			return train.Report{}, err
		}
		if in, err = inject.New(s, n); err != nil {
			return train.Report{}, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	comms, err := ringtail.NewLocal(ctx, n, func(c *ringtail.Config) {
		c.JobID, c.Secret = "ringtail-bench-tta", []byte("ringtail-bench-tta-in-process")
		c.OpTimeout, c.ConnectTimeout = cfg.OpTimeout, 30*time.Second
	})
	if err != nil {
		return train.Report{}, err
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	reps := make([]train.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			if reps[r], errs[r] = trainRank(ctx, cfg, comms[r], in, policy, trainSet, testSet); errs[r] != nil {
				cancel() // unblock the others at once
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return train.Report{}, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return train.Report{}, err
	}
	return reps[0], nil
}

// trainRank is one rank of trainJob.
func trainRank(ctx context.Context, cfg Config, comm *ringtail.Comm, in *inject.Injector, policy string, trainSet, testSet *train.Dataset) (train.Report, error) {
	runner, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: comm.Rank(), Logger: cfg.Logger})
	if err != nil {
		return train.Report{}, err
	}
	tc := train.DefaultConfig()
	tc.Comm, tc.Train, tc.Test, tc.Hidden = comm, trainSet, testSet, cfg.Hidden
	tc.Epochs, tc.Batch, tc.Seed, tc.EvalEvery = cfg.Epochs, cfg.Batch, cfg.Seed, cfg.EvalEvery
	tc.StepCompute, tc.Runner, tc.Logger = cfg.StepCompute, runner, cfg.Logger
	if policy != straggler.NameBSP {
		pol, err := straggler.Preset(policy, comm.Size(), cfg.Batch)
		if err != nil {
			return train.Report{}, err
		}
		tc.Sync = train.StragglerSync(driver.NewSync(driver.Config{Comm: comm, Policy: pol, Logger: cfg.Logger}))
	}
	tr, err := train.New(tc)
	if err != nil {
		return train.Report{}, err
	}
	return tr.Run(ctx)
}

// runOf reads a run's outcome from rank 0's report.
func runOf(rep train.Report, target float64) Run {
	r := Run{Final: rep.TestAccuracy, Step: rep.StepMean.Seconds()}
	for _, p := range rep.Curve {
		if p.TestAccuracy >= target {
			r.TTA, r.Reached = p.Seconds, true
			break
		}
	}
	for _, e := range rep.Epochs {
		for m, k := range e.Modes {
			if r.Modes == nil {
				r.Modes = map[string]int{}
			}
			r.Modes[m] += k
		}
	}
	return r
}

// ratio is a run's TTA over the no-straggler run's, 0 when never reached.
func ratio(r, ref Run) float64 {
	if !r.Reached || ref.TTA <= 0 {
		return 0
	}
	return r.TTA / ref.TTA
}
