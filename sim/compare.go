package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// CompareConfig configures `ringtail sim`: every selected pattern at every
// world size, BSP against a policy, with FlexRR's Ideal beside them.
type CompareConfig struct {
	// Ranks are the world sizes.
	Ranks []int
	// Patterns selects driver.DefaultPatterns by name (empty: all).
	Patterns []string
	// Policy is the preset compared with BSP (default adaptive).
	Policy string
	// Warmup and Steps per run.
	Warmup, Steps int
	// BatchPerRank is the global batch divided by the world size, so that
	// a rank's compute stays the same as the world grows.
	BatchPerRank int
	// PerSample, GradBytes and Network are as in Config.
	PerSample time.Duration
	GradBytes int
	Network   Network
	// Seed seeds the random patterns.
	Seed uint64
	// Clock measures decisions (nil: not measured).
	Clock func() time.Time
	// ReassignUnit, when above 0, prices in-step reassignment (Reassign)
	// with units of that many samples beside the other columns, helper
	// groups of ReassignHelpers ranks (0: FlexRR's 4).
	ReassignUnit, ReassignHelpers int
}

// Row is one (pattern, ranks) comparison; times are seconds per global
// batch of applied samples.
type Row struct {
	// Pattern, Spec, Ranks and Policy name the row.
	Pattern string `json:"pattern"`
	Spec    string `json:"spec"`
	Ranks   int    `json:"ranks"`
	Policy  string `json:"policy"`
	// BSP, Adaptive (the policy) and Ideal are seconds per global batch.
	BSP      float64 `json:"bsp_s"`
	Adaptive float64 `json:"adaptive_s"`
	Ideal    float64 `json:"ideal_s"`
	// Ratio is Adaptive/Ideal, BSPRatio BSP/Ideal.
	Ratio    float64 `json:"ratio"`
	BSPRatio float64 `json:"bsp_ratio"`
	// DecisionMeanMS and DecisionMaxMS are the policy's decision cost
	// (wall time of one Policy.Observe) in the adaptive run.
	DecisionMeanMS float64 `json:"decision_mean_ms"`
	DecisionMaxMS  float64 `json:"decision_max_ms"`
	// EvictSteps, OverlapSteps, Staleness and AppliedPerStep describe the
	// adaptive run.
	EvictSteps     int     `json:"evict_steps"`
	OverlapSteps   int     `json:"overlap_steps"`
	Staleness      float64 `json:"staleness"`
	AppliedPerStep float64 `json:"applied_per_step"`
	// Coded is gradient coding's priced time per batch (s = 1 or 2, the
	// cheaper; straggler.ChooseCoded on the measured steps' slowdowns),
	// CodedS its s, CodedPick what the pricing picks among ring, shares
	// and coded, CodedDecisionMS the wall time of that decision.
	Coded           float64 `json:"coded_s"`
	CodedS          int     `json:"coded_stragglers"`
	CodedPick       string  `json:"coded_pick"`
	CodedDecisionMS float64 `json:"coded_decision_ms"`
	// Reassign is in-step reassignment's time per batch (with
	// CompareConfig.ReassignUnit), ReassignRatio it over Ideal,
	// ReassignMoved the fraction of units moved.
	Reassign      float64 `json:"reassign_s,omitempty"`
	ReassignRatio float64 `json:"reassign_ratio,omitempty"`
	ReassignMoved float64 `json:"reassign_moved,omitempty"`
	// ReassignShares is in-step reassignment on top of the shares preset's
	// plans, ReassignSharesRatio it over Ideal.
	ReassignShares      float64 `json:"reassign_shares_s,omitempty"`
	ReassignSharesRatio float64 `json:"reassign_shares_ratio,omitempty"`
	// Priced is the shares preset with the policy choosing reassignment
	// per step (straggler.Config.Reassign at its default threshold, the
	// training default), PricedRatio it over Ideal, PricedSteps the
	// measured steps it reassigned, PricedDecisionMeanMS its decisions'
	// mean wall time.
	Priced               float64 `json:"priced_s,omitempty"`
	PricedRatio          float64 `json:"priced_ratio,omitempty"`
	PricedSteps          int     `json:"priced_steps,omitempty"`
	PricedDecisionMeanMS float64 `json:"priced_decision_mean_ms,omitempty"`
}

