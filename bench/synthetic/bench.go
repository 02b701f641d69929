package synthetic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// LinkShaper shapes the network links between the ranks of a bench whose
// ranks run as processes on a test bed (internal/testbed/control.Client).
// The network straggler patterns need one.
type LinkShaper interface {
	// SetLinks makes the links those of spec's link clauses
	// (straggler/inject syntax; "" unshapes them all), every link that no
	// clause names unshaped. Connections opened before it may keep the
	// delay they had: call it before the run's communicator is made.
	SetLinks(ctx context.Context, spec string) error
	// Stall holds rank's link for d from now.
	Stall(ctx context.Context, rank int, d time.Duration) error
}

// ErrNoLinks is wrapped when a pattern shapes links and the bench has no
// LinkShaper: its ranks run in one process (they share memory, not links)
// or not on a test bed.
var ErrNoLinks = errors.New("the pattern shapes network links, and nothing shapes links here")

// BenchConfig configures `ringtail bench straggler`.
type BenchConfig struct {
	// Ranks are the world sizes to run (under Join: the job's world only).
	Ranks []int
	// Patterns selects patterns by name (empty: all of DefaultPatterns,
	// and of NetworkPatterns when Links is set).
	Patterns []string
	// Policies are the policy presets compared with BSP, a row each
	// (default [straggler.NameAdaptive]).
	Policies []string
	// Warmup and Steps, GlobalBatch, PerSample and GradBytes are as in
	// Config.
	Warmup, Steps int
	GlobalBatch   int
	PerSample     time.Duration
	GradBytes     int
	// Seed seeds the random patterns.
	Seed uint64
	// Logger receives the drivers' decisions.
	Logger zerolog.Logger
	// Join, when set, makes this process rank Rank of every run: it
	// returns a new communicator of the job's world for each run (a new
	// generation each time; see Config.Join). Every rank calls
	// RunBench with the same configuration, and every rank emits the same
	// rows (print them on one).
	Join func(ctx context.Context) (*ringtail.Comm, error)
	Rank int
	// Links shapes the links between the ranks (under Join; nil: nothing
	// does, and patterns with link clauses are refused with ErrNoLinks).
	// Rank 0 sets each run's links before joining it: a network pattern's
	// spec, or every link at LinkRate for the others.
	Links LinkShaper
	// LinkRate is the rate of every link in bits/s when Links is set (0:
	// unshaped); slow-link-10x puts one rank's link at a tenth of it.
	LinkRate int64
	// Probe makes the drivers measure the links when each run starts.
	Probe bool
	// Reassign, when its UnitSize is > 0, lets the policies (not BSP)
	// run the steps they choose under in-step reassignment
	// (Config.Reassign); their rows say POLICY+reassign.
	Reassign straggler.ReassignConfig
	// ReassignAt is Config.ReassignAt.
	ReassignAt float64
}

