package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail/internal/bench"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
)

const benchStragglerUsage = `Usage: ringtail bench straggler [--ranks 4,8] [--patterns a,b] [--grad 16M] [--json] ...

A synthetic data-parallel job — a fixed compute per sample (a timer sleep,
so it takes no CPU from the allreduce) and a real allreduce of the gradient
— under FlexRR's and AntDT's straggler patterns. For every (pattern, ranks)
it prints seconds per global batch of applied samples for the BSP ring,
ringtail's adaptive policy and FlexRR's Ideal (the batch's work balanced
perfectly over the ranks' injected speeds, plus the policy run's measured
per-step reduction time), and adaptive/Ideal. Ranks run in this process, one
goroutine and one communicator over real sockets each.

Flags:
`

// runBenchStraggler is `ringtail bench straggler`.
func runBenchStraggler(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringtail bench straggler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchStragglerUsage); fs.PrintDefaults() }
	ranks := fs.String("ranks", "4,8", "world sizes, comma-separated")
	patterns := fs.String("patterns", "", "patterns by name, comma-separated (default all; see the table)")
	policyName := fs.String("policy", straggler.NameAdaptive, "policy compared with BSP: "+strings.Join(straggler.Names(), ", "))
	steps := fs.Int("steps", 30, "measured steps per run")
	warmup := fs.Int("warmup", 3, "steps before measuring (the policy learns the speeds)")
	batch := fs.Int("batch", 256, "global batch (samples per step over all ranks)")
	perSample := fs.Duration("sample", 2*time.Millisecond, "unslowed compute per sample (a timer sleep)")
	grad := fs.String("grad", "16M", "gradient size in bytes (K, M suffixes)")
	seed := fs.Uint64("seed", 1, "seed of the random patterns")
	asJSON := fs.Bool("json", false, "print one JSON object per (pattern, ranks)")
	logLevel := fs.String("log-level", "", "driver log level (debug prints every decision; default: $RINGTAIL_LOG_LEVEL, else warn)")
	if code, ok := parseFlags(fs, "ringtail bench straggler", args, stderr); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringtail bench straggler: "+format+"\n", a...)
		return 2
	}
	cfg := driver.BenchConfig{Policy: *policyName, Steps: *steps, Warmup: *warmup, GlobalBatch: *batch, PerSample: *perSample, Seed: *seed}
	var err error
	if cfg.Ranks, err = parseRanks(*ranks, 64); err != nil {
		return usage("--ranks: %v", err)
	}
	cfg.Patterns = splitNames(*patterns)
	g, err := bench.ParseSize(*grad)
	if err != nil || g < 4 || g > 1<<30 {
		return usage("--grad: %q is not a size in 4B..1G", *grad)
	}
	cfg.GradBytes = int(g)
	if _, err := straggler.Preset(*policyName, 1, 1); err != nil {
		return usage("--policy: %v", err)
	}
	if cfg.Logger, err = logging.ForProcess(stderr, *logLevel); err != nil {
		return usage("--log-level or environment: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*asJSON {
		fmt.Fprintf(stdout, "# ringtail bench straggler: batch %d, %v/sample, gradient %s, %d+%d steps, policy %s, seed %d\n",
			cfg.GlobalBatch, cfg.PerSample, *grad, cfg.Warmup, cfg.Steps, cfg.Policy, cfg.Seed)
		fmt.Fprintf(stdout, "# seconds per global batch of applied samples\n")
		fmt.Fprintf(stdout, "%-16s %5s %9s %9s %9s %8s %8s %9s %6s\n", "pattern", "ranks", "bsp_s", "adapt_s", "ideal_s", "ad/ideal", "bsp/id", "applied", "evict")
	}
	err = driver.RunBench(ctx, cfg, func(row driver.BenchRow) error {
		if *asJSON {
			return printJSONLine(stdout, row)
		}
		_, err := fmt.Fprintf(stdout, "%-16s %5d %9.4f %9.4f %9.4f %8.3f %8.3f %9.1f %6d\n", row.Pattern, row.Ranks,
			row.BSP, row.Adaptive, row.Ideal, row.Ratio, row.BSPRatio, row.AppliedPerStep, row.EvictSteps)
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "ringtail bench straggler: %v\n", err)
		return 1
	}
	return 0
}
