package elastic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// The process tests re-execute this test binary as ranks (RankMain, or a
// role below) and kill them with SIGKILL: no Close, no Leave, sockets
// reset by the kernel.

const (
	envTestRole  = "RINGTAIL_ELASTIC_TEST_ROLE"
	envTestEvict = "RINGTAIL_ELASTIC_TEST_EVICT" // "step:rank": rank 0 evicts rank at step of generation 1
)

// testRoleMain runs the test-only roles.
func testRoleMain() (int, bool) {
	switch os.Getenv(envTestRole) {
	case "evict-rank":
		opts, err := RankOptionsFromEnv()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2, true
		}
		var at uint64
		victim := -1
		if v := os.Getenv(envTestEvict); v != "" {
			s, r, _ := strings.Cut(v, ":")
			at, _ = strconv.ParseUint(s, 10, 64)
			victim, _ = strconv.Atoi(r)
		}
		opts.Hook = func(ctx context.Context, w *Worker, g Generation) {
			if g.Rank == 0 && g.Number == 1 && g.Step == at && victim > 0 {
				if err := w.Evict(ctx, victim, "persistent straggler (test)"); err != nil {
					fmt.Fprintln(os.Stderr, "evict:", err)
				}
			}
		}
		return RunRank(opts, os.Stdout), true
	case "shard-worker":
		return shardWorkerMain(), true
	case "shard-service":
		return shardServiceMain(), true
	}
	return 0, false
}

// procEvent is a RankEvent from a child process.
type procEvent struct {
	proc string
	ev   RankEvent
}

// lineWriter decodes the JSON lines a child writes into events; it is a
// child's Stdout.
type lineWriter struct {
	proc string
	out  chan<- procEvent
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadBytes('\n')
		if err != nil {
			l.buf.Write(line) // incomplete: keep
			return len(p), nil
		}
		var ev RankEvent
		if json.Unmarshal(line, &ev) == nil {
			select {
			case l.out <- procEvent{proc: l.proc, ev: ev}:
			default: // the test stopped listening
			}
		}
	}
}

// job is a set of child processes started from this test binary.
type job struct {
	t      *testing.T
	secret string
	events chan procEvent
	mu     sync.Mutex
	procs  map[string]*exec.Cmd
}

func newJob(t *testing.T) *job {
	j := &job{t: t, secret: "process-test-secret-0123456789", events: make(chan procEvent, 65536), procs: map[string]*exec.Cmd{}}
	t.Cleanup(func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, p := range j.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	return j
}

// env returns a rank's environment: identity, memberlist address, seeds,
// sizes, secret, and a small fast model.
func (j *job) env(id, bind string, seeds []string, np, minNP int, extra ...string) []string {
	env := append(os.Environ(),
		EnvID+"="+id, EnvBind+"="+bind, EnvSeeds+"="+strings.Join(seeds, ","),
		EnvNP+"="+strconv.Itoa(np), EnvMinNP+"="+strconv.Itoa(minNP), EnvMinWait+"=30s", EnvStartTimeout+"=60s",
		ringtail.EnvSecret+"="+j.secret, ringtail.EnvJobID+"=process-test",
		envBenchElems+"=16384", envBenchPace+"=5ms")
	if os.Getenv("ELASTIC_TEST_LOG") != "" {
		env = append(env, envBenchLog+"=1")
	}
	return append(env, extra...)
}

func (j *job) command(name string, env []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = env
	cmd.Stdout = &lineWriter{proc: name, out: j.events}
	cmd.Stderr = os.Stderr
	return cmd
}

func (j *job) start(name string, env []string) *exec.Cmd {
	j.t.Helper()
	cmd := j.command(name, env)
	if err := cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	j.mu.Lock()
	j.procs[name] = cmd
	j.mu.Unlock()
	return cmd
}

func (j *job) kill(name string) {
	j.t.Helper()
	j.mu.Lock()
	p := j.procs[name]
	j.mu.Unlock()
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		j.t.Fatal(err)
	}
}

// waitAll waits until every named process has reported an event for which
// ok holds; an "exit" event from one of them fails the test.
func (j *job) waitAll(d time.Duration, what string, names []string, ok func(RankEvent) bool) map[string]RankEvent {
	j.t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]RankEvent{}
	deadline := time.After(d)
	for len(got) < len(want) {
		select {
		case e := <-j.events:
			if !want[e.proc] {
				continue
			}
			if e.ev.Event == "exit" {
				j.t.Fatalf("%s exited while waiting for %s: %s", e.proc, what, e.ev.Err)
			}
			if _, seen := got[e.proc]; !seen && ok(e.ev) {
				got[e.proc] = e.ev
			}
		case <-deadline:
			j.t.Fatalf("timed out after %v waiting for %s (have %v)", d, what, got)
		}
	}
	return got
}

