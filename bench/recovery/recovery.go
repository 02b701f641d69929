package recovery

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/internal/loopback"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// Environment of a re-executed bench rank (RankMain, RankOptions.Env).
const (
	EnvRole       = "RINGTAIL_ELASTIC_ROLE"        // "bench-rank": run RankMain's rank
	envBenchElems = "RINGTAIL_ELASTIC_BENCH_ELEMS" // float32s all-reduced per step
	envBenchPace  = "RINGTAIL_ELASTIC_BENCH_PACE"  // simulated compute per step
	envBenchSteps = "RINGTAIL_ELASTIC_BENCH_STEPS" // stop (exit 0) at this step; 0: never
	envBenchLog   = "RINGTAIL_ELASTIC_BENCH_LOG"   // "1": log to stderr
	roleBenchRank = "bench-rank"
)

// RankEvent is one line a bench rank prints on stdout (JSON).
type RankEvent struct {
	Event string `json:"ev"` // "step" (committed), "fail" (a step failed), "exit"
	ID    string `json:"id"`
	Node  string `json:"node,omitempty"`
	Gen   uint64 `json:"gen"`
	Rank  int    `json:"rank"`
	Size  int    `json:"size"`
	Step  uint64 `json:"step"`
	// UnixNano is when the event happened, by the rank's wall clock.
	UnixNano int64  `json:"t"`
	Err      string `json:"err,omitempty"`
}

// RankOptions shape a bench rank: Elems float32s all-reduced per step,
// Pace of simulated compute, the step to stop at (0: never), and Log its
// membership and communicator log to stderr.
type RankOptions struct {
	Elems int
	Pace  time.Duration
	Steps uint64
	Log   bool
}

// Env returns the environment entries that make a process calling
// RankMain a bench rank with these options (RankOptionsFromEnv reads
// them back); the job's own (elastic.ConfigFromEnv's) come on top.
func (o RankOptions) Env() []string {
	env := []string{EnvRole + "=" + roleBenchRank,
		envBenchElems + "=" + strconv.Itoa(o.Elems), envBenchPace + "=" + o.Pace.String()}
	if o.Steps > 0 {
		env = append(env, envBenchSteps+"="+strconv.FormatUint(o.Steps, 10))
	}
	if o.Log {
		env = append(env, envBenchLog+"=1")
	}
	return env
}

// RankMain runs this process as an elastic bench rank when the
// environment says so (RINGTAIL_ELASTIC_ROLE=bench-rank) and returns its
// exit status with ok set; otherwise it returns ok false at once. Programs
// that run Run (which re-executes os.Executable()) call it first
// thing in main or init.
func RankMain() (code int, ok bool) {
	if os.Getenv(EnvRole) != roleBenchRank {
		return 0, false
	}
	opts, err := RankOptionsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2, true
	}
	return RunRank(opts, os.Stdout), true
}

// RankOptionsFromEnv reads the bench rank's options.
func RankOptionsFromEnv() (RankOptions, error) {
	o := RankOptions{Elems: 1 << 18, Pace: 10 * time.Millisecond}
	var errs []error
	if v := os.Getenv(envBenchElems); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q", envBenchElems, v))
		}
		o.Elems = n
	}
	if v := os.Getenv(envBenchPace); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q", envBenchPace, v))
		}
		o.Pace = d
	}
	if v := os.Getenv(envBenchSteps); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q", envBenchSteps, v))
		}
		o.Steps = n
	}
	log, err := settings.ParseBool(envBenchLog, os.Getenv(envBenchLog), false)
	if err != nil {
		errs = append(errs, err)
	}
	o.Log = log
	return o, errors.Join(errs...)
}

