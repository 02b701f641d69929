package driver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// BenchConfig configures `ringtail bench straggler`.
type BenchConfig struct {
	// Ranks are the world sizes to run.
	Ranks []int
	// Patterns selects patterns by name (empty: all of DefaultPatterns).
	Patterns []string
	// Policy is the straggler.Preset compared with BSP (default
	// straggler.NameAdaptive).
	Policy string
	// Warmup and Steps, GlobalBatch, PerSample and GradBytes are as in
	// SyntheticConfig.
	Warmup, Steps int
	GlobalBatch   int
	PerSample     time.Duration
	GradBytes     int
	// Seed seeds the random patterns.
	Seed uint64
	// Logger receives the drivers' decisions.
	Logger zerolog.Logger
}

// BenchRow is one (pattern, ranks) result. Times are seconds per global
// batch of applied samples.
type BenchRow struct {
	// Pattern, Spec and Ranks name the row: the pattern's short name, its
	// straggler/inject spec, and the world size.
	Pattern string `json:"pattern"`
	Spec    string `json:"spec"`
	Ranks   int    `json:"ranks"`
	// BSP, Adaptive and Ideal are seconds per global batch.
	BSP      float64 `json:"bsp_s"`
	Adaptive float64 `json:"adaptive_s"`
	Ideal    float64 `json:"ideal_s"`
	// Ratio is Adaptive / Ideal; BSPRatio is BSP / Ideal.
	Ratio    float64 `json:"ratio"`
	BSPRatio float64 `json:"bsp_ratio"`
	// Policy is the adaptive preset.
	Policy string `json:"policy"`
	// Collective is the per-step reduction time in Ideal: the adaptive
	// run's SyntheticResult.Reduction (the last rank to arrive waits for
	// no straggler), measured under the same machine load as the run.
	Collective float64 `json:"collective_s"`
	// CleanCollective is the no-straggler BSP run's step time minus its
	// compute, for reference (it also holds the loop's overheads).
	CleanCollective float64 `json:"clean_collective_s"`
	// AppliedPerStep is the adaptive run's mean samples applied per step
	// (the global batch under BSP).
	AppliedPerStep float64 `json:"adaptive_applied_per_step"`
	// EvictSteps, OverlapSteps, Folded, Staleness and Cut describe the
	// adaptive run (see SyntheticResult).
	EvictSteps   int     `json:"evict_steps"`
	OverlapSteps int     `json:"overlap_steps"`
	Folded       int64   `json:"folded"`
	Staleness    float64 `json:"staleness"`
	Cut          int64   `json:"cut"`
}

// RunBench runs BSP and the adaptive policy under every selected pattern
// and world size, computes FlexRR's Ideal for each, and hands each row to
// emit as soon as it is measured.
func RunBench(ctx context.Context, cfg BenchConfig, emit func(BenchRow) error) error {
	if cfg.Policy == "" {
		cfg.Policy = straggler.NameAdaptive
	}
	for _, n := range cfg.Ranks {
		pats := workload.DefaultPatterns(n, cfg.GlobalBatch, cfg.PerSample, cfg.Seed)
		if len(cfg.Patterns) > 0 {
			var sel []workload.Pattern
			for _, name := range cfg.Patterns {
				i := slices.IndexFunc(pats, func(p workload.Pattern) bool { return p.Name == name })
				if i < 0 {
					names := make([]string, len(pats))
					for j, p := range pats {
						names[j] = p.Name
					}
					return fmt.Errorf("driver: unknown pattern %q for %d ranks (have %s)", name, n, strings.Join(names, ", "))
				}
				sel = append(sel, pats[i])
			}
			pats = sel
		}
		run := func(policy string, in *inject.Injector) (SyntheticResult, error) {
			return RunSynthetic(ctx, SyntheticConfig{Ranks: n, Policy: policy, Injector: in, Warmup: cfg.Warmup, Steps: cfg.Steps,
				GlobalBatch: cfg.GlobalBatch, PerSample: cfg.PerSample, GradBytes: cfg.GradBytes, Logger: cfg.Logger})
		}
		clean, err := run(straggler.NameBSP, nil)
		if err != nil {
			return fmt.Errorf("driver: %d ranks, no straggler, bsp: %w", n, err)
		}
		equal := time.Duration(float64(cfg.GlobalBatch) / float64(n) * float64(cfg.PerSample))
		coll := max(0, clean.PerBatch-equal)
		for _, pat := range pats {
			spec, err := inject.Parse(pat.Spec)
			if err != nil {
				return fmt.Errorf("driver: pattern %s: %w", pat.Name, err)
			}
			in, err := inject.New(spec, n)
			if err != nil {
				return fmt.Errorf("driver: pattern %s: %w", pat.Name, err)
			}
			bsp := clean
			if pat.Spec != "" {
				if bsp, err = run(straggler.NameBSP, in); err != nil {
					return fmt.Errorf("driver: %d ranks, %s, bsp: %w", n, pat.Name, err)
				}
			}
			ad, err := run(cfg.Policy, in)
			if err != nil {
				return fmt.Errorf("driver: %d ranks, %s, %s: %w", n, pat.Name, cfg.Policy, err)
			}
			var ideal time.Duration
			for s := cfg.Warmup; s < cfg.Warmup+cfg.Steps; s++ {
				ideal += workload.IdealCompute(in, n, s, cfg.GlobalBatch, cfg.PerSample)
			}
			ideal = ideal/time.Duration(cfg.Steps) + ad.Reduction
			row := BenchRow{Pattern: pat.Name, Spec: pat.Spec, Ranks: n, Policy: cfg.Policy,
				BSP: bsp.PerBatch.Seconds(), Adaptive: ad.PerBatch.Seconds(), Ideal: ideal.Seconds(),
				Collective: ad.Reduction.Seconds(), CleanCollective: coll.Seconds(), AppliedPerStep: float64(ad.Applied) / float64(cfg.Steps),
				EvictSteps: ad.EvictSteps, OverlapSteps: ad.OverlapSteps, Folded: ad.Folded, Staleness: ad.Staleness, Cut: ad.Cut}
			row.Ratio, row.BSPRatio = row.Adaptive/row.Ideal, row.BSP/row.Ideal
			if err := emit(row); err != nil {
				return err
			}
		}
	}
	return nil
}