// Real processes: kill -9 of a rank → the survivors form generation g+1
// (data-plane evidence names the dead rank at once) and continue; a new
// process joins → generation g+2 includes it, appended as the last rank.
func TestProcessKill9AndJoin(t *testing.T) {
	j := newJob(t)
	ports := freePorts(t, 4)
	seeds := seedList(ports)
	names := []string{"rank-0", "rank-1", "rank-2"}
	for i, n := range names {
		j.start(n, j.env(n, seeds[i], seeds, 3, 2, EnvRole+"="+roleBenchRank))
	}
	first := j.waitAll(60*time.Second, "generation 1", names, func(e RankEvent) bool { return e.Event == "step" && e.Step >= 5 })
	for i, n := range names {
		if e := first[n]; e.Gen != 1 || e.Size != 3 || e.Rank != i {
			t.Fatalf("%s: %+v, want generation 1, rank %d of 3", n, e, i)
		}
	}
	killed := time.Now()
	j.kill("rank-1")
	survivors := []string{"rank-0", "rank-2"}
	after := j.waitAll(20*time.Second, "the next generation", survivors, func(e RankEvent) bool { return e.Event == "step" && e.Gen > 1 })
	for _, n := range survivors {
		if e := after[n]; e.Gen != 2 || e.Size != 2 {
			t.Fatalf("%s: first step after the kill in generation %d of %d ranks, want generation 2 of 2", n, e.Gen, e.Size)
		}
	}
	var last int64
	for _, e := range after {
		last = max(last, e.UnixNano)
	}
	t.Logf("kill -9 → every survivor stepping in generation 2: %v", time.Unix(0, last).Sub(killed))

	j.start("rank-3", j.env("rank-3", seeds[3], seeds, 3, 2, EnvRole+"="+roleBenchRank))
	all := []string{"rank-0", "rank-2", "rank-3"}
	grown := j.waitAll(30*time.Second, "generation 3 with the joiner", all, func(e RankEvent) bool { return e.Event == "step" && e.Gen > 2 })
	for i, n := range all {
		if e := grown[n]; e.Gen != 3 || e.Size != 3 || e.Rank != i {
			t.Fatalf("%s: %+v, want generation 3, rank %d of 3", n, e, i)
		}
	}
}

// KILL_RESTART with real processes under a Supervisor: rank 0 evicts rank
// 2 at step 10; the process exits with ExitEvicted; the supervisor starts a
// new incarnation of the slot, which rejoins: generation 2 has two ranks,
// a later one three again, the newcomer last.
func TestProcessEvictRestartUnderSupervisor(t *testing.T) {
	j := newJob(t)
	ports := freePorts(t, 3)
	seeds := seedList(ports)
	supEvents := make(chan SupervisorEvent, 64)
	sup, err := NewSupervisor(SupervisorConfig{
		Slots: 3, StopGrace: 2 * time.Second,
		Command: func(slot, inc int) (*exec.Cmd, error) {
			id := fmt.Sprintf("rank-%d", slot)
			return j.command(fmt.Sprintf("%s#%d", id, inc), j.env(id, seeds[slot], seeds, 3, 2,
				envTestRole+"=evict-rank", envTestEvict+"=10:2")), nil
		},
		OnEvent: func(e SupervisorEvent) { supEvents <- e },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != context.Canceled {
				t.Errorf("supervisor: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("supervisor did not stop")
		}
	}()

	waitSup := func(what string, ok func(SupervisorEvent) bool) SupervisorEvent {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case e := <-supEvents:
				if ok(e) {
					return e
				}
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	e := waitSup("the evicted process to exit", func(e SupervisorEvent) bool { return !e.Started })
	if e.Slot != 2 || e.ExitCode != ExitEvicted || !e.Restart {
		t.Fatalf("first exit: %+v, want slot 2 with status %d, restarted", e, ExitEvicted)
	}
	waitSup("the replacement to start", func(e SupervisorEvent) bool { return e.Started && e.Slot == 2 && e.Incarnation == 1 })
	shrunk := j.waitAll(20*time.Second, "a generation of two", []string{"rank-0#0", "rank-1#0"},
		func(e RankEvent) bool { return e.Event == "step" && e.Gen > 1 && e.Size == 2 })
	g := shrunk["rank-0#0"].Gen
	grown := j.waitAll(30*time.Second, "a generation of three with the replacement", []string{"rank-0#0", "rank-1#0", "rank-2#1"},
		func(e RankEvent) bool { return e.Event == "step" && e.Gen > g && e.Size == 3 })
	if r := grown["rank-2#1"].Rank; r != 2 {
		t.Fatalf("replacement has rank %d, want 2", r)
	}
	t.Logf("evicted in generation 1; survivors in generation %d; replacement joined in generation %d", g, grown["rank-2#1"].Gen)
}

// A frozen process (SIGSTOP) answers neither gossip nor the data plane:
// the failure detector declares it dead and the survivors re-form. The
// data plane's silence timeout is 10 minutes here, so the re-forming can
// only be the failure detector's doing. Thawed (SIGCONT), the rank finds
// its communicator gone, refutes its death and rejoins as the last rank.
func TestProcessFrozenRankReplacedThenRejoins(t *testing.T) {
	j := newJob(t)
	ports := freePorts(t, 3)
	seeds := seedList(ports)
	names := []string{"rank-0", "rank-1", "rank-2"}
	for i, n := range names {
		j.start(n, j.env(n, seeds[i], seeds, 3, 2, EnvRole+"="+roleBenchRank, ringtail.EnvPeerTimeout+"=10m"))
	}
	j.waitAll(60*time.Second, "generation 1", names, func(e RankEvent) bool { return e.Event == "step" && e.Step >= 5 })
	j.mu.Lock()
	frozen := j.procs["rank-1"]
	j.mu.Unlock()
	stopped := time.Now()
	if err := frozen.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	survivors := []string{"rank-0", "rank-2"}
	after := j.waitAll(20*time.Second, "a generation without the frozen rank", survivors, func(e RankEvent) bool { return e.Event == "step" && e.Size == 2 })
	var last int64
	for _, e := range after {
		last = max(last, e.UnixNano)
	}
	t.Logf("SIGSTOP → every survivor stepping in generation %d: %v", after["rank-0"].Gen, time.Unix(0, last).Sub(stopped))
	if err := frozen.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	g := after["rank-0"].Gen
	back := j.waitAll(20*time.Second, "the thawed rank back in", names, func(e RankEvent) bool { return e.Event == "step" && e.Gen > g && e.Size == 3 })
	if r := back["rank-1"].Rank; r != 2 {
		t.Errorf("thawed rank has rank %d, want 2 (appended)", r)
	}
}
