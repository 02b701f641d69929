package elastic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// SupervisorConfig configures a Supervisor.
type SupervisorConfig struct {
	// Slots is how many processes to keep running.
	Slots int
	// Command returns the process for a slot's incarnation (0 first, then
	// 1, 2, … for each replacement), with its environment and output set;
	// the Supervisor starts and waits for it.
	Command func(slot, incarnation int) (*exec.Cmd, error)
	// RestartFailed also restarts processes that crash (exit non-zero or
	// die by a signal); processes that ask for it (ExitEvicted) are always
	// restarted, clean exits and ExitJobLost never.
	RestartFailed bool
	// MaxRestarts bounds restarts over the whole job (0: 100).
	MaxRestarts int
	// RestartDelay is the pause before a replacement starts.
	RestartDelay time.Duration
	// StopGrace is how long processes have between SIGTERM and SIGKILL
	// when the supervisor stops them (0: 5 s).
	StopGrace time.Duration
	// DrainTimeout: once a process exits cleanly (the job finished) the
	// others have this long to exit before they are stopped (0: 30 s).
	DrainTimeout time.Duration
	// OnEvent, if set, is called from the supervisor's goroutine at every
	// start and exit; it must not block.
	OnEvent func(SupervisorEvent)
	// Logger receives starts, exits and restarts.
	Logger zerolog.Logger
}

// SupervisorEvent is a process start or exit.
type SupervisorEvent struct {
	Slot, Incarnation, PID int
	// Started is true for a start, false for an exit.
	Started bool
	// ExitCode is the exit status (−1 when killed by a signal).
	ExitCode int
	// Restart says the slot will be restarted.
	Restart bool
}

// Supervisor keeps a job's process slots running: a process that exits
// with ExitEvicted (and, with RestartFailed, one that crashed) is replaced
// by a new incarnation, which joins the job at its next generation
// (AntDT's KILL_RESTART). elastic/job runs one per host of an elastic
// job.
type Supervisor struct {
	cfg SupervisorConfig
}

// NewSupervisor validates cfg.
func NewSupervisor(cfg SupervisorConfig) (*Supervisor, error) {
	if cfg.Slots < 1 || cfg.Command == nil {
		return nil, errors.New("elastic: supervisor needs at least one slot and a command")
	}
	if cfg.MaxRestarts < 0 || cfg.RestartDelay < 0 || cfg.StopGrace < 0 || cfg.DrainTimeout < 0 {
		return nil, errors.New("elastic: supervisor: negative limit")
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = 100
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 5 * time.Second
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	return &Supervisor{cfg: cfg}, nil
}

// shouldRestart is the restart policy: processes that ask (ExitEvicted)
// come back, clean exits, ExitJobLost and a finished job end the slot,
// crashes come back if asked.
func shouldRestart(code int, finished bool, restarts, maxRestarts int, restartFailed bool) bool {
	switch {
	case finished || restarts >= maxRestarts || code == 0 || code == ExitJobLost:
		return false
	case code == ExitEvicted:
		return true
	default:
		return restartFailed
	}
}

type procExit struct {
	slot, inc, code int
	err             error
}

// Run starts every slot and supervises them until all have exited for
// good. It returns nil when the job finished (a process exited 0 and the
// rest exited or were stopped after DrainTimeout), ctx's error when ctx
// ended (every process is stopped first), or an error naming a slot that
// failed without restart. One goroutine owns the slot state; waiters and
// timers send it messages.
func (s *Supervisor) Run(ctx context.Context) error {
	log := s.cfg.Logger
	exits := make(chan procExit)
	due := make(chan int)
	running := map[int]*exec.Cmd{}
	inc := make([]int, s.cfg.Slots)
	pending := 0 // restarts scheduled but not started
	restarts := 0
	finished := false
	var failure error
	var drain <-chan time.Time
	var kill <-chan time.Time
	stopping := false

	emit := func(e SupervisorEvent) {
		if s.cfg.OnEvent != nil {
			s.cfg.OnEvent(e)
		}
	}
	start := func(slot int) error {
		cmd, err := s.cfg.Command(slot, inc[slot])
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			return fmt.Errorf("elastic: starting slot %d: %w", slot, err)
		}
		running[slot] = cmd
		emit(SupervisorEvent{Slot: slot, Incarnation: inc[slot], PID: cmd.Process.Pid, Started: true})
		log.Info().Int("slot", slot).Int("incarnation", inc[slot]).Int("pid", cmd.Process.Pid).Msg("elastic: started")
		go func(slot, inc int) {
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			exits <- procExit{slot: slot, inc: inc, code: code, err: err}
		}(slot, inc[slot])
		return nil
	}
	stopAll := func() {
		if stopping {
			return
		}
		stopping = true
		for _, cmd := range running {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		kill = time.After(s.cfg.StopGrace)
	}
	for slot := range s.cfg.Slots {
		if err := start(slot); err != nil {
			failure = err
			stopAll()
			break
		}
	}
	ctxDone := ctx.Done()
	for len(running) > 0 || (pending > 0 && !stopping) {
		select {
		case e := <-exits:
			cmd := running[e.slot]
			delete(running, e.slot)
			if e.code == 0 {
				finished = true
				if drain == nil && !stopping {
					drain = time.After(s.cfg.DrainTimeout)
				}
			}
			restart := !stopping && shouldRestart(e.code, finished, restarts, s.cfg.MaxRestarts, s.cfg.RestartFailed)
			emit(SupervisorEvent{Slot: e.slot, Incarnation: e.inc, PID: cmd.Process.Pid, ExitCode: e.code, Restart: restart})
			log.Info().Int("slot", e.slot).Int("incarnation", e.inc).Int("code", e.code).Bool("restart", restart).Msg("elastic: exited")
			switch {
			case restart:
				restarts++
				pending++
				inc[e.slot]++
				go func(slot int) {
					t := time.NewTimer(s.cfg.RestartDelay)
					defer t.Stop()
					select {
					case <-t.C:
					case <-ctx.Done():
					}
					due <- slot
				}(e.slot)
			case e.code != 0 && !finished && !stopping && failure == nil:
				failure = fmt.Errorf("elastic: slot %d (incarnation %d) exited with status %d: %v", e.slot, e.inc, e.code, e.err)
			}
		case slot := <-due:
			pending--
			if stopping || finished {
				continue
			}
			if err := start(slot); err != nil && failure == nil {
				failure = err
			}
		case <-drain:
			stopAll()
		case <-kill:
			for _, cmd := range running {
				_ = cmd.Process.Signal(os.Kill)
			}
		case <-ctxDone:
			ctxDone = nil
			stopAll()
		}
	}
	for pending > 0 { // let delayed restarts finish
		<-due
		pending--
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case finished:
		return nil
	case failure != nil:
		return failure
	}
	return errors.New("elastic: every slot exited without finishing")
}
