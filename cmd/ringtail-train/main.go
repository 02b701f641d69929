package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/nvml"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// usage is ringtail-train's help text before its flags.
const usage = `Usage: ringtail-train [flags]

ringtail's main job: synchronous data-parallel SGD of an MLP on the UCI
handwritten digits, gradients reduced through ringtail. It reads its rank
and rendezvous from the environment ringtail run (or torchrun) sets, and
runs as a single rank without one:

  ringtail run -np 4 -- ringtail-train --inject slow=2:3x
  ringtail run -np 4 -- ringtail-train --eval-every 5 --json   # the accuracy curve: time to accuracy
`

func run(args []string, stdout, stderr io.Writer) int {
	def := train.DefaultConfig()
	cmd := cli.New("ringtail-train", usage)
	fs := cmd.Flags
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
	mode := fs.String("mode", "adaptive", "gradient reduction: bsp (AllReduce), adaptive (the straggler driver) or coded (gradient coding)")
	codedS := fs.Int("coded-s", 1, "with --mode coded: ranks a step tolerates late or stopped (each partition on s+1 ranks: (s+1)× the compute)")
	codedScheme := fs.String("coded-scheme", string(gradcode.Hetero), "with --mode coded: the gradcode scheme, hetero, group or cyclic")
	policyName := fs.String("policy", straggler.NameShares, "straggler policy of --mode adaptive: "+strings.Join(straggler.Names(), ", "))
	predictor := fs.String("predictor", "ewma", "per-sample time forecast of --mode adaptive: ewma, or rls (regression on each rank's CPU/GPU telemetry)")
	reassignUnit := fs.Int("reassign-unit", -1, "with --mode adaptive: cut each step's batch into units of N samples that move, within the step, from ranks behind to ranks ahead (FlexRR's in-step reassignment; exact), in the steps whose slowest rank the policy's predictions miss (--reassign-at); 0: off; -1 (default): with --policy shares, a sixteenth of an equal share (at least 1), else off")
	reassignHelpers := fs.Int("reassign-helpers", 4, "with --reassign-unit: the ranks each rank may give units to (its ring successors)")
	reassignAt := fs.Float64("reassign-at", 0, "with --reassign-unit: reassign while the policy's predictions miss the slowest rank's compute by this fraction (0: the default, 0.08; negative: every step)")
	probe := fs.Bool("probe", true, "measure the links between ranks at start (--mode adaptive): slow links become eviction candidates and choose parents")
	elasticDefault, elasticErr := settings.ParseBool(elastic.EnvElastic, os.Getenv(elastic.EnvElastic), false)
	elasticMode := fs.Bool("elastic", elasticDefault, "train as a rank of an elastic job (ringtail run --elastic sets $"+elastic.EnvElastic+"=1): data from the shard service, the ring re-formed when ranks come and go; BSP gradient averaging only")
	perShard := fs.Int("batches-per-shard", 10, "with --elastic: batches in each data shard")
	evalEvery := fs.Int("eval-every", 0, "rank 0 evaluates the held-out set every N steps, into --json's curve (time to accuracy); 0: after each epoch only")
	memCapSpec := fs.String("mem-cap", os.Getenv(envMemCap), "this rank's device memory for activations (e.g. 16GiB), or one size per rank comma-separated; default: the GPU's free memory from NVML ($"+envMemCap+")")
	sampleBytesSpec := fs.String("sample-bytes", os.Getenv(envSampleBytes), "activation memory of one sample (e.g. 2GiB): bounds each rank's micro-batch by its memory, a larger share computed as accumulation × micro-batch (AntDT-DD); empty: no bound ($"+envSampleBytes+")")
	maxAccum := fs.Int("max-accum", straggler.DefaultMaxAccum, "with --sample-bytes and --mode adaptive: the most micro-batches the shares policy plans a rank's share in")
	fakeGPU := fs.String("fake-gpu", os.Getenv(envFakeGPU), "emulate each rank's GPU with NVML's mock: one model per rank, comma-separated (e.g. P100,P100,V100,V100), or one for all; its memory bounds the micro-batch and its prior speed slows the rank's compute ($"+envFakeGPU+")")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	if elasticErr != nil {
		return cmd.Fail(stderr, "%v", elasticErr)
	}
	if *mode != "bsp" && *mode != "adaptive" && *mode != "coded" {
		return cmd.Fail(stderr, "--mode %q: want bsp, adaptive or coded", *mode)
	}
	if set := cmd.Given(); *mode != "coded" && (set["coded-s"] || set["coded-scheme"]) {
		return cmd.Fail(stderr, "--coded-s and --coded-scheme apply to --mode coded")
	} else if *mode != "adaptive" && (set["reassign-unit"] || set["reassign-helpers"] || set["reassign-at"]) {
		return cmd.Fail(stderr, "--reassign-unit, --reassign-helpers and --reassign-at apply to --mode adaptive")
	}
	if *reassignUnit < -1 {
		return cmd.Fail(stderr, "--reassign-unit %d: want ≥ 0 samples (0: off, -1: the default)", *reassignUnit)
	}
	if math.IsNaN(*reassignAt) || math.IsInf(*reassignAt, 0) {
		return cmd.Fail(stderr, "--reassign-at %v: want a finite fraction", *reassignAt)
	}
	reassign := straggler.DefaultReassignConfig(max(*reassignUnit, 1))
	reassign.Helpers = *reassignHelpers
	if *reassignUnit != 0 {
		if err := reassign.Validate(); err != nil {
			return cmd.Fail(stderr, "--reassign-unit %d --reassign-helpers %d: %v", *reassignUnit, *reassignHelpers, err)
		}
	}
	switch gradcode.Scheme(*codedScheme) {
	case gradcode.Hetero, gradcode.Group, gradcode.Cyclic:
	default:
		return cmd.Fail(stderr, "--coded-scheme %q: want hetero, group or cyclic", *codedScheme)
	}
	if *evalEvery < 0 {
		return cmd.Fail(stderr, "--eval-every %d: want a number of steps ≥ 0", *evalEvery)
	}
	if *predictor != "ewma" && *predictor != "rls" {
		return cmd.Fail(stderr, "--predictor %q: want ewma or rls", *predictor)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		if ctx.Err() != nil || peerStopped(err) {
			// Stopped by a signal: Ctrl-C, or the launcher stopping the
			// job after another rank failed (it says which). What failed
			// since follows from that: no line of its own. A peer's
			// canceled or closed communicator is that stop reaching
			// this rank before its own signal does.
			return 1
		}
		fmt.Fprintf(stderr, "ringtail-train: %v\n", err)
		return 1
	}
	logger, err := logging.ForProcess(stderr, *logLevel)
	if err != nil {
		return fail(fmt.Errorf("--log-level or environment: %w", err))
	}

	if *elasticMode {
		set := cmd.Given()
		switch {
		case set["mode"] && *mode != "bsp":
			return cmd.Fail(stderr, "--elastic averages gradients with a plain all-reduce (BSP); the straggler driver (--mode adaptive) is not elastic")
		case set["inject"] || set["policy"] || set["probe"] || set["eval-every"]:
			return cmd.Fail(stderr, "--inject, --policy, --probe and --eval-every do not apply to --elastic")
		case set["mem-cap"] || set["sample-bytes"] || set["max-accum"] || set["fake-gpu"]:
			return cmd.Fail(stderr, "--mem-cap, --sample-bytes, --max-accum and --fake-gpu do not apply to --elastic")
		}
		opts := elasticOptions{epochs: *epochs, batch: *batch, perShard: *perShard, lr: *lr, momentum: *momentum, hidden: *hidden,
			seed: *seed, testFrac: *testFrac, stepCompute: *stepCompute, data: *dataPath, json: *asJSON}
		return runElastic(ctx, opts, logger, stdout, stderr)
	}

	rcfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		return fail(err)
	}
	logger = logger.With().Int("rank", rcfg.Rank).Logger()
	rcfg.Logger = logger
	// A coded job goes on while up to s ranks are stopped: only calls
	// that need a dead rank fail.
	rcfg.TolerateDeaths = rcfg.TolerateDeaths || *mode == "coded"
	models, err := fakeGPUs(*fakeGPU, rcfg.WorldSize)
	if err != nil {
		return fail(err)
	}
	injectText := *injectSpec
	if injectText == "" {
		injectText = os.Getenv(inject.EnvVar)
	}
	var fake nvml.Telemetry
	if models != nil {
		// The mock's slower devices compute slower: their prior speed.
		clause, err := fakeSlowdown(models)
		if err != nil {
			return fail(err)
		}
		injectText = strings.Trim(injectText+";"+clause, ";")
		fake = fakeDevice(models[rcfg.Rank])
	}
	spec, err := inject.Lookup(injectText, os.Getenv)
	if err != nil {
		return fail(err)
	}
	capBytes, err := memCapOf(*memCapSpec, rcfg.Rank, rcfg.WorldSize)
	if err != nil {
		return fail(err)
	}
	var sampleBytes int64
	if *sampleBytesSpec != "" {
		if sampleBytes, err = settings.ParseBytes(*sampleBytesSpec); err != nil {
			return fail(fmt.Errorf("--sample-bytes: %w", err))
		}
	}
	if *maxAccum < 1 {
		return cmd.Fail(stderr, "--max-accum %d: want ≥ 1", *maxAccum)
	}
	mcap, capSource, err := microCap(capBytes, sampleBytes, func() (int64, error) {
		if fake != nil {
			return deviceFree(fake, 0)
		}
		dev, err := nvml.Open(nvml.Config{})
		if err != nil {
			return 0, err
		}
		defer dev.Close()
		return deviceFree(dev, rcfg.LocalRank)
	})
	if err != nil {
		return fail(err)
	}
	if mcap > 0 {
		logger.Info().Int("micro_cap", mcap).Str("from", capSource).Msg("micro-batch bounded by device memory")
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
		StepCompute: *stepCompute, Runner: runner, Out: stdout, Logger: logger, EvalEvery: *evalEvery,
		MicroCap: mcap,
	}
	if *asJSON {
		cfg.Out = stderr
	}
	var telemetry *nvml.Sampler
	var priors []float64
	var memory *straggler.Memory
	if *mode == "adaptive" {
		pol, err := straggler.Preset(*policyName, comm.Size(), *batch)
		if err != nil {
			return fail(err)
		}
		if *predictor == "rls" {
			pol.Predictor = straggler.PredictRLS
		}
		// Device and host telemetry feed the policy's predictor; without a
		// GPU or driver the sampler says so once and reads /proc.
		sampling, stopSampling := context.WithCancel(ctx)
		defer stopSampling()
		var dev nvml.Telemetry
		var gpu int
		dev, gpu, telemetry, err = startTelemetry(sampling, rcfg.LocalRank, fake, nvml.SamplerConfig{Interval: time.Second, Log: logger})
		if err != nil {
			return fail(err)
		}
		// The sampler's goroutine ends before the run returns (its last
		// NVML call must not race the process's exit).
		defer func() { stopSampling(); <-telemetry.Done() }()
		// Device priors (a V100 beside P100s) seed the shares and the
		// classification from step 0; measured step times take over.
		if pol.Prior, err = devicePriors(ctx, comm, deviceName(dev, gpu)); err != nil {
			return fail(err)
		}
		priors = pol.Prior
		if sampleBytes > 0 {
			// Every rank plans with every rank's cap (AntDT-DD).
			caps, err := gatherCaps(ctx, comm, mcap)
			if err != nil {
				return fail(err)
			}
			pol.Memory = &straggler.Memory{MicroCap: caps, MaxAccum: *maxAccum}
			memory = pol.Memory
		}
		if *reassignUnit == -1 {
			*reassignUnit = 0
			if *policyName == straggler.NameShares {
				// The default: the shares policy, its batch in units of a
				// sixteenth of an equal share moving within each step.
				*reassignUnit = max(1, *batch/(16*comm.Size()))
			}
		}
		if *reassignUnit > 0 {
			// The policy reassigns the steps its predictions miss
			// (straggler.Config.ReassignAt), every rank in the ring; where
			// they hold, its shares alone are cheaper, and its modes that
			// take a rank out (exclusion) are weighed as without.
			reassign.UnitSize = *reassignUnit
			cfg.Reassign = reassign
			pol.Reassign, pol.ReassignAt = true, *reassignAt
		}
		cfg.Sync = train.StragglerSync(driver.NewSync(driver.Config{Comm: comm, Policy: pol, Probe: *probe, Logger: logger,
			Telemetry: func() (cpu, gpu, clock float64) { return telemetryOf(telemetry.Latest()) }}))
	}
	if *mode == "coded" {
		// The plan allocates partitions by the ranks' predicted
		// throughputs: their devices' priors where known (--fake-gpu's
		// models included), else equal.
		name := localDeviceName(rcfg.LocalRank)
		if fake != nil {
			name = deviceName(fake, 0)
		}
		slow, err := devicePriors(ctx, comm, name)
		if err != nil {
			return fail(err)
		}
		priors = slow
		cfg.Coded = &train.Coding{Messenger: comm, Scheme: gradcode.Scheme(*codedScheme), S: *codedS, Throughputs: throughputsOf(slow)}
	}
	tr, err := train.New(cfg)
	if err != nil {
		return fail(err)
	}
	if comm.Rank() == 0 {
		fmt.Fprintf(cfg.Out, "ringtail-train: %s  inject %q  mode %s\n", tr.Describe(), spec.String(), strings.TrimSpace(*mode+" "+policyOf(*mode, *policyName, *codedScheme, *codedS, *reassignUnit)))
	}
	rep, err := tr.Run(ctx)
	if err != nil {
		return fail(err)
	}
	if comm.Rank() != 0 {
		return 0
	}
	if *asJSON {
		var tel *telemetryReport
		if telemetry != nil {
			tel = reportTelemetry(telemetry.Latest())
		}
		out, err := json.Marshal(struct {
			train.Report
			Inject    string           `json:"inject"`
			Mode      string           `json:"mode"`
			Policy    string           `json:"policy,omitempty"`
			Telemetry *telemetryReport `json:"telemetry,omitempty"`
			// DevicePriors are the slowdowns the devices' models implied
			// at step 0 (absent when no rank's model is known).
			DevicePriors []float64 `json:"device_priors,omitempty"`
			// FakeGPU are the models the NVML mock emulated, Memory the
			// policy's micro-batch caps (absent without --sample-bytes).
			FakeGPU []string          `json:"fake_gpu,omitempty"`
			Memory  *straggler.Memory `json:"memory,omitempty"`
			// BusySpread is the slowest rank's time to the reduction over
			// the fastest's, minus one (Report.Ranks).
			BusySpread float64 `json:"busy_spread"`
		}{rep, spec.String(), *mode, policyOf(*mode, *policyName, *codedScheme, *codedS, *reassignUnit), tel, priors,
			models, memory, train.BusySpread(rep.Ranks)})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, string(out))
		return 0
	}
	fmt.Fprintln(stdout, rep.Summary())
	if sampleBytes > 0 || models != nil {
		fmt.Fprintln(stdout, rankLine(rep.Ranks))
	}
	return 0
}

