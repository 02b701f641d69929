package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/bench/synthetic"
	"github.com/ringtail-ml/ringtail/bench/tta"
	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/internal/bench"
	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/internal/testbed/control"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

const benchStragglerUsage = `Usage: ringtail bench straggler [--ranks 4,8] [--patterns a,b] [--policy adaptive,star] [--grad 16M] [--json] ...

A synthetic data-parallel job — a fixed compute per sample (a timer sleep,
so it takes no CPU from the allreduce) and a real allreduce of the gradient
— under FlexRR's and AntDT's straggler patterns. For every (pattern, ranks,
policy) it prints seconds per global batch of applied samples for the BSP
ring, the policy and FlexRR's Ideal (the batch's work balanced perfectly
over the ranks' injected speeds, plus the reduction time measured in the
policy's run), the ratios to Ideal, and each run over its own no-straggler
run (vs_none). By default the ranks run in this process, one goroutine and
one communicator over real sockets each.

Started as ranks by a launcher (RANK and WORLD_SIZE set, e.g. under
ringtail run), each process runs one rank of every run and rank 0 prints
the table. On a test bed (scripts/testbed.sh; TB_CONTROL passed to the
ranks with ringtail run -x TB_CONTROL) rank 0 also sets each run's links
through the bed — every link at --link-rate, or a network pattern's —
and the network straggler patterns join the compute ones:

  slow-link-10x  rank 2's link at a tenth of --link-rate
  delay-10ms     rank 2's link with 10 ms added each way
  lossy-1%       rank 2's link dropping 1% of its packets each way
  stall-1s       rank 2's link held for 1 s in the middle of the measured steps

They are refused in one process (ranks share memory there, not links) and
off a bed. scripts/bench-straggler-bed.sh runs the lot on 4 bed hosts.

With --tta the job is a real model instead: the main job's MLP on the
digits (examples/train), trained by ranks in this process under each
compute pattern, with BSP and with each policy, the held-out accuracy
evaluated every --eval-every steps. BSP without a straggler sets the
target (its accuracy after --target-epoch epochs) and the no-straggler
time (when its curve first gets there); each row prints every run's time
to that target and its ratio to the no-straggler time, its final accuracy
and its seconds per step — time to accuracy, what a straggler system is
judged by (STAR), beside the step time. Across hosts: scripts/bench-tta.sh.

Flags:
`

