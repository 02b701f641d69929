package faults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail/integration/faults/event"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// lockedBuffer collects a process's output for other goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Job is a running `ringtail run` of the worker.
type Job struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	events chan event.Event // every event, as it arrives
	done   chan struct{}    // closed when stdout is drained and the launcher has exited

	mu   sync.Mutex
	all  []event.Event // guarded by mu
	pids map[int]int   // rank → pid, guarded by mu
	exit int
}

// StartJob starts bins.Ringtail run -np np with runArgs (flags before
// "--"; the grace is 2 s unless they say otherwise), env (--env K=V each)
// and the worker with workerArgs.
func StartJob(bins Binaries, np int, runArgs, env, workerArgs []string) (*Job, error) {
	args := []string{"run", "-np", strconv.Itoa(np), "--bind-to", "none", "--grace", "2s"}
	args = append(args, runArgs...)
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(args, "--", bins.Worker)
	args = append(args, workerArgs...)
	cmd := exec.Command(bins.Ringtail, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	j := &Job{cmd: cmd, stderr: &lockedBuffer{}, events: make(chan event.Event, 1<<16), done: make(chan struct{}), pids: map[int]int{}}
	cmd.Stderr = j.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("faults: starting ringtail run: %w", err)
	}
	go j.read(out)
	return j, nil
}

func (j *Job) read(out io.Reader) {
	defer close(j.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		e, ok, _ := event.ParseLine(sc.Text())
		if !ok {
			continue
		}
		j.mu.Lock()
		j.all = append(j.all, e)
		if e.PID > 0 {
			j.pids[e.Rank] = e.PID
		}
		j.mu.Unlock()
		select {
		case j.events <- e:
		default: // nobody is watching this closely
		}
	}
	_ = j.cmd.Wait()
	j.mu.Lock()
	j.exit = j.cmd.ProcessState.ExitCode()
	j.mu.Unlock()
	close(j.events)
}

// Events returns the events received so far.
func (j *Job) Events() []event.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]event.Event(nil), j.all...)
}

// PID returns the pid of rank r (0 until it has started).
func (j *Job) PID(r int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pids[r]
}

// LauncherPID returns ringtail run's pid.
func (j *Job) LauncherPID() int { return j.cmd.Process.Pid }

// Stderr returns ringtail run's stderr so far.
func (j *Job) Stderr() string { return j.stderr.String() }

// Wait waits until the job ends or d passes; on timeout it kills the
// launcher and every rank (SIGCONT first, for a frozen one) and reports
// killed.
func (j *Job) Wait(d time.Duration) (exit int, killed bool) {
	select {
	case <-j.done:
	case <-time.After(d):
		killed = true
		j.Kill()
		<-j.done
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if killed {
		return -1, true
	}
	return j.exit, false
}

// Kill kills the launcher's process group and every rank's (each rank
// leads its own group).
func (j *Job) Kill() {
	j.mu.Lock()
	pids := make([]int, 0, len(j.pids))
	for _, p := range j.pids {
		pids = append(pids, p)
	}
	j.mu.Unlock()
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGCONT)
		_ = syscall.Kill(-p, syscall.SIGKILL)
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
}

// RunScenario runs one scenario to the end: it starts the job, injects
// the fault when the target begins step At, and waits (killing the job
// if it outlives a deadline generous enough for any correct outcome).
func RunScenario(ctx context.Context, bins Binaries, sc Scenario) Result {
	r := Result{Scenario: sc, Start: time.Now()}
	// The ranks that ringtail run stops after the first failure carry on
	// until their own collective fails (event.Terminated); the grace lets
	// a rank that must wait out the peer timeout do so before SIGKILL.
	grace := 2*sc.PeerTimeout + 2*time.Second
	dir, err := os.MkdirTemp("", "ringtail-faults-flight-")
	if err != nil {
		r.Err = err
		return r
	}
	r.DumpDir = dir
	j, err := StartJob(bins, sc.NP, []string{"--grace", grace.String()}, append(sc.Env(), "RINGTAIL_FLIGHT_DIR="+dir), sc.WorkerArgs())
	if err != nil {
		r.Err = err
		return r
	}
	deadline := 30*time.Second + time.Duration(sc.Steps)*sc.Pace*4 + 4*sc.PeerTimeout
	var injected sync.WaitGroup
	faultAt := make(chan time.Time, 1)
	injected.Add(1)
	go func() {
		defer injected.Done()
		for e := range j.events {
			if e.Ev != event.Begin || e.Rank != sc.Target || e.Step != sc.At {
				continue
			}
			if !sc.Fault.external() {
				faultAt <- e.Time() // the worker's own clock: the same machine's
				return
			}
			pid := j.PID(sc.Target)
			if pid == 0 {
				return
			}
			switch sc.Fault {
			case FaultKill:
				_ = syscall.Kill(pid, syscall.SIGKILL)
				faultAt <- time.Now()
			case FaultFreezeShort, FaultFreezeLong:
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				faultAt <- time.Now()
				select {
				case <-time.After(sc.Freeze()):
				case <-ctx.Done():
				}
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
			return
		}
	}()
	r.Exit, r.HarnessKilled = j.Wait(deadline)
	r.End = time.Now()
	injected.Wait()
	select {
	case r.FaultAt = <-faultAt:
	default:
	}
	r.Events, r.Stderr = j.Events(), j.Stderr()
	r.Dumps, _ = flight.ReadDir(dir) // none: Check says so if the run failed
	r.DumpsRead = true
	return r
}