// policyOf names the policy of a mode in --json: the straggler policy of
// adaptive, the scheme and s of coded, none for bsp.
func policyOf(mode, policy, scheme string, s, reassignUnit int) string {
	switch {
	case mode == "adaptive" && reassignUnit > 0:
		return fmt.Sprintf("%s+reassign unit=%d", policy, reassignUnit)
	case mode == "adaptive":
		return policy
	case mode == "coded":
		return fmt.Sprintf("%s s=%d", scheme, s)
	}
	return ""
}

// throughputsOf turns device slowdowns (1 for the fastest) into the
// relative throughputs a coding plan allocates by; nil stays nil (equal).
func throughputsOf(slowdown []float64) []float64 {
	if slowdown == nil {
		return nil
	}
	thr := make([]float64, len(slowdown))
	for r, s := range slowdown {
		thr[r] = 1 / s
	}
	return thr
}

// startTelemetry opens NVML and the host's /proc and starts a rank's
// sampler on them (dev, when not nil, stands for NVML: --fake-gpu's mock;
// cfg gives the interval or ticks, the logger and
// OnReading). The ranks of a host share its GPUs round-robin, LOCAL_RANK
// modulo the device count as torchrun jobs do: two ranks on a one-GPU
// machine both read GPU 0 rather than one of them finding none. It
// returns the device source, the GPU index sampled and the sampler.
func startTelemetry(ctx context.Context, localRank int, dev nvml.Telemetry, cfg nvml.SamplerConfig) (nvml.Telemetry, int, *nvml.Sampler, error) {
	if dev == nil {
		var err error
		if dev, err = nvml.Open(nvml.Config{}); err != nil {
			return nil, 0, nil, err
		}
	}
	host, err := nvml.NewHostReader(nvml.DefaultHostConfig())
	if err != nil {
		return nil, 0, nil, err
	}
	cfg.Telemetry, cfg.Host, cfg.Device = dev, host, localRank
	if n, err := dev.DeviceCount(); err == nil && n > 0 {
		cfg.Device %= n
	}
	s, err := nvml.StartSampler(ctx, cfg)
	if err != nil {
		return nil, 0, nil, err
	}
	return dev, cfg.Device, s, nil
}