// BenchRow is one (pattern, ranks, policy) result. Times are seconds per
// global batch of applied samples.
type BenchRow struct {
	// Pattern, Spec and Ranks name the row: the pattern's short name, its
	// straggler/inject spec, and the world size.
	Pattern string `json:"pattern"`
	Spec    string `json:"spec"`
	Ranks   int    `json:"ranks"`
	// Links is the link spec the runs had on a test bed ("" unshaped or
	// none).
	Links string `json:"links,omitempty"`
	// BSP, Adaptive (the policy's) and Ideal are seconds per global batch.
	BSP      float64 `json:"bsp_s"`
	Adaptive float64 `json:"adaptive_s"`
	Ideal    float64 `json:"ideal_s"`
	// Ratio is Adaptive / Ideal; BSPRatio is BSP / Ideal.
	Ratio    float64 `json:"ratio"`
	BSPRatio float64 `json:"bsp_ratio"`
	// Exact is the floor of schedules that apply the whole batch fresh
	// every step (workload.ExactCompute plus the same reduction time as
	// Ideal): Ideal where no rank has a per-step intercept, above it where
	// one does (persistent). ExactRatio is Adaptive / Exact.
	Exact      float64 `json:"exact_s"`
	ExactRatio float64 `json:"exact_ratio"`
	// VsNone is Adaptive over the same policy's run of the pattern "none"
	// in this bench (0 when it did not run before this row), BSPVsNone BSP
	// over the no-straggler BSP run: the slowdown the pattern causes.
	VsNone    float64 `json:"vs_none,omitempty"`
	BSPVsNone float64 `json:"bsp_vs_none,omitempty"`
	// Policy is the policy preset of the row.
	Policy string `json:"policy"`
	// Collective is the per-step reduction time in Ideal: the adaptive
	// run's Result.Reduction (the last rank to arrive waits for
	// no straggler), measured under the same machine load as the run.
	Collective float64 `json:"collective_s"`
	// CleanCollective is the no-straggler BSP run's step time minus its
	// compute, for reference (it also holds the loop's overheads).
	CleanCollective float64 `json:"clean_collective_s"`
	// AppliedPerStep is the adaptive run's mean samples applied per step
	// (the global batch under BSP).
	AppliedPerStep float64 `json:"adaptive_applied_per_step"`
	// Modes describes the adaptive run's steps (its Result's).
	Modes
	// Computed and Applied count every sample the policy's run computed
	// and applied, warm-up and flush included; Run fails the run
	// unless they are equal (no gradient lost or folded twice).
	Computed int64 `json:"computed"`
	Applied  int64 `json:"applied"`
}

// benchPatterns returns the patterns the bench runs for n ranks.
func benchPatterns(cfg BenchConfig, n int) ([]workload.Pattern, error) {
	compute := workload.DefaultPatterns(n, cfg.GlobalBatch, cfg.PerSample, cfg.Seed)
	network := workload.NetworkPatterns(n, cfg.LinkRate, cfg.Warmup+cfg.Steps/2)
	if len(cfg.Patterns) == 0 {
		if cfg.Links != nil {
			return append(compute, network...), nil
		}
		return compute, nil
	}
	sel, err := workload.Select(append(compute, network...), cfg.Patterns)
	if err != nil {
		return nil, fmt.Errorf("driver: %d ranks: %w", n, err)
	}
	return sel, nil
}

