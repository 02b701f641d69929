// Command ringtail-train is ringtail's main job: synchronous data-parallel
// SGD of a small MLP on the UCI optical digits (shipped in data/ and
// embedded in the binary), gradients averaged with AllReduce. It reads its
// rank and rendezvous from the environment that `ringtail run` or torchrun
// sets, and runs as a single rank with no environment at all:
//
//	ringtail run -np 4 -- ringtail-train --inject slow=2:3x
//
// Each step's compute is padded to --step-compute (default 100ms) with a
// timer sleep, standing for GPU work; --inject (default $RINGTAIL_INJECT)
// scales it per rank and step and performs kill/freeze faults.
// --mode adaptive (default bsp) reduces gradients through the straggler
// driver (straggler/driver, policy "shares"): batch shares proportional to
// each rank's measured speed, and STAR eviction of ranks still late. Rank 0
// prints one line per epoch and a summary, or the report as JSON with
// --json. It only wires flags to examples/train; behaviour lives there.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	def := train.DefaultConfig()
	fs := flag.NewFlagSet("ringtail-train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	epochs := fs.Int("epochs", def.Epochs, "passes over the training set")
	batch := fs.Int("batch", def.Batch, "global batch size (split across ranks)")
	lr := fs.Float64("lr", def.LR, "learning rate")
	momentum := fs.Float64("momentum", def.Momentum, "SGD momentum in [0, 1)")
	hidden := fs.String("hidden", "64", "hidden layer widths, comma-separated; 0 for softmax regression")
	seed := fs.Uint64("seed", def.Seed, "seed of the split, the initial weights and the shuffles")
	testFrac := fs.Float64("test-frac", 0.2, "held-out fraction of the data set")
	stepCompute := fs.Duration("step-compute", def.StepCompute, "pad each step's compute to this (a timer sleep standing for GPU work); 0 to disable")
	injectSpec := fs.String("inject", "", "straggler/fault injection spec, e.g. slow=2:3x (default $"+inject.EnvVar+")")
	dataPath := fs.String("data", "", "digits CSV (gzip or plain); default: the copy embedded from data/digits.csv.gz")
	asJSON := fs.Bool("json", false, "print rank 0's final report as JSON on stdout (epoch lines go to stderr)")
	logLevel := fs.String("log-level", "", "log level: trace, debug, info, warn, error (default: $RINGTAIL_LOG_LEVEL, else warn)")
	mode := fs.String("mode", "adaptive", "gradient reduction: bsp (AllReduce) or adaptive (straggler driver: shares ∝ speed, STAR eviction)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ringtail-train: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *mode != "bsp" && *mode != "adaptive" {
		fmt.Fprintf(stderr, "ringtail-train: --mode %q: want bsp or adaptive\n", *mode)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "ringtail-train: %v\n", err)
		return 1
	}
	logger, err := logging.ForProcess(stderr, *logLevel)
	if err != nil {
		return fail(fmt.Errorf("--log-level or environment: %w", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rcfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		return fail(err)
	}
	logger = logger.With().Int("rank", rcfg.Rank).Logger()
	rcfg.Logger = logger
	spec, err := inject.Lookup(*injectSpec, os.Getenv)
	if err != nil {
		return fail(err)
	}
	injector, err := inject.New(spec, rcfg.WorldSize)
	if err != nil {
		return fail(err)
	}
	runner, err := inject.NewRunner(inject.RunnerConfig{Injector: injector, Rank: rcfg.Rank, Logger: logger})
	if err != nil {
		return fail(err)
	}
	layers, err := train.ParseHidden(*hidden)
	if err != nil {
		return fail(fmt.Errorf("--hidden: %w", err))
	}
	all, err := train.LoadDigits(*dataPath)
	if err != nil {
		return fail(err)
	}
	trainSet, testSet, err := all.Split(*testFrac, *seed)
	if err != nil {
		return fail(err)
	}

	comm, err := ringtail.New(ctx, rcfg)
	if err != nil {
		return fail(err)
	}
	defer comm.Close()

	cfg := train.Config{
		Comm: comm, Train: trainSet, Test: testSet, Hidden: layers,
		Epochs: *epochs, Batch: *batch, LR: *lr, Momentum: *momentum, Seed: *seed,
		StepCompute: *stepCompute, Runner: runner, Out: stdout, Logger: logger,
	}
	if *asJSON {
		cfg.Out = stderr
	}
	if *mode == "adaptive" {
		pol, err := policy.Preset(policy.NameShares, comm.Size(), *batch)
		if err != nil {
			return fail(err)
		}
		if comm.Size() > 1 {
			// Measure the links once, so evicted ranks get the parents they
			// reach fastest (all ranks obtain the same estimates).
			links, err := comm.Probe(ctx, ringtail.ProbeConfig{})
			if err != nil {
				return fail(err)
			}
			pol.Bandwidth = links.Bandwidth
		}
		sync := driver.NewSync(comm, pol, logger)
		defer sync.Close()
		cfg.Sync = sync
	}
	tr, err := train.New(cfg)
	if err != nil {
		return fail(err)
	}
	if comm.Rank() == 0 {
		fmt.Fprintf(cfg.Out, "ringtail-train: %s  inject %q  mode %s\n", tr.Describe(), spec.String(), *mode)
	}
	rep, err := tr.Run(ctx)
	if err != nil {
		return fail(err)
	}
	if comm.Rank() != 0 {
		return 0
	}
	if *asJSON {
		out, err := json.Marshal(struct {
			train.Report
			Inject string `json:"inject"`
		}{rep, spec.String()})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, string(out))
		return 0
	}
	fmt.Fprintln(stdout, rep.Summary())
	return 0
}