// localDeviceName is the name of the GPU a rank of LOCAL_RANK localRank
// uses (round-robin over the host's GPUs, as startTelemetry samples), or ""
// without NVML or a GPU.
func localDeviceName(localRank int) string {
	dev, err := nvml.Open(nvml.Config{})
	if err != nil {
		return ""
	}
	defer dev.Close()
	n, err := dev.DeviceCount()
	if err != nil || n == 0 {
		return ""
	}
	return deviceName(dev, localRank%n)
}

// deviceName returns the name of GPU index of t, or "" without one.
func deviceName(t nvml.Telemetry, index int) string {
	if t == nil {
		return ""
	}
	if n, err := t.DeviceCount(); err != nil || index >= n {
		return ""
	}
	d, err := t.Device(index)
	if err != nil {
		return ""
	}
	name, err := d.Name()
	if err != nil {
		return ""
	}
	return name
}

// deviceNameBytes is the room for one rank's device name in the gather.
const deviceNameBytes = 64

// devicePriors gathers every rank's device name (a collective) and
// returns the slowdowns their models imply (nvml.PriorWeights: 1 for the
// fastest, 3 for a P100 beside a V100), or nil when no rank's model is
// known (no GPU, or unknown models): then every rank starts equal.
func devicePriors(ctx context.Context, comm *ringtail.Comm, name string) ([]float64, error) {
	mine := make([]byte, deviceNameBytes)
	copy(mine, name)
	all := make([]byte, deviceNameBytes*comm.Size())
	if err := comm.AllGather(ctx, ringtail.Raw(mine, ringtail.Uint8), ringtail.Raw(all, ringtail.Uint8)); err != nil {
		return nil, fmt.Errorf("gathering device names: %w", err)
	}
	names := make([]string, comm.Size())
	for r := range names {
		names[r] = strings.TrimRight(string(all[r*deviceNameBytes:(r+1)*deviceNameBytes]), "\x00")
	}
	w, err := nvml.PriorWeights(names)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(w.Known, true) {
		return nil, nil
	}
	return w.Slowdown, nil
}