// RunRank joins the job described by the environment (elastic.ConfigFromEnv) and
// trains a model of opts.Elems float32s: each step re-broadcasts the model
// from rank 0 when the generation is fresh, waits opts.Pace, all-reduces a
// gradient and applies it. It prints a RankEvent per committed step and
// failure on out and returns elastic.ExitCode of Worker.Run's result.
func RunRank(opts RankOptions, out io.Writer) int {
	cfg, err := elastic.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if opts.Log {
		cfg.Logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).With().Timestamp().Str("id", cfg.ID).Logger()
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e RankEvent) {
		e.ID, e.UnixNano = cfg.ID, time.Now().UnixNano()
		mu.Lock()
		_ = enc.Encode(e)
		mu.Unlock()
	}
	w, err := elastic.Join(ctx, cfg)
	if err != nil {
		emit(RankEvent{Event: "exit", Err: err.Error()})
		return elastic.ExitCode(err)
	}
	defer w.Close()
	model := make([]float32, opts.Elems)
	grad := make([]float32, opts.Elems)
	err = w.Run(ctx, func(ctx context.Context, comm *ringtail.Comm, g elastic.Generation) error {
		fail := func(err error) error {
			emit(RankEvent{Event: "fail", Node: w.Name(), Gen: g.Number, Rank: g.Rank, Size: g.Size, Step: g.Step, Err: err.Error()})
			return err
		}
		// Fresh first, even on the last step: a step that failed part-way
		// may have committed on some ranks only (elastic.Generation.Fresh).
		if g.Fresh {
			if err := comm.Broadcast(ctx, ringtail.Float32s(model), 0); err != nil {
				return fail(err)
			}
		}
		if opts.Steps > 0 && g.Step >= opts.Steps {
			return elastic.ErrStop
		}
		if err := ringtail.Sleep(ctx, opts.Pace); err != nil {
			return fail(err)
		}
		for i := range grad {
			grad[i] = float32(g.Rank+1) * 1e-6
		}
		if err := comm.AllReduce(ctx, ringtail.Float32s(grad), ringtail.Avg); err != nil {
			return fail(err)
		}
		for i := range model {
			model[i] -= grad[i]
		}
		emit(RankEvent{Event: "step", Node: w.Name(), Gen: g.Number, Rank: g.Rank, Size: g.Size, Step: g.Step})
		return nil
	})
	e := RankEvent{Event: "exit"}
	if err != nil {
		e.Err = err.Error()
	}
	emit(e)
	return elastic.ExitCode(err)
}

// Config configures Run.
type Config struct {
	// Ranks is the job size before the kill (≥ 2).
	Ranks int
	// Victim is the rank killed with SIGKILL (default 0: the proposer, the
	// slowest case — the next rank must notice and take over).
	Victim int
	// Elems is the all-reduce size in float32s (default 256 Ki = 1 MiB);
	// Pace the simulated compute per step (default 10 ms).
	Elems int
	Pace  time.Duration
	// Warmup is the committed steps every rank reaches before the kill
	// (default 20).
	Warmup uint64
	// Command starts a rank (default: os.Executable(), which must call
	// RankMain first thing); Env is added to its environment.
	Command []string
	Env     []string
	// Stderr receives the ranks' stderr (nil: discarded).
	Stderr io.Writer
	// Timeout bounds the whole measurement (default 60 s).
	Timeout time.Duration
}

// Result is one measurement.
type Result struct {
	// Recovery is from the kill to the moment every survivor has committed
	// a step in the re-formed generation.
	Recovery time.Duration `json:"recovery"`
	// Detect is from the kill to the first survivor's failed step (zero
	// when no step failed: the kill fell between collectives).
	Detect time.Duration `json:"detect"`
	// FirstStep is from the kill to the first survivor's committed step in
	// the new generation.
	FirstStep time.Duration `json:"first_step"`
	// GenBefore and GenAfter are the generations before and after.
	GenBefore uint64 `json:"gen_before"`
	GenAfter  uint64 `json:"gen_after"`
	Ranks     int    `json:"ranks"`
	Victim    int    `json:"victim"`
}

type rankLine struct {
	proc int
	ev   RankEvent
}

