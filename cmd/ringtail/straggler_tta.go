package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/ringtail-ml/ringtail/bench/tta"
)

// runBenchTTA is `ringtail bench straggler --tta`: a row per (pattern,
// ranks, policy) with the time each run takes to synchronous SGD's
// accuracy.
func runBenchTTA(cfg tta.Config, asJSON bool, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !asJSON {
		fmt.Fprintf(stdout, "# ringtail bench straggler --tta: in this process; the digits MLP %v, batch %d, %v compute per equal share, %d epochs, evaluated every %d steps, seed %d\n",
			cfg.Hidden, cfg.Batch, cfg.StepCompute, cfg.Epochs, cfg.EvalEvery, cfg.Seed)
		fmt.Fprintf(stdout, "# target: BSP's held-out accuracy after epoch %d without a straggler; tta: training seconds to it (never: not in %d epochs); ratio: over the no-straggler time\n",
			cfg.TargetEpoch, cfg.Epochs)
		fmt.Fprintf(stdout, "%-16s %5s %-8s %8s %7s %8s %8s %7s %7s %7s %7s %8s %8s  %s\n", "pattern", "ranks", "policy",
			"target%", "none_s", "bsp_tta", "pol_tta", "bsp/no", "pol/no", "bsp_acc", "pol_acc", "bsp_step", "pol_step", "policy's modes")
	}
	err := tta.RunBench(ctx, cfg, func(r tta.Row) error {
		if asJSON {
			return printJSONLine(stdout, r)
		}
		_, err := fmt.Fprintf(stdout, "%-16s %5d %-8s %8.2f %7.2f %8s %8s %7s %7s %7.2f %7.2f %8.4f %8.4f  %s\n", r.Pattern, r.Ranks, r.Policy,
			100*r.Target, r.NoStraggler, ttaOf(r.BSP), ttaOf(r.Adaptive), ratio(r.BSPRatio), ratio(r.Ratio),
			100*r.BSP.Final, 100*r.Adaptive.Final, r.BSP.Step, r.Adaptive.Step, modesOf(r.Adaptive.Modes))
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "ringtail bench straggler: %v\n", err)
		if errors.Is(err, tta.ErrInvalidConfig) {
			return 2
		}
		return 1
	}
	return 0
}

// ttaOf prints a run's time to the target, or "never".
func ttaOf(r tta.Run) string {
	if !r.Reached {
		return "never"
	}
	return fmt.Sprintf("%.2f", r.TTA)
}

// modesOf prints step counts by mode, "ring:40,evict:6", by name.
func modesOf(m map[string]int) string {
	if len(m) == 0 {
		return "ring"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}