// telemetryOf turns a sampler reading into the policy's report fields:
// host CPU and GPU utilisation in [0, 1] and the SM clock (0 without a
// device).
func telemetryOf(r nvml.Reading) (cpu, gpu, clock float64) {
	if r.HostOK {
		cpu = r.Host.CPUBusy
	}
	if r.Source == nvml.SourceNVML && !r.GPUAt.IsZero() {
		gpu, clock = float64(r.GPU.GPUUtilPercent)/100, float64(r.GPU.SMClockMHz)
	}
	return cpu, gpu, clock
}

// telemetryReport is the device telemetry the job used, in --json.
type telemetryReport struct {
	Source     string  `json:"source"`
	Device     string  `json:"device,omitempty"`
	GPUUtil    float64 `json:"gpu_util,omitempty"`
	SMClockMHz float64 `json:"sm_clock_mhz,omitempty"`
	CPUBusy    float64 `json:"cpu_busy"`
	Error      string  `json:"error,omitempty"`
}

func reportTelemetry(r nvml.Reading) *telemetryReport {
	cpu, gpu, clock := telemetryOf(r)
	t := &telemetryReport{Source: r.Source.String(), GPUUtil: gpu, SMClockMHz: clock, CPUBusy: cpu, Error: r.GPUErr}
	if r.Source == nvml.SourceNVML {
		t.Device = r.GPU.Name
	}
	return t
}

// peerStopped reports whether err is another rank stopping: its call
// canceled, or its communicator closed (a rank stopped by a signal does
// one or the other, and the launcher names it).
func peerStopped(err error) bool {
	var re *ringtail.Error
	return errors.As(err, &re) && re.Reporter != re.Local && (re.Kind == ringtail.KindCanceled || re.Kind == ringtail.KindClosed)
}