// Run runs one recovery measurement.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Ranks: cfg.Ranks, Victim: cfg.Victim}
	if cfg.Ranks < 2 || cfg.Victim < 0 || cfg.Victim >= cfg.Ranks {
		return res, fmt.Errorf("recovery: the bench needs ≥ 2 ranks and a victim among them (ranks %d, victim %d)", cfg.Ranks, cfg.Victim)
	}
	if cfg.Elems == 0 {
		cfg.Elems = 1 << 18
	}
	if cfg.Pace == 0 {
		cfg.Pace = 10 * time.Millisecond
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = 20
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if len(cfg.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return res, err
		}
		cfg.Command = []string{exe}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ports, err := loopback.FreePorts(cfg.Ranks)
	if err != nil {
		return res, err
	}
	var seeds []string
	for _, p := range ports {
		seeds = append(seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	lines := make(chan rankLine, 1024)
	procs := make([]*exec.Cmd, cfg.Ranks)
	var readers sync.WaitGroup
	defer func() {
		cancel() // unblocks readers
		for _, p := range procs {
			if p != nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
		readers.Wait()
	}()
	for i := range cfg.Ranks {
		cmd := exec.CommandContext(ctx, cfg.Command[0], cfg.Command[1:]...)
		cmd.Env = append(os.Environ(), cfg.Env...)
		cmd.Env = append(cmd.Env,
			elastic.EnvID+"="+fmt.Sprintf("rank-%05d", i), elastic.EnvBind+"="+seeds[i],
			elastic.EnvSeeds+"="+strings.Join(seeds, ","), elastic.EnvNP+"="+strconv.Itoa(cfg.Ranks), elastic.EnvMinNP+"=1",
			ringtail.EnvSecret+"="+hex.EncodeToString(secret), ringtail.EnvJobID+"=recovery-bench")
		cmd.Env = append(cmd.Env, RankOptions{Elems: cfg.Elems, Pace: cfg.Pace}.Env()...)
		cmd.Stderr = cfg.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, fmt.Errorf("recovery: starting rank %d: %w", i, err)
		}
		procs[i] = cmd
		readers.Add(1)
		go func(i int) {
			defer readers.Done()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var ev RankEvent
				if json.Unmarshal(sc.Bytes(), &ev) == nil {
					select {
					case lines <- rankLine{proc: i, ev: ev}:
					case <-ctx.Done():
						return
					}
				}
			}
		}(i)
	}
	// Warm up: every rank past Warmup steps in one generation.
	rankOf := make([]int, cfg.Ranks)
	warm := map[int]bool{}
	for len(warm) < cfg.Ranks {
		l, err := next(ctx, lines, "warm-up")
		if err != nil {
			return res, err
		}
		if l.ev.Event == "exit" {
			return res, fmt.Errorf("recovery: rank process %d exited during warm-up: %s", l.proc, l.ev.Err)
		}
		if l.ev.Event == "step" && l.ev.Step >= cfg.Warmup && l.ev.Size == cfg.Ranks {
			warm[l.proc] = true
			rankOf[l.proc] = l.ev.Rank
			res.GenBefore = l.ev.Gen
		}
	}
	victim := slices.Index(rankOf, cfg.Victim)
	killed := time.Now()
	if err := procs[victim].Process.Signal(syscall.SIGKILL); err != nil {
		return res, err
	}
	recovered := map[int]bool{}
	for len(recovered) < cfg.Ranks-1 {
		l, err := next(ctx, lines, "recovery")
		if err != nil {
			return res, err
		}
		if l.proc == victim {
			continue
		}
		at := time.Unix(0, l.ev.UnixNano).Sub(killed)
		switch l.ev.Event {
		case "fail":
			if l.ev.Gen == res.GenBefore && (res.Detect == 0 || at < res.Detect) && at > 0 {
				res.Detect = at
			}
		case "step":
			if l.ev.Gen > res.GenBefore && !recovered[l.proc] {
				recovered[l.proc] = true
				res.GenAfter = max(res.GenAfter, l.ev.Gen)
				if res.FirstStep == 0 {
					res.FirstStep = at
				}
				res.Recovery = max(res.Recovery, at)
			}
		case "exit":
			return res, fmt.Errorf("recovery: surviving rank process %d exited: %s", l.proc, l.ev.Err)
		}
	}
	return res, nil
}

func next(ctx context.Context, lines <-chan rankLine, phase string) (rankLine, error) {
	select {
	case l := <-lines:
		return l, nil
	case <-ctx.Done():
		return rankLine{}, fmt.Errorf("recovery: %s: %w", phase, ctx.Err())
	}
}
