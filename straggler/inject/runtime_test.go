package inject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/citest"
)

// fakeProcess records what a Runner asks of the process.
type fakeProcess struct {
	exits  []int
	stops  int
	wakes  []time.Duration
	sleeps []time.Duration
}

func (f *fakeProcess) config(in *Injector, rank int) RunnerConfig {
	return RunnerConfig{
		Injector:  in,
		Rank:      rank,
		Logger:    zerolog.Nop(),
		Exit:      func(code int) { f.exits = append(f.exits, code) },
		Stop:      func() error { f.stops++; return nil },
		WakeAfter: func(d time.Duration) error { f.wakes = append(f.wakes, d); return nil },
		Sleep: func(ctx context.Context, d time.Duration) error {
			f.sleeps = append(f.sleeps, d)
			return ctx.Err()
		},
	}
}

func TestRunnerPadsTheStepToTheInjectedCompute(t *testing.T) {
	var p fakeProcess
	r, err := NewRunner(p.config(mustInjector(t, "slow=1:3x", 2), 1))
	if err != nil {
		t.Fatal(err)
	}
	eff, err := r.Pad(context.Background(), 0, base, 40*time.Millisecond)
	if err != nil || eff.Compute != 3*base {
		t.Fatalf("Pad = %+v, %v; want compute %v", eff, err, 3*base)
	}
	if want := []time.Duration{3*base - 40*time.Millisecond}; fmt.Sprint(p.sleeps) != fmt.Sprint(want) {
		t.Fatalf("slept %v, want %v (compute minus the real compute already spent)", p.sleeps, want)
	}
	if _, err := r.Pad(context.Background(), 1, base, 5*base); err != nil || len(p.sleeps) != 1 {
		t.Fatalf("a step already longer than its injected compute slept %v (err %v), want no sleep", p.sleeps[1:], err)
	}
}

