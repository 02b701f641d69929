package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/bench"
	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/sim"
	"github.com/ringtail-ml/ringtail/straggler"
)

const simUsage = `Usage: ringtail sim [--ranks 64,256,1024,4096] [--patterns a,b] [--json] ...

Discrete-event simulation of data-parallel training under stragglers:
simulated ranks (per-sample compute slowed by the straggler/inject
patterns), a ring all-reduce costed 2(k−1)·(α + bytes/k/bandwidth), and the
straggler driver's own Policy deciding every step. For every (pattern,
ranks) it prints seconds per global batch of applied samples for BSP, the
policy and FlexRR's Ideal, and the policy's decision cost (wall time).

Flags:
`

// runSim is `ringtail sim`.
func runSim(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail sim", simUsage)
	fs := cmd.Flags
	ranks := fs.String("ranks", "64,256,1024,4096", "world sizes, comma-separated")
	patterns := fs.String("patterns", "", "patterns by name, comma-separated (default all; as in ringtail bench straggler)")
	policyName := fs.String("policy", straggler.NameAdaptive, "policy compared with BSP: "+strings.Join(straggler.Names(), ", "))
	steps := fs.Int("steps", 60, "measured steps per run")
	warmup := fs.Int("warmup", 3, "steps before measuring")
	perRank := fs.Int("batch-per-rank", 64, "samples per rank per step (the global batch grows with the world)")
	perSample := fs.Duration("sample", 2*time.Millisecond, "unslowed compute per sample")
	grad := fs.String("grad", "16M", "gradient size in bytes (K, M suffixes)")
	alpha := fs.Duration("alpha", sim.DefaultAlpha, "per-message latency α")
	bandwidth := fs.Float64("bandwidth", sim.DefaultBytesPerSec, "per-link bandwidth, bytes/s")
	seed := fs.Uint64("seed", 1, "seed of the random patterns")
	asJSON := fs.Bool("json", false, "print one JSON object per (pattern, ranks)")
	reassignUnit := fs.Int("reassign-unit", 0, "price in-step reassignment (FlexRR, exact) with units of this many samples (0: off)")
	reassignHelpers := fs.Int("reassign-helpers", 4, "in-step reassignment: each rank's helper group size (FlexRR: 4)")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringtail sim: "+format+"\n", a...)
		return 2
	}
	cfg := sim.CompareConfig{Policy: *policyName, Warmup: *warmup, Steps: *steps, BatchPerRank: *perRank, PerSample: *perSample,
		Network: sim.Network{Alpha: *alpha, BytesPerSec: *bandwidth}, Seed: *seed, Clock: time.Now, ReassignUnit: *reassignUnit, ReassignHelpers: *reassignHelpers}
	var err error
	if cfg.Ranks, err = parseRanks(*ranks, 1<<16); err != nil {
		return usage("--ranks: %v", err)
	}
	cfg.Patterns = splitNames(*patterns)
	g, err := bench.ParseSize(*grad)
	if err != nil || g < 0 || g > 1<<34 {
		return usage("--grad: %q is not a size", *grad)
	}
	cfg.GradBytes = int(g)
	if _, err := straggler.Preset(*policyName, 1, 1); err != nil {
		return usage("--policy: %v", err)
	}
	if *reassignUnit < 0 || *reassignHelpers < 1 {
		return usage("need --reassign-unit ≥ 0, --reassign-helpers ≥ 1")
	}
	if *perRank < 1 || *steps < 1 || *warmup < 0 || *perSample <= 0 || !(*bandwidth > 0) || *alpha < 0 {
		return usage("need --batch-per-rank ≥ 1, --steps ≥ 1, --warmup ≥ 0, --sample > 0, --bandwidth > 0, --alpha ≥ 0")
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "# ringtail sim: %d samples/rank/step, %v/sample, gradient %s, α %v, %.3g B/s, %d+%d steps, policy %s, seed %d\n",
			cfg.BatchPerRank, cfg.PerSample, *grad, *alpha, *bandwidth, cfg.Warmup, cfg.Steps, cfg.Policy, cfg.Seed)
		fmt.Fprintf(stdout, "# seconds per global batch of applied samples; decision = wall time of one Policy.Observe\n")
		fmt.Fprintf(stdout, "# coded_s: gradient coding priced (straggler.ChooseCoded) with its s; pick: ring, shares or coded by that price\n")
		fmt.Fprintf(stdout, "%-16s %6s %9s %9s %9s %8s %8s %10s %10s %6s %9s %2s %7s %9s\n", "pattern", "ranks", "bsp_s", "adapt_s", "ideal_s",
			"ad/ideal", "bsp/id", "decide_ms", "max_ms", "evict", "coded_s", "s", "pick", "price_ms")
		if *reassignUnit > 0 {
			fmt.Fprintf(stdout, "# reassign_s: in-step reassignment (straggler.SimulateReassign), units of %d samples, helper groups of %d; re/id its ratio to Ideal; moved: units moved; on-shares: the same on the shares preset's plans; priced: the shares preset choosing it per step (its surprise, the training default), steps reassigned, decision ms\n", *reassignUnit, *reassignHelpers)
		}
	}
	err = sim.Compare(cfg, func(r sim.Row) error {
		if *asJSON {
			return printJSONLine(stdout, r)
		}
		_, err := fmt.Fprintf(stdout, "%-16s %6d %9.4f %9.4f %9.4f %8.3f %8.3f %10.3f %10.3f %6d %9.4f %2d %7s %9.3f", r.Pattern, r.Ranks,
			r.BSP, r.Adaptive, r.Ideal, r.Ratio, r.BSPRatio, r.DecisionMeanMS, r.DecisionMaxMS, r.EvictSteps,
			r.Coded, r.CodedS, r.CodedPick, r.CodedDecisionMS)
		if err == nil && *reassignUnit > 0 {
			_, err = fmt.Fprintf(stdout, " reassign_s %.4f re/id %.3f moved %.1f%% on-shares_s %.4f rs/id %.3f priced_s %.4f pr/id %.3f steps %d decide_ms %.3f",
				r.Reassign, r.ReassignRatio, 100*r.ReassignMoved, r.ReassignShares, r.ReassignSharesRatio,
				r.Priced, r.PricedRatio, r.PricedSteps, r.PricedDecisionMeanMS)
		}
		if err == nil {
			_, err = fmt.Fprintln(stdout)
		}
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "ringtail sim: %v\n", err)
		return 1
	}
	return 0
}
