package job

import (
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

	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
	"github.com/ringtail-ml/ringtail/internal/launch"
)

// maxLine bounds how much of one output line is buffered; a longer line
// is written in pieces.
const maxLine = 64 << 10

// lineWriter cuts one process's output stream into lines and writes each
// whole line, prefixed, under the job's output lock. exec.Cmd's copying
// goroutine is its only writer; flush runs after the process was waited
// for.
type lineWriter struct {
	mu     *sync.Mutex
	dst    io.Writer
	prefix []byte
	buf    []byte
}

// Write implements io.Writer. Errors of the destination are dropped: a
// closed terminal must not stop a rank.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) >= maxLine {
				l.emit(append(l.buf, '\n'))
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i+1])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineWriter) emit(line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.dst.Write(append(append([]byte{}, l.prefix...), line...))
}

// flush writes a last line that ended without a newline.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.emit(append(l.buf, '\n'))
		l.buf = nil
	}
}

// services is what every rank of the job is told.
type services struct {
	seed      string // the observer's memberlist address
	shards    string // the shard service's host:port
	master    string // the launcher's address
	jobID     string
	secret    []byte
	dir       string // remote ranks' working directory
	outMu     *sync.Mutex
	stdout    io.Writer
	stderr    io.Writer
	prefix    bool
	ssh       []string
	sshMode   string
	grace     time.Duration
	np, minNP int
	maxNP     int
	timeout   time.Duration // ranks' operation timeout
	waitFor   time.Duration // ElasticTimeout
	env       []string
	command   []string
	localDir  string
}

// hostRanks starts the ranks of one host for its Supervisor: the
// Supervisor calls command and onEvent from its own goroutine; the pipes
// and writers of each process live here until it exits.
type hostRanks struct {
	host   launch.HostSlots
	remote bool
	svc    *services
	events chan<- rankEvent

	mu    sync.Mutex
	procs map[[2]int]*rankProc // (slot, incarnation)
}

// rankProc is one started rank: the launcher's end of its standard input
// (closing it stops the rank) and its output writers.
type rankProc struct {
	stdinR, stdinW *os.File
	out, err       *lineWriter
}

// rankEvent is a Supervisor event of one host, for Run's loop.
type rankEvent struct {
	host string
	e    elastic.SupervisorEvent
}

// id is the elastic slot id of a host's slot: "host.slot".
func id(host string, slot int) string { return host + "." + strconv.Itoa(slot) }

// env returns the rank's contract variables, the secret excepted.
func (h *hostRanks) env(slot int) []string {
	s := h.svc
	env := append([]string{}, s.env...)
	env = append(env,
		elastic.EnvElastic+"=1",
		elastic.EnvID+"="+id(h.host.Host, slot),
		elastic.EnvSeeds+"="+s.seed,
		elastic.EnvNP+"="+strconv.Itoa(s.np),
		elastic.EnvMinNP+"="+strconv.Itoa(s.minNP),
		elastic.EnvMaxNP+"="+strconv.Itoa(s.maxNP),
		elastic.EnvStartTimeout+"="+s.waitFor.String(),
		elastic.EnvMinWait+"="+s.waitFor.String(),
		service.EnvAddr+"="+s.shards,
		launch.EnvJobID+"="+s.jobID,
		launch.EnvMasterAddr+"="+s.master,
		launch.EnvLocalRank+"="+strconv.Itoa(slot),
		launch.EnvLocalWorldSize+"="+strconv.Itoa(h.host.Slots),
	)
	if s.timeout > 0 {
		env = append(env, launch.EnvTimeout+"="+s.timeout.String())
	}
	return env
}

// command builds a slot's process (elastic.SupervisorConfig.Command): the
// rank under internal/launch's watcher script, locally or through the ssh
// command, with the secret written to its standard input.
func (h *hostRanks) command(slot, inc int) (*exec.Cmd, error) {
	s := h.svc
	r := launch.RemoteRank{Host: h.host.Host, Env: h.env(slot), Command: s.command, Grace: s.grace}
	var argv []string
	switch {
	case !h.remote:
		r.Dir = s.localDir
		argv = launch.WatchedCommand(r)
	case launch.AgentExecs(s.ssh, s.sshMode):
		r.Dir = s.dir
		argv = launch.ExecCommand(s.ssh, r)
	default:
		r.Dir = s.dir
		argv = launch.SSHCommand(s.ssh, r)
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// A line fits the pipe's buffer: written before the process starts.
	if _, err := wr.Write(append(append([]byte{}, s.secret...), '\n')); err != nil {
		rd.Close()
		wr.Close()
		return nil, err
	}
	prefix := ""
	if s.prefix {
		prefix = "[" + id(h.host.Host, slot) + "] "
	}
	p := &rankProc{stdinR: rd, stdinW: wr,
		out: &lineWriter{mu: s.outMu, dst: s.stdout, prefix: []byte(prefix)},
		err: &lineWriter{mu: s.outMu, dst: s.stderr, prefix: []byte(prefix)}}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = rd, p.out, p.err
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the launcher, which stops the ranks
	cmd.WaitDelay = s.grace
	h.mu.Lock()
	h.procs[[2]int{slot, inc}] = p
	h.mu.Unlock()
	return cmd, nil
}

// onEvent is the Supervisor's OnEvent: it closes the launcher's copy of
// the read end once the process started, the write end (and flushes the
// output) once it exited, and tells Run's loop.
func (h *hostRanks) onEvent(e elastic.SupervisorEvent) {
	h.mu.Lock()
	p := h.procs[[2]int{e.Slot, e.Incarnation}]
	if !e.Started {
		delete(h.procs, [2]int{e.Slot, e.Incarnation})
	}
	h.mu.Unlock()
	if p != nil {
		if e.Started {
			p.stdinR.Close()
		} else {
			p.stdinW.Close()
			p.out.flush()
			p.err.flush()
		}
	}
	h.events <- rankEvent{host: h.host.Host, e: e}
}

// closeAll closes what processes that never started or were not reaped
// left open (a failed start).
func (h *hostRanks) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, p := range h.procs {
		p.stdinR.Close()
		p.stdinW.Close()
		delete(h.procs, k)
	}
}

// superviseHost runs the host's Supervisor until ctx ends or it returns.
func superviseHost(ctx context.Context, h *hostRanks, cfg elastic.SupervisorConfig) error {
	cfg.Slots, cfg.Command, cfg.OnEvent = h.host.Slots, h.command, h.onEvent
	sup, err := elastic.NewSupervisor(cfg)
	if err != nil {
		return fmt.Errorf("job: host %s: %w", h.host.Host, err)
	}
	defer h.closeAll()
	return sup.Run(ctx)
}
