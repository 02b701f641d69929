package inject

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// ExitCodeKill is the exit status of a killed rank: 128 + SIGKILL, what a
// shell reports for a process killed by the OOM killer or `kill -9`.
const ExitCodeKill = 137

// ErrKilled is returned by Runner.Pad when an Exit hook that does not end
// the process (a test's) was called for a kill.
var ErrKilled = errors.New("rank killed by injection")

// FreezeMode chooses how a Runner performs a freeze.
type FreezeMode int

const (
	// FreezeSignal stops the whole process with SIGSTOP, so every goroutine
	// (heartbeats included) stops, as a hung host would. For a freeze with a
	// duration, a detached `sh -c 'sleep D; kill -CONT pid'` is started first
	// to wake the process; for a freeze without one, the launcher or test
	// must send SIGCONT (or kill the rank). This is the default.
	FreezeSignal FreezeMode = iota
	// FreezeSleep blocks only the calling goroutine for the duration while
	// it holds whatever it holds (locks, the step); other goroutines keep
	// running. A freeze without a duration blocks until ctx is done.
	FreezeSleep
)

// RunnerConfig configures a Runner. The hooks default to the real process
// operations; tests replace them.
type RunnerConfig struct {
	// Injector is the injector to execute; nil injects nothing.
	Injector *Injector
	// Rank is this process's rank.
	Rank int
	// Logger receives one event per injected fault and per slowed step
	// (at debug level).
	Logger zerolog.Logger
	// Freeze chooses how freezes are performed.
	Freeze FreezeMode
	// Exit ends the process; default os.Exit.
	Exit func(code int)
	// Stop stops the process until SIGCONT; default SIGSTOP to itself.
	Stop func() error
	// WakeAfter arranges for SIGCONT to reach the process after d; default
	// starts a detached shell that sleeps and sends it.
	WakeAfter func(d time.Duration) error
	// Sleep waits for d or until ctx is done; default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Validate checks the configuration.
func (c RunnerConfig) Validate() error {
	if c.Rank < 0 {
		return fmt.Errorf("inject: runner rank %d must be ≥ 0", c.Rank)
	}
	if c.Injector != nil && c.Rank >= c.Injector.World() {
		return fmt.Errorf("inject: runner rank %d not in world of %d: %w", c.Rank, c.Injector.World(), ErrRankOutOfRange)
	}
	if c.Freeze != FreezeSignal && c.Freeze != FreezeSleep {
		return fmt.Errorf("inject: unknown freeze mode %d", c.Freeze)
	}
	return nil
}

// Runner executes an Injector's effects for one rank of a running job.
type Runner struct {
	cfg RunnerConfig
}

// NewRunner validates cfg, fills in the default hooks and returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Exit == nil {
		cfg.Exit = os.Exit
	}
	if cfg.Stop == nil {
		cfg.Stop = stopSelf
	}
	if cfg.WakeAfter == nil {
		cfg.WakeAfter = wakeSelfAfter
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepContext
	}
	return &Runner{cfg: cfg}, nil
}

// Pad executes step for this rank. It first performs the step's fault, if
// any (a kill does not return when Exit ends the process), then sleeps so
// that the step's compute, of which elapsed has already been spent, lasts
// Effect.Compute in total for the unslowed duration base. The train job calls
// it after its real compute with base = --step-compute. The sleep is a timer
// and uses no CPU. It returns the Effect it applied, and ctx.Err() wrapped
// when ctx ends the sleep early.
func (r *Runner) Pad(ctx context.Context, step int, base, elapsed time.Duration) (Effect, error) {
	eff := Effect{Compute: base, EndSlowdown: 1}
	if r.cfg.Injector != nil {
		eff = r.cfg.Injector.At(r.cfg.Rank, step, base)
	}
	if err := r.fault(ctx, eff.Fault); err != nil {
		return eff, err
	}
	if eff.Causes != 0 {
		r.cfg.Logger.Debug().Int("rank", r.cfg.Rank).Int("step", step).
			Dur("base", base).Dur("compute", eff.Compute).Uint8("causes", uint8(eff.Causes)).
			Msg("inject: slowed step")
	}
	if wait := eff.Compute - elapsed; wait > 0 {
		if err := r.cfg.Sleep(ctx, wait); err != nil {
			return eff, fmt.Errorf("inject: rank %d step %d padding: %w", r.cfg.Rank, step, err)
		}
	}
	return eff, nil
}

