package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ringtail-ml/ringtail/bench/emulate"
	"github.com/ringtail-ml/ringtail/internal/cli"
)

const benchBalanceUsage = `Usage: ringtail bench balance [--exec sleep|virtual] [--json]

Builds the heterogeneity-balancing plans of package balance and executes
them: AntDT's V100/P100 mix (even split vs ADJUST_BS vs ADJUST_BS with
accumulation) and CHRONICA's DIF 64 (random batching vs size-aware
packing; even partitions vs epoch rebalancing). With --exec sleep every
rank is a goroutine sleeping its planned compute × --time-scale; with
--exec virtual the plans' virtual time is reported. See docs/balance.md.
`

// runBenchBalance implements `ringtail bench balance`: it builds the
// balancing plans of package balance (AntDT V100/P100 mix: even split vs
// ADJUST_BS vs ADJUST_BS+accumulation; CHRONICA DIF 64: random batching vs
// size-aware packing, and even partitions vs epoch rebalancing) and
// executes them.
//
// With --exec=sleep (default) every rank is a goroutine that sleeps its
// planned compute time × --time-scale and then waits at a per-step
// barrier; the epoch time is the measured wall time divided by the scale,
// so timer and scheduling overheads are included. With --exec=virtual the
// plan's virtual time is reported (Σ over steps of the slowest rank).
func runBenchBalance(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail bench balance", benchBalanceUsage)
	fs := cmd.Flags
	jsonOut := fs.Bool("json", false, "print one JSON object per line")
	exec := fs.String("exec", "sleep", "how to execute plans: sleep (goroutines sleeping, measured) or virtual")
	scale := fs.Float64("time-scale", 0.05, "real seconds slept per planned second with --exec=sleep")
	samples := fs.Int("samples", 15360, "AntDT epoch size in samples (ImageNet is 1281167)")
	chronicaSamples := fs.Int("chronica-samples", 2048, "CHRONICA epoch size in samples")
	dist := fs.String("dist", "loguniform", "CHRONICA sample-size distribution: loguniform or uniform")
	seed := fs.Uint64("seed", 1, "seed for CHRONICA sizes, shuffle and feedback noise")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *exec != "sleep" && *exec != "virtual" {
		fmt.Fprintf(stderr, "ringtail bench balance: --exec must be sleep or virtual, not %q\n", *exec)
		return 2
	}
	if !(*scale > 0) {
		fmt.Fprintf(stderr, "ringtail bench balance: --time-scale must be positive\n")
		return 2
	}
	var sizeDist emulate.SizeDist
	switch *dist {
	case "loguniform":
		sizeDist = emulate.LogUniform
	case "uniform":
		sizeDist = emulate.Uniform
	default:
		fmt.Fprintf(stderr, "ringtail bench balance: --dist must be loguniform or uniform, not %q\n", *dist)
		return 2
	}

	plans, err := emulate.AntDT(emulate.V100P100Case(*samples))
	if err != nil {
		fmt.Fprintf(stderr, "ringtail bench balance: %v\n", err)
		return 1
	}
	// The live driver's plan on the same cluster (straggler.Policy with
	// the memory plan, as ringtail-train --sample-bytes runs it).
	live, err := emulate.AntDTDriver(emulate.V100P100Case(*samples))
	if err != nil {
		fmt.Fprintf(stderr, "ringtail bench balance: %v\n", err)
		return 1
	}
	plans = append(plans, live)
	for _, hetero := range []bool{true, false} {
		c := emulate.ChronicaDIF64Case(hetero, *seed)
		c.Samples, c.Dist = *chronicaSamples, sizeDist
		p, err := emulate.Chronica(c)
		if err != nil {
			fmt.Fprintf(stderr, "ringtail bench balance: %v\n", err)
			return 1
		}
		plans = append(plans, p...)
	}

	var results []emulate.Result
	if *exec == "virtual" {
		results = emulate.VirtualResults(plans)
	} else {
		epochS := make([]float64, len(plans))
		for i, p := range plans {
			epochS[i] = sleepPlan(context.Background(), p, *scale).Seconds() / *scale
		}
		results = emulate.Results(plans, epochS)
	}

	if *jsonOut {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				fmt.Fprintf(stderr, "ringtail bench balance: %v\n", err)
				return 1
			}
		}
		return 0
	}
	fmt.Fprintf(stdout, "# exec=%s time-scale=%g (epoch_s in planned seconds)\n", *exec, *scale)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tscheme\tepoch_s\tspeedup")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2fx\n", r.Case, r.Scheme, r.EpochS, r.Speedup)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// sleepPlan executes a plan for real: one goroutine per rank sleeps its
// step time × scale, and the step ends when every rank has reported (a
// barrier, as a synchronous all-reduce would impose). It returns the
// measured wall time.
func sleepPlan(ctx context.Context, p emulate.EpochPlan, scale float64) time.Duration {
	ranks := 0
	for _, step := range p.StepS {
		ranks = max(ranks, len(step))
	}
	work := make([]chan time.Duration, ranks)
	done := make(chan struct{}, ranks)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for r := range work {
		work[r] = make(chan time.Duration)
		go func(in <-chan time.Duration) {
			for {
				select {
				case d := <-in:
					if d > 0 {
						time.Sleep(d)
					}
					done <- struct{}{}
				case <-ctx.Done():
					return
				}
			}
		}(work[r])
	}
	start := time.Now()
	for _, step := range p.StepS {
		for r, s := range step {
			work[r] <- time.Duration(s * scale * float64(time.Second))
		}
		for range step {
			<-done
		}
	}
	return time.Since(start)
}
