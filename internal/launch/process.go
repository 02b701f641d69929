package launch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// rankExit is how a rank ended.
type rankExit struct {
	place  placement
	status int
	signal syscall.Signal
	err    error // a failure to wait, not an exit status
}

func (e rankExit) failed() bool { return e.status != 0 || e.signal != 0 || e.err != nil }

// flushWriter receives a process's output; Flush is called once the
// output ends.
type flushWriter interface {
	io.Writer
	Flush()
}

// proc is one started rank: a local process, or the local ssh client of a
// remote rank. Each leads its own process group.
type proc struct {
	place placement
	cmd   *exec.Cmd
	grace time.Duration

	mu     sync.Mutex
	exited bool     // reaped: its pid may be reused, signal nothing
	stdin  *os.File // remote: ssh's standard input; closing it stops the rank
	pipes  []*os.File

	// received: the wait loop has its exit (owned by the loop's goroutine).
	received bool
}

// spec is everything needed to start one rank.
type spec struct {
	place  placement
	argv   []string
	env    []string // nil: inherit
	dir    string
	secret []byte // remote: written to ssh's standard input
	grace  time.Duration
	stdout flushWriter
	stderr flushWriter
	exits  chan<- rankExit
	cpu    int // bind the local rank to this CPU, or -1
}

// spawn starts s on a goroutine locked to its OS thread for the life of
// the process (Pdeathsig follows the thread that forked) and returns once
// the process started or failed to. Its end is sent on s.exits.
func spawn(s spec) (*proc, error) {
	p := &proc{place: s.place, grace: s.grace}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		readers, err := p.start(s)
		started <- err
		if err != nil {
			return
		}
		s.exits <- p.wait(readers)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// start starts the process with its output pipes; the returned channel is
// closed when both are drained.
func (p *proc) start(s spec) (<-chan struct{}, error) {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = s.env
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, err
		}
		parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
	}
	cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1]
	var stdin *os.File
	if s.secret != nil {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, err
		}
		cmd.Stdin, stdin = r, w
		childEnds = append(childEnds, r)
	}
	var err error
	if s.cpu >= 0 {
		// The child inherits the starting thread's CPU affinity (this
		// goroutine is locked to its thread): pin the thread, start, unpin.
		err = withCPU(s.cpu, cmd.Start)
	} else {
		err = cmd.Start()
	}
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		if stdin != nil {
			stdin.Close()
		}
		return nil, err
	}
	p.cmd, p.stdin, p.pipes = cmd, stdin, parentEnds
	if stdin != nil {
		// A short line fits the pipe buffer; if ssh is already gone the
		// write fails and the exit status will tell.
		line := append(append([]byte{}, s.secret...), '\n')
		_, _ = stdin.Write(line)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, lw := range []flushWriter{s.stdout, s.stderr} {
		wg.Go(func() {
			_, _ = io.Copy(lw, parentEnds[i])
			lw.Flush()
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done, nil
}

// wait reaps the process, kills what it left in its process group,
// drains its output (giving up after the grace period if something that
// left the group still holds the pipes) and reports its end.
func (p *proc) wait(readers <-chan struct{}) rankExit {
	werr := p.cmd.Wait()
	p.mu.Lock()
	_ = signalGroup(p.cmd.Process.Pid, sigKill)
	p.exited = true
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.mu.Unlock()
	t := time.NewTimer(p.grace)
	select {
	case <-readers:
	case <-t.C:
		for _, f := range p.pipes {
			f.Close()
		}
		<-readers
	}
	t.Stop()
	for _, f := range p.pipes {
		f.Close()
	}
	e := rankExit{place: p.place}
	var ee *exec.ExitError
	switch {
	case werr == nil, errors.As(werr, &ee):
		e.status, e.signal = exitStatus(p.cmd.ProcessState)
	default:
		e.status, e.err = ExitFailure, werr
	}
	return e
}

// terminate asks the rank to stop: SIGTERM to a local rank's process
// group; for a remote rank, closing ssh's standard input, on which the
// remote script sends SIGTERM (and SIGKILL after the grace period).
func (p *proc) terminate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return
	}
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
		return
	}
	_ = signalGroup(p.cmd.Process.Pid, sigTerm)
}

// kill sends SIGKILL to the process group (for a remote rank, the ssh
// client's; the remote script still kills the rank after its grace).
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		_ = signalGroup(p.cmd.Process.Pid, sigKill)
	}
}

// running reports whether the process has not been reaped yet.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exited
}

// startStatus maps a failure to start a rank to an exit status, as a
// shell would.
func startStatus(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return ExitNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return ExitCannotExecute
	}
	return ExitFailure
}

// describeExit says how a rank ended, for notices.
func describeExit(e rankExit) string {
	switch {
	case e.err != nil:
		return fmt.Sprintf("rank %d could not be waited for: %v", e.place.Rank, e.err)
	case e.signal != 0:
		return fmt.Sprintf("rank %d was killed by signal %d (%v)", e.place.Rank, int(e.signal), e.signal)
	case e.place.Remote && e.status == 255:
		return fmt.Sprintf("rank %d on %s exited with status 255 (ssh's status when it cannot connect)", e.place.Rank, e.place.Host)
	}
	return fmt.Sprintf("rank %d exited with status %d", e.place.Rank, e.status)
}