// Begin starts step for this rank when its compute is done in pieces
// (in-step reassignment): it performs the step's fault, as Pad does, and
// returns the step's effect as an affine function of unslowed compute,
// Effect.Compute(b) = delay + factor·b for a share whose unslowed compute
// is base — a fixed delay (a late loader, a pause) and a rate. The caller
// starts computing after delay and pads each piece of unslowed compute p
// to factor·p (Sleep).
func (r *Runner) Begin(ctx context.Context, step int, base time.Duration) (delay time.Duration, factor float64, err error) {
	base = max(base, time.Millisecond)
	one, two := Effect{Compute: base}, Effect{Compute: 2 * base}
	if r.cfg.Injector != nil {
		one, two = r.cfg.Injector.At(r.cfg.Rank, step, base), r.cfg.Injector.At(r.cfg.Rank, step, 2*base)
	}
	if err := r.fault(ctx, one.Fault); err != nil {
		return 0, 1, err
	}
	factor = max(float64(two.Compute-one.Compute)/float64(base), 0)
	delay = max(one.Compute-time.Duration(factor*float64(base)), 0)
	return delay, factor, nil
}

// Sleep waits for d (a timer, no CPU) or until ctx is done.
func (r *Runner) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if err := r.cfg.Sleep(ctx, d); err != nil {
		return fmt.Errorf("inject: rank %d padding: %w", r.cfg.Rank, err)
	}
	return nil
}

func (r *Runner) fault(ctx context.Context, f Fault) error {
	switch f.Kind {
	case FaultKill:
		r.cfg.Logger.Warn().Int("rank", f.Rank).Int("step", f.Step).Int("code", ExitCodeKill).
			Msg("inject: killing rank")
		r.cfg.Exit(ExitCodeKill)
		return fmt.Errorf("inject: rank %d step %d: %w", f.Rank, f.Step, ErrKilled)
	case FaultFreeze:
		r.cfg.Logger.Warn().Int("rank", f.Rank).Int("step", f.Step).Dur("freeze", f.Freeze).
			Msg("inject: freezing rank")
		if r.cfg.Freeze == FreezeSleep {
			if f.Freeze == 0 {
				<-ctx.Done()
				return fmt.Errorf("inject: rank %d frozen at step %d: %w", f.Rank, f.Step, ctx.Err())
			}
			if err := r.cfg.Sleep(ctx, f.Freeze); err != nil {
				return fmt.Errorf("inject: rank %d frozen at step %d: %w", f.Rank, f.Step, err)
			}
			return nil
		}
		if f.Freeze > 0 {
			if err := r.cfg.WakeAfter(f.Freeze); err != nil {
				return fmt.Errorf("inject: arranging wake-up of rank %d: %w", f.Rank, err)
			}
		}
		if err := r.cfg.Stop(); err != nil {
			return fmt.Errorf("inject: stopping rank %d: %w", f.Rank, err)
		}
		r.cfg.Logger.Info().Int("rank", f.Rank).Int("step", f.Step).Msg("inject: rank resumed")
	}
	return nil
}

func stopSelf() error {
	return syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}

// wakeSelfAfter starts `sh -c 'sleep S; kill -CONT PID'` in its own process
// group so that it survives a signal to ours, and reaps it in the background.
func wakeSelfAfter(d time.Duration) error {
	secs := strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
	cmd := exec.Command("/bin/sh", "-c", "sleep "+secs+"; kill -CONT "+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