// RunBench runs BSP and each policy under every selected pattern and world
// size, computes FlexRR's Ideal for each, and hands each row to emit as
// soon as it is measured.
func RunBench(ctx context.Context, cfg BenchConfig, emit func(BenchRow) error) error {
	if len(cfg.Policies) == 0 {
		cfg.Policies = []string{straggler.NameAdaptive}
	}
	if cfg.Join != nil && len(cfg.Ranks) != 1 {
		return fmt.Errorf("driver: a bench of ranks in processes of their own runs one world, not %v: %w", cfg.Ranks, driver.ErrInvalidConfig)
	}
	for _, n := range cfg.Ranks {
		pats, err := benchPatterns(cfg, n)
		if err != nil {
			return err
		}
		// Check every pattern before running any.
		ins := make([]*inject.Injector, len(pats))
		links := make([]string, len(pats))
		for i, pat := range pats {
			spec, err := inject.Parse(pat.Spec)
			if err != nil {
				return fmt.Errorf("driver: pattern %s: %w", pat.Name, err)
			}
			if ins[i], err = inject.New(spec, n); err != nil {
				return fmt.Errorf("driver: pattern %s: %w", pat.Name, err)
			}
			switch {
			case len(spec.Links) > 0 && cfg.Links == nil:
				return fmt.Errorf("driver: pattern %s (%s): %w: run its ranks as processes on a test bed that shapes their links "+
					"(scripts/bench-straggler-bed.sh; docs/benchmarks-straggler-bench.md)", pat.Name, pat.Spec, ErrNoLinks)
			case len(spec.Links) > 0:
				links[i] = pat.Spec
			case cfg.Links != nil:
				links[i] = workload.BaseLinks(n, cfg.LinkRate)
			}
		}
		run := func(policy string, in *inject.Injector, links string) (Result, error) {
			if cfg.Links != nil && cfg.Rank == 0 {
				if err := cfg.Links.SetLinks(ctx, links); err != nil {
					return Result{}, fmt.Errorf("setting the links %q: %w", links, err)
				}
			}
			rc := Config{Ranks: n, Policy: policy, Injector: in, Warmup: cfg.Warmup, Steps: cfg.Steps,
				GlobalBatch: cfg.GlobalBatch, PerSample: cfg.PerSample, GradBytes: cfg.GradBytes, Logger: cfg.Logger,
				Join: cfg.Join, Links: cfg.Links, Probe: cfg.Probe}
			if policy != straggler.NameBSP {
				rc.Reassign, rc.ReassignAt = cfg.Reassign, cfg.ReassignAt
			}
			return Run(ctx, rc)
		}
		name := func(policy string) string {
			if cfg.Reassign.UnitSize > 0 {
				return policy + "+reassign"
			}
			return policy
		}
		base := ""
		if cfg.Links != nil {
			base = workload.BaseLinks(n, cfg.LinkRate)
		}
		clean, err := run(straggler.NameBSP, nil, base)
		if err != nil {
			return fmt.Errorf("driver: %d ranks, no straggler, bsp: %w", n, err)
		}
		equal := time.Duration(float64(cfg.GlobalBatch) / float64(n) * float64(cfg.PerSample))
		coll := max(0, clean.PerBatch-equal)
		none := map[string]time.Duration{}
		for i, pat := range pats {
			in := ins[i]
			bsp := clean
			if pat.Spec != "" {
				if bsp, err = run(straggler.NameBSP, in, links[i]); err != nil {
					return fmt.Errorf("driver: %d ranks, %s, bsp: %w", n, pat.Name, err)
				}
			}
			var ideal, exact time.Duration
			for s := cfg.Warmup; s < cfg.Warmup+cfg.Steps; s++ {
				ideal += workload.IdealCompute(in, n, s, cfg.GlobalBatch, cfg.PerSample)
				exact += workload.ExactCompute(in, n, s, cfg.GlobalBatch, cfg.PerSample)
			}
			ideal /= time.Duration(cfg.Steps)
			exact /= time.Duration(cfg.Steps)
			for _, policy := range cfg.Policies {
				ad, err := run(policy, in, links[i])
				if err != nil {
					return fmt.Errorf("driver: %d ranks, %s, %s: %w", n, pat.Name, policy, err)
				}
				if pat.Name == "none" {
					none[policy] = ad.PerBatch
				}
				idealRow := ideal + ad.Reduction
				row := BenchRow{Pattern: pat.Name, Spec: pat.Spec, Ranks: n, Policy: name(policy), Links: links[i],
					BSP: bsp.PerBatch.Seconds(), Adaptive: ad.PerBatch.Seconds(), Ideal: idealRow.Seconds(),
					Collective: ad.Reduction.Seconds(), CleanCollective: coll.Seconds(), AppliedPerStep: float64(ad.Applied) / float64(cfg.Steps),
					Modes:    ad.Modes,
					Computed: ad.Total, Applied: ad.TotalApplied}
				row.Ratio, row.BSPRatio = row.Adaptive/row.Ideal, row.BSP/row.Ideal
				row.Exact = (exact + ad.Reduction).Seconds()
				row.ExactRatio = row.Adaptive / row.Exact
				if clean.PerBatch > 0 {
					row.BSPVsNone = row.BSP / clean.PerBatch.Seconds()
				}
				if ref := none[policy]; ref > 0 {
					row.VsNone = row.Adaptive / ref.Seconds()
				}
				if err := emit(row); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