// runBenchStraggler is `ringtail bench straggler`.
func runBenchStraggler(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail bench straggler", benchStragglerUsage)
	fs := cmd.Flags
	ranks := fs.String("ranks", "4,8", "world sizes, comma-separated (started by a launcher: its world)")
	patterns := fs.String("patterns", "", "patterns by name, comma-separated (default all; see the table)")
	policyNames := fs.String("policy", straggler.NameAdaptive, "policies compared with BSP, comma-separated: "+strings.Join(straggler.Names(), ", "))
	steps := fs.Int("steps", 30, "measured steps per run")
	warmup := fs.Int("warmup", 3, "steps before measuring (the policy learns the speeds)")
	batch := fs.Int("batch", 256, "global batch (samples per step over all ranks)")
	perSample := fs.Duration("sample", 2*time.Millisecond, "unslowed compute per sample (a timer sleep)")
	grad := fs.String("grad", "16M", "gradient size in bytes (K, M suffixes)")
	seed := fs.Uint64("seed", 1, "seed of the random patterns")
	linkRate := fs.String("link-rate", "1gbit", "on a test bed: every link's rate (0: unshaped); slow-link-10x is a tenth of it")
	reassignUnit := fs.Int("reassign-unit", 0, "let the policies run steps under in-step reassignment in units of N samples (every rank in the ring; BSP unchanged); 0: off")
	reassignAt := fs.Float64("reassign-at", 0, "with --reassign-unit: reassign while the predictions miss by this fraction of a step (0: the policy's default; negative: every step)")
	probe := fs.Bool("probe", false, "drivers measure the links when each run starts (default: on when the ranks are processes, off in one process)")
	asJSON := fs.Bool("json", false, "print one JSON object per (pattern, ranks, policy)")
	logLevel := fs.String("log-level", "", "driver log level (debug prints every decision; default: $RINGTAIL_LOG_LEVEL, else warn)")
	ttaMode := fs.Bool("tta", false, "train the main job's model instead and report time to synchronous SGD's accuracy (in this process)")
	epochs := fs.Int("epochs", 6, "with --tta: epochs of each run")
	targetEpoch := fs.Int("target-epoch", 4, "with --tta: BSP's held-out accuracy after this epoch, without a straggler, is the target")
	evalEvery := fs.Int("eval-every", 3, "with --tta: steps between held-out evaluations")
	hidden := fs.String("hidden", "64", "with --tta: the MLP's hidden layer widths, comma-separated")
	stepCompute := fs.Duration("step-compute", 100*time.Millisecond, "with --tta: padded compute of an equal share per step, which the patterns scale")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	set := cmd.Given()
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringtail bench straggler: "+format+"\n", a...)
		return 2
	}
	if *ttaMode {
		if _, external := externalWorld(os.LookupEnv); external {
			return usage("--tta trains its ranks in this process; across hosts run scripts/bench-tta.sh")
		}
		cfg := tta.Config{Patterns: splitNames(*patterns), Policies: splitNames(*policyNames), Epochs: *epochs, TargetEpoch: *targetEpoch,
			EvalEvery: *evalEvery, StepCompute: *stepCompute, Seed: *seed, Batch: 64}
		if set["batch"] {
			cfg.Batch = *batch
		}
		if !set["policy"] {
			cfg.Policies = []string{straggler.NameShares}
		}
		var err error
		if cfg.Ranks, err = parseRanks(*ranks, 64); err != nil {
			return usage("--ranks: %v", err)
		}
		if cfg.Hidden, err = train.ParseHidden(*hidden); err != nil {
			return usage("--hidden: %v", err)
		}
		if cfg.Logger, err = logging.ForProcess(stderr, *logLevel); err != nil {
			return usage("--log-level or environment: %v", err)
		}
		return runBenchTTA(cfg, *asJSON, stdout, stderr)
	}
	cfg := synthetic.BenchConfig{Steps: *steps, Warmup: *warmup, GlobalBatch: *batch, PerSample: *perSample, Seed: *seed}
	var err error
	if cfg.Ranks, err = parseRanks(*ranks, 64); err != nil {
		return usage("--ranks: %v", err)
	}
	cfg.Patterns = splitNames(*patterns)
	cfg.Policies = splitNames(*policyNames)
	if len(cfg.Policies) == 0 {
		return usage("--policy: no policy given")
	}
	for _, p := range cfg.Policies {
		if _, err := straggler.Preset(p, 1, 1); err != nil {
			return usage("--policy: %v", err)
		}
	}
	g, err := bench.ParseSize(*grad)
	if err != nil || g < 4 || g > 1<<30 {
		return usage("--grad: %q is not a size in 4B..1G", *grad)
	}
	cfg.GradBytes = int(g)
	if cfg.LinkRate, err = inject.ParseRate(*linkRate); err != nil || (cfg.LinkRate > 0 && cfg.LinkRate < 80000) {
		return usage("--link-rate: %q: want 0 or a rate of at least 80kbit (its tenth is a link's least)", *linkRate)
	}
	if cfg.Logger, err = logging.ForProcess(stderr, *logLevel); err != nil {
		return usage("--log-level or environment: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Started as a rank: this process is one rank of every run.
	world, external := externalWorld(os.LookupEnv)
	where := "in this process"
	rank0 := true
	cfg.Probe = *probe
	if *reassignUnit < 0 {
		return cmd.Fail(stderr, "--reassign-unit %d: want ≥ 0 samples (0: off)", *reassignUnit)
	} else if *reassignUnit > 0 {
		cfg.Reassign, cfg.ReassignAt = straggler.DefaultReassignConfig(*reassignUnit), *reassignAt
	} else if set["reassign-at"] {
		return cmd.Fail(stderr, "--reassign-at applies with --reassign-unit")
	}
	if external {
		base, err := ringtail.ConfigFromEnv()
		if err != nil {
			fmt.Fprintf(stderr, "ringtail bench straggler: %v\n", err)
			return 2
		}
		if set["ranks"] && (len(cfg.Ranks) != 1 || cfg.Ranks[0] != world) {
			return usage("--ranks %s, but the launcher started %d ranks (WORLD_SIZE)", *ranks, world)
		}
		cfg.Ranks, cfg.Rank = []int{base.WorldSize}, base.Rank
		if !set["probe"] {
			cfg.Probe = true
		}
		if cfg.Join, err = joinRuns(ctx, base); err != nil {
			fmt.Fprintf(stderr, "ringtail bench straggler: %v\n", err)
			return 1
		}
		where = "ranks from the launcher"
		if path, ok := os.LookupEnv(control.EnvSocket); ok && path != "" {
			cfg.Links = control.Client{Path: path}
			where += ", links set through the test bed at " + inject.FormatRate(cfg.LinkRate)
			if cfg.LinkRate == 0 {
				where = "ranks from the launcher, links unshaped through the test bed"
			}
		}
		rank0 = base.Rank == 0
	}
	if rank0 && !*asJSON {
		fmt.Fprintf(stdout, "# ringtail bench straggler: %s; batch %d, %v/sample, gradient %s, %d+%d steps, probe %v, seed %d\n",
			where, cfg.GlobalBatch, cfg.PerSample, *grad, cfg.Warmup, cfg.Steps, cfg.Probe, cfg.Seed)
		fmt.Fprintf(stdout, "# seconds per global batch of applied samples; vs_none: over the same policy's run without straggler\n")
		fmt.Fprintf(stdout, "# exact_s: the floor of schedules applying the whole batch fresh each step (a per-step delay charged every step; Ideal amortizes it)\n")
		fmt.Fprintf(stdout, "%-16s %5s %-8s %9s %9s %9s %8s %8s %8s %8s %9s %6s %9s %8s %6s\n", "pattern", "ranks", "policy",
			"bsp_s", "policy_s", "ideal_s", "pol/id", "bsp/id", "pol/none", "bsp/none", "applied", "evict", "exact_s", "pol/ex", "reasgn")
	}
	err = synthetic.RunBench(ctx, cfg, func(row synthetic.BenchRow) error {
		switch {
		case !rank0:
			return nil
		case *asJSON:
			return printJSONLine(stdout, row)
		}
		_, err := fmt.Fprintf(stdout, "%-16s %5d %-8s %9.4f %9.4f %9.4f %8.3f %8.3f %8s %8s %9.1f %6d %9.4f %8.3f %6d\n", row.Pattern, row.Ranks, row.Policy,
			row.BSP, row.Adaptive, row.Ideal, row.Ratio, row.BSPRatio, ratio(row.VsNone), ratio(row.BSPVsNone), row.AppliedPerStep, row.EvictSteps,
			row.Exact, row.ExactRatio, row.ReassignSteps)
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "ringtail bench straggler: %v\n", err)
		if errors.Is(err, synthetic.ErrNoLinks) {
			if external {
				fmt.Fprintf(stderr, "ringtail bench straggler: not on a test bed: %s is unset (start the job under scripts/testbed.sh and pass it to the ranks with ringtail run -x %s)\n", control.EnvSocket, control.EnvSocket)
			} else {
				fmt.Fprintln(stderr, "ringtail bench straggler: the ranks of this process share memory, not network links")
			}
		}
		return 1
	}
	return 0
}

// ratio prints a ratio, or "-" when there is none.
func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

// joinRuns returns the Join of a bench whose ranks are processes: each call
// joins the job's next generation (every rank makes the same calls in the
// same order, so they meet), with base's membership from the launcher.
// The rendezvous must outlive the runs: when the launcher does not host
// it (ringtail run does), rank 0 serves it until ctx ends, instead of each
// run's rank 0 communicator hosting it on the same port in turn.
func joinRuns(ctx context.Context, base ringtail.Config) (func(ctx context.Context) (*ringtail.Comm, error), error) {
	if !base.ExternalCoordinator {
		if base.Rank == 0 {
			if err := serveRendezvous(ctx, base); err != nil {
				return nil, err
			}
		}
		base.ExternalCoordinator = true
	}
	gen := base.Generation
	return func(ctx context.Context) (*ringtail.Comm, error) {
		c := base
		c.Generation = gen
		gen++
		return ringtail.New(ctx, c)
	}, nil
}

// serveRendezvous serves the rendezvous of base's job where its rank 0
// would (MASTER_ADDR:MASTER_PORT; every address but a loopback one) until
// ctx ends, and returns once it listens.
func serveRendezvous(ctx context.Context, base ringtail.Config) error {
	host := ""
	if ip := net.ParseIP(base.MasterAddr); ip != nil && ip.IsLoopback() {
		host = base.MasterAddr
	}
	plane := base.ControlPlane
	if plane == "" && len(base.Secret) == 0 {
		plane = "tcp"
	}
	ready := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		failed <- launch.ServeCoordinator(ctx, launch.CoordinatorConfig{
			Listen: net.JoinHostPort(host, strconv.Itoa(base.MasterPort)), ControlPlane: plane, World: base.WorldSize,
			Secret: base.Secret, JobID: base.JobID, Logger: zerolog.Nop(), Ready: func(net.Addr, string) { close(ready) }})
	}()
	select {
	case <-ready:
		return nil
	case err := <-failed:
		return fmt.Errorf("rank 0 hosting the rendezvous of every run: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}