// Compare simulates BSP and cfg.Policy under each pattern and world size
// and hands every row to emit.
func Compare(cfg CompareConfig, emit func(Row) error) error {
	if cfg.Policy == "" {
		cfg.Policy = straggler.NameAdaptive
	}
	if cfg.Network == (Network{}) {
		cfg.Network = DefaultNetwork()
	}
	for _, n := range cfg.Ranks {
		m := cfg.BatchPerRank * n
		pats := workload.DefaultPatterns(n, m, cfg.PerSample, cfg.Seed)
		if len(cfg.Patterns) > 0 {
			var sel []workload.Pattern
			for _, name := range cfg.Patterns {
				i := slices.IndexFunc(pats, func(p workload.Pattern) bool { return p.Name == name })
				if i < 0 {
					var names []string
					for _, p := range pats {
						names = append(names, p.Name)
					}
					return fmt.Errorf("sim: unknown pattern %q (have %s): %w", name, strings.Join(names, ", "), ErrInvalidConfig)
				}
				sel = append(sel, pats[i])
			}
			pats = sel
		}
		for _, pat := range pats {
			spec, err := inject.Parse(pat.Spec)
			if err != nil {
				return fmt.Errorf("sim: pattern %s: %w", pat.Name, err)
			}
			in, err := inject.New(spec, n)
			if err != nil {
				return fmt.Errorf("sim: pattern %s: %w", pat.Name, err)
			}
			run := func(name string, clock func() time.Time) (Result, error) {
				return Run(Config{Ranks: n, Policy: name, Injector: in, Warmup: cfg.Warmup, Steps: cfg.Steps, GlobalBatch: m,
					PerSample: cfg.PerSample, GradBytes: cfg.GradBytes, Network: cfg.Network, Clock: clock})
			}
			bsp, err := run(straggler.NameBSP, nil)
			if err != nil {
				return err
			}
			ad, err := run(cfg.Policy, cfg.Clock)
			if err != nil {
				return err
			}
			ideal := Ideal(in, n, cfg.Warmup, cfg.Warmup+cfg.Steps, m, cfg.PerSample, cfg.GradBytes, cfg.Network)
			row := Row{Pattern: pat.Name, Spec: pat.Spec, Ranks: n, Policy: cfg.Policy,
				BSP: bsp.PerBatch.Seconds(), Adaptive: ad.PerBatch.Seconds(), Ideal: ideal.Seconds(),
				DecisionMeanMS: float64(ad.DecisionMean) / 1e6, DecisionMaxMS: float64(ad.DecisionMax) / 1e6,
				EvictSteps: ad.EvictSteps, OverlapSteps: ad.OverlapSteps, Staleness: ad.Staleness,
				AppliedPerStep: float64(ad.Applied) / float64(cfg.Steps)}
			row.Ratio, row.BSPRatio = row.Adaptive/row.Ideal, row.BSP/row.Ideal
			if n > 1 {
				cd, took, err := Coded(in, n, cfg.Warmup, cfg.Warmup+cfg.Steps, m, cfg.PerSample, cfg.GradBytes, cfg.Network, min(2, n-1), cfg.Clock)
				if err != nil {
					return fmt.Errorf("sim: pattern %s: pricing coding: %w", pat.Name, err)
				}
				best := straggler.CodedCost{Time: straggler.Forever}
				for _, c := range cd.Costs {
					if c.Mode == straggler.CodedCoded && c.Time < best.Time {
						best = c
					}
				}
				row.Coded, row.CodedS, row.CodedPick = best.Time.Seconds(), best.S, cd.Mode
				row.CodedDecisionMS = float64(took) / 1e6
			}
			if cfg.ReassignUnit > 0 {
				rc := straggler.DefaultReassignConfig(cfg.ReassignUnit)
				if cfg.ReassignHelpers > 0 {
					rc.Helpers = cfg.ReassignHelpers
				}
				rp, err := Reassign(in, n, cfg.Warmup, cfg.Warmup+cfg.Steps, m, cfg.PerSample, cfg.GradBytes, cfg.Network, rc, nil)
				if err != nil {
					return fmt.Errorf("sim: pattern %s: %w", pat.Name, err)
				}
				row.Reassign, row.ReassignMoved = rp.PerBatch.Seconds(), rp.Moved
				row.ReassignRatio = row.Reassign / row.Ideal
				// On top of the shares preset's plans, as decided in its own
				// run (the reports it reads carry the same speeds).
				sh, err := run(straggler.NameShares, nil)
				if err != nil {
					return err
				}
				rs, err := Reassign(in, n, cfg.Warmup, cfg.Warmup+cfg.Steps, m, cfg.PerSample, cfg.GradBytes, cfg.Network, rc,
					func(step int) []int { return sh.Plans[step-1].Shares })
				if err != nil {
					return fmt.Errorf("sim: pattern %s: on shares: %w", pat.Name, err)
				}
				row.ReassignShares = rs.PerBatch.Seconds()
				row.ReassignSharesRatio = row.ReassignShares / row.Ideal
				// The policy choosing per step, in the simulation itself.
				pr, err := Run(Config{Ranks: n, Policy: straggler.NameShares, Injector: in, Warmup: cfg.Warmup, Steps: cfg.Steps, GlobalBatch: m,
					PerSample: cfg.PerSample, GradBytes: cfg.GradBytes, Network: cfg.Network, Clock: cfg.Clock, Reassign: rc})
				if err != nil {
					return fmt.Errorf("sim: pattern %s: priced: %w", pat.Name, err)
				}
				row.Priced, row.PricedSteps = pr.PerBatch.Seconds(), pr.ReassignSteps
				row.PricedRatio = row.Priced / row.Ideal
				row.PricedDecisionMeanMS = float64(pr.DecisionMean) / 1e6
			}
			if err := emit(row); err != nil {
				return err
			}
		}
	}
	return nil
}