// Begin splits a step's effect into a fixed delay and a rate, so that a
// step computed in pieces (in-step reassignment) takes what Pad would
// give the whole share: a slow rank's rate, a persistent rank's delay,
// both for both, and a kill at its step.
func TestRunnerBeginSplitsTheStepIntoDelayAndRate(t *testing.T) {
	in := mustInjector(t, "slow=1:3x;persistent=2:+100ms;slow=3:2x;persistent=3:+50ms;kill=0@1", 4)
	for _, c := range []struct {
		rank   int
		delay  time.Duration
		factor float64
	}{{0, 0, 1}, {1, 0, 3}, {2, 100 * time.Millisecond, 1}, {3, 50 * time.Millisecond, 2}} {
		var p fakeProcess
		r, err := NewRunner(p.config(in, c.rank))
		if err != nil {
			t.Fatal(err)
		}
		delay, factor, err := r.Begin(context.Background(), 0, base)
		if err != nil || delay != c.delay || factor != c.factor {
			t.Errorf("rank %d: Begin = %v, %v, %v; want %v, %v", c.rank, delay, factor, err, c.delay, c.factor)
		}
		if eff := in.At(c.rank, 0, base); delay+time.Duration(factor*float64(base)) != eff.Compute {
			t.Errorf("rank %d: delay + factor·base = %v, Pad's compute %v", c.rank, delay+time.Duration(factor*float64(base)), eff.Compute)
		}
	}
	var p fakeProcess
	r, err := NewRunner(p.config(in, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Begin(context.Background(), 1, base); !errors.Is(err, ErrKilled) || fmt.Sprint(p.exits) != "[137]" {
		t.Fatalf("step 1: err %v, exits %v; want the kill", err, p.exits)
	}
}

func TestRunnerKillsAndFreezesAtTheirStep(t *testing.T) {
	var p fakeProcess
	in := mustInjector(t, "kill=0@2;freeze=0@1:300ms", 1)
	r, err := NewRunner(p.config(in, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pad(context.Background(), 0, base, 0); err != nil || p.stops != 0 || len(p.exits) != 0 {
		t.Fatalf("step 0: err %v, stops %d, exits %v; want nothing", err, p.stops, p.exits)
	}
	if _, err := r.Pad(context.Background(), 1, base, 0); err != nil || p.stops != 1 || fmt.Sprint(p.wakes) != "[300ms]" {
		t.Fatalf("step 1: err %v, stops %d, wakes %v; want one stop woken after 300ms", err, p.stops, p.wakes)
	}
	if _, err := r.Pad(context.Background(), 2, base, 0); !errors.Is(err, ErrKilled) || fmt.Sprint(p.exits) != "[137]" {
		t.Fatalf("step 2: err %v, exits %v; want ErrKilled and exit code 137", err, p.exits)
	}
}

func TestRunnerFreezeBySleepHoldsOnlyTheCaller(t *testing.T) {
	var p fakeProcess
	cfg := p.config(mustInjector(t, "freeze=0@0:2s", 1), 0)
	cfg.Freeze = FreezeSleep
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pad(context.Background(), 0, base, base); err != nil || p.stops != 0 || fmt.Sprint(p.sleeps) != "[2s]" {
		t.Fatalf("err %v, stops %d, sleeps %v; want a 2s sleep and no SIGSTOP", err, p.stops, p.sleeps)
	}
}

func TestRunnerPaddingStopsWithTheContextAndUsesNoCPU(t *testing.T) {
	r, err := NewRunner(RunnerConfig{Injector: mustInjector(t, "slow=0:2x", 1), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, w0 := cpu(), time.Now()
	if _, err := r.Pad(context.Background(), 0, 150*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	// The wall bound cannot fail from load. The CPU bound is loose on
	// purpose (the race detector, the GC and other goroutines count too):
	// padding that spun would burn about its whole wall time.
	wall, used := time.Since(w0), cpu()-c0
	if wall < 300*time.Millisecond || used > wall/2 {
		t.Fatalf("padding to 300ms took %v wall and %v CPU; want ≥ 300ms wall and under half of it in CPU", wall, used)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.Pad(ctx, 1, time.Hour, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pad with an expiring context = %v, want context.DeadlineExceeded", err)
	}
	if _, err := NewRunner(RunnerConfig{Injector: mustInjector(t, "", 2), Rank: 2}); !errors.Is(err, ErrRankOutOfRange) {
		t.Fatalf("NewRunner for rank 2 of 2 = %v, want ErrRankOutOfRange", err)
	}
}

// helperEnv names the spec a re-executed test binary runs as rank 0.
const helperEnv = "RINGTAIL_INJECT_TEST_HELPER"

// TestRunnerHelperProcess is not a test: it is the body of the child
// processes started by the process-level tests below.
func TestRunnerHelperProcess(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	s, err := Parse(spec)
	if err != nil {
		os.Exit(2)
	}
	in, err := New(s, 1)
	if err != nil {
		os.Exit(2)
	}
	r, err := NewRunner(RunnerConfig{Injector: in, Logger: zerolog.Nop()})
	if err != nil {
		os.Exit(2)
	}
	for step := 0; step < 4; step++ {
		if _, err := r.Pad(context.Background(), step, time.Millisecond, 0); err != nil {
			os.Exit(3)
		}
		fmt.Printf("step %d done\n", step)
	}
	os.Exit(0)
}

func startHelper(t *testing.T, spec string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunnerHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// waitStopped polls /proc until pid is in the stopped state.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("reading state of %d: %v", pid, err)
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'T' {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("process %d never stopped", pid)
}

func TestKilledRankExitsWith137AtItsStep(t *testing.T) {
	cmd, out := startHelper(t, "kill=0@2")
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCodeKill {
		t.Fatalf("child exited with %v, want exit code %d", err, ExitCodeKill)
	}
	if got := out.String(); got != "step 0 done\nstep 1 done\n" {
		t.Fatalf("child output %q, want steps 0 and 1 only", got)
	}
}

func TestFrozenRankStopsAndWakesItselfAfterTheDuration(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		citest.Missing(t, "no /bin/sh to wake the process")
	}
	cmd, out := startHelper(t, "freeze=0@1:300ms")
	waitStopped(t, cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child after its freeze: %v", err)
	}
	if got := strings.Count(out.String(), "done"); got != 4 {
		t.Fatalf("child completed %d steps, want all 4 after waking", got)
	}
}

func TestFrozenRankWithoutDurationWaitsForTheLauncher(t *testing.T) {
	cmd, out := startHelper(t, "freeze=0@2")
	waitStopped(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child after SIGCONT: %v", err)
	}
	if got := strings.Count(out.String(), "done"); got != 4 {
		t.Fatalf("child completed %d steps, want all 4 after SIGCONT", got)
	}
}
