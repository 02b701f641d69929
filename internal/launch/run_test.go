//go:build linux

package launch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// testJob is a launch.Config for helper ranks plus what the test checks.
type testJob struct {
	launch.Config
	stdout, stderr *syncbuf.Buffer
	marker         string
	readyDir       string
}

// newJob configures np helper ranks in mode. Every rank carries a marker
// variable, so leftovers can be found in /proc (and are killed at cleanup
// whatever the test's outcome).
func newJob(t *testing.T, np int, mode string, args ...string) *testJob {
	t.Helper()
	j := &testJob{stdout: new(syncbuf.Buffer), stderr: new(syncbuf.Buffer), readyDir: t.TempDir()}
	j.marker = fmt.Sprintf("m%d-%s", time.Now().UnixNano(), regexp.MustCompile(`\W`).ReplaceAllString(t.Name(), "_"))
	j.Config = launch.Config{
		NP:      np,
		Command: append([]string{os.Args[0], helperArg, mode}, args...),
		// GORACE: a race-enabled rank would otherwise sleep 1s at exit.
		Env:    []string{"LAUNCH_MARKER=" + j.marker, "LAUNCH_READY_DIR=" + j.readyDir, "GORACE=atexit_sleep_ms=0"},
		Stdout: j.stdout, Stderr: j.stderr, PrefixOutput: true,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
	}
	t.Cleanup(func() {
		for _, pid := range markedProcesses(j.marker) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return j
}

// run runs the job and returns its status, error and duration.
func (j *testJob) run(t *testing.T, ctx context.Context) (int, error, time.Duration) {
	t.Helper()
	start := time.Now()
	code, err := launch.Run(ctx, j.Config)
	d := time.Since(start)
	t.Logf("Run = %d, %v after %v\nstdout:\n%sstderr:\n%s", code, err, d, j.stdout, j.stderr)
	return code, err, d
}

// markedProcesses lists the processes whose environment or command line
// holds marker (zombies have neither).
func markedProcesses(marker string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			b, _ := os.ReadFile(filepath.Join(d, f))
			if bytes.Contains(b, []byte(marker)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// assertNoLeftovers fails if a process of the job still runs. SIGKILL is
// asynchronous, so it allows the kernel a moment (up to a minute on a
// loaded machine; it returns as soon as they are gone).
func (j *testJob) assertNoLeftovers(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pids := markedProcesses(j.marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left after Run returned: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertStoppedByTERM fails if the launcher had to kill a rank (or srun
// step) that did not stop within the grace period after its SIGTERM.
func (j *testJob) assertStoppedByTERM(t *testing.T) {
	t.Helper()
	if strings.Contains(j.stderr.String(), "did not stop within") {
		t.Fatalf("a rank outlived its %v grace: SIGTERM did not stop it", j.Grace)
	}
}

// envLine matches the env helper's stdout lines.
func envLine() *regexp.Regexp {
	return regexp.MustCompile(`^\[(\d+)\] rank=(\d+) world=(\d+) local=(\d+)/(\d+) master=([^ ]+):(\d+) torch=([^ ]+):(\d+) job=([^ ]*) coord=(\w*) timeout=([^ ]*) secret=([^ ]*) extra=([^ ]*) localonly=([^ ]*) dir=(.*)$`)
}

// envOf parses the env helper's stdout: one map per rank.
func envOf(t *testing.T, stdout string, np int) []map[string]string {
	t.Helper()
	names := []string{"prefix", "rank", "world", "local", "localworld", "master", "port", "torchaddr", "torchport", "job", "coord", "timeout", "secret", "extra", "localonly", "dir"}
	got := make([]map[string]string, np)
	envLine := envLine()
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		m := envLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected output line %q", l)
		}
		kv := map[string]string{}
		for i, n := range names {
			kv[n] = m[i+1]
		}
		r, _ := strconv.Atoi(kv["rank"])
		if r < 0 || r >= np || got[r] != nil {
			t.Fatalf("rank %d printed twice or out of range", r)
		}
		got[r] = kv
	}
	for r, kv := range got {
		if kv == nil {
			t.Fatalf("rank %d printed nothing", r)
		}
	}
	return got
}

func TestRunSetsTheEnvironmentContract(t *testing.T) {
	j := newJob(t, 3, "env")
	j.Secret, j.JobID, j.Timeout = []byte("s3cret-0123456789"), "job-x", 90*time.Second
	j.Env = append(j.Env, "LAUNCH_EXTRA=hello")
	var got launch.Job
	var port int
	j.Coordinator = func(ctx context.Context, ln net.Listener, job launch.Job) error {
		got, port = job, portOf(t, ln.Addr())
		<-ctx.Done()
		return ln.Close()
	}
	code, err, _ := j.run(t, context.Background())
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if got.ID != "job-x" || string(got.Secret) != "s3cret-0123456789" || got.World != 3 {
		t.Fatalf("coordinator served %+v", got)
	}
	env := envOf(t, j.stdout.String(), 3)
	for r, kv := range env {
		want := map[string]string{
			"prefix": strconv.Itoa(r), "world": "3", "local": strconv.Itoa(r), "localworld": "3",
			"master": "127.0.0.1", "port": strconv.Itoa(port), "job": "job-x", "coord": "external",
			"timeout": "1m30s", "secret": "s3cret-0123456789", "extra": "hello",
		}
		for k, v := range want {
			if kv[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, kv[k], v)
			}
		}
		// Rank 0 runs here: torch's MASTER_ADDR/PORT are its own, not the
		// coordinator's (RINGTAIL_MASTER_ADDR/PORT).
		if kv["torchaddr"] != "127.0.0.1" || kv["torchport"] == strconv.Itoa(port) || kv["torchport"] != env[0]["torchport"] {
			t.Errorf("rank %d: torch's MASTER_ADDR:MASTER_PORT %s:%s, want 127.0.0.1 and one port, not the coordinator's %d", r, kv["torchaddr"], kv["torchport"], port)
		}
	}
	for r := range 3 {
		if !strings.Contains(j.stderr.String(), fmt.Sprintf("[%d] stderr of %d\n", r, r)) {
			t.Errorf("stderr lacks rank %d's prefixed line", r)
		}
	}
	j.assertNoLeftovers(t)
}

func TestRunGeneratesSecretAndJobID(t *testing.T) {
	seen := map[string]bool{}
	for range 2 {
		j := newJob(t, 2, "env")
		if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
			t.Fatalf("Run = %d, %v", code, err)
		}
		env := envOf(t, j.stdout.String(), 2)
		secret, job := env[0]["secret"], env[0]["job"]
		if len(secret) != 64 || !strings.HasPrefix(job, "rt-") || env[1]["secret"] != secret || env[1]["job"] != job {
			t.Fatalf("secret %q job %q (rank 1: %q %q): want one random 64-digit secret and rt- job id per job", secret, job, env[1]["secret"], env[1]["job"])
		}
		if seen[secret] || seen[job] {
			t.Fatal("two jobs got the same secret or job id")
		}
		seen[secret], seen[job] = true, true
	}
}

func TestRunPlacesLocalHostSlots(t *testing.T) {
	j := newJob(t, 3, "env")
	j.Hosts = []launch.HostSlots{{Host: "localhost", Slots: 2}, {Host: "127.0.0.1", Slots: 1}}
	if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	env := envOf(t, j.stdout.String(), 3)
	for r, want := range []string{"0/2", "1/2", "0/1"} {
		if got := env[r]["local"] + "/" + env[r]["localworld"]; got != want {
			t.Errorf("rank %d: local rank/world %s, want %s", r, got, want)
		}
	}
}

func TestRunFailingRankStopsTheOthers(t *testing.T) {
	j := newJob(t, 3, "fail", "1", "3")
	j.Grace = time.Minute // the others block forever but exit on SIGTERM
	code, err, _ := j.run(t, context.Background())
	var re *launch.RankError
	if code != 3 || !errors.As(err, &re) || re.Rank != 1 || re.Status != 3 || re.Signal != 0 {
		t.Fatalf("Run = %d, %v; want 3 and a RankError for rank 1", code, err)
	}
	if want := "ringtail run: rank 1 exited with status 3; stopping the other ranks\n"; !strings.Contains(j.stderr.String(), want) {
		t.Fatalf("stderr lacks %q", want)
	}
	j.assertStoppedByTERM(t)
	j.assertNoLeftovers(t)
}

func TestRunKillsRanksThatIgnoreSIGTERM(t *testing.T) {
	j := newJob(t, 3, "ignoreterm", "0", "4")
	j.Grace = 300 * time.Millisecond
	code, err, d := j.run(t, context.Background())
	if code != 4 || err == nil || err.Error() != "rank 0 exited with status 4" {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for _, r := range []int{1, 2} {
		if want := fmt.Sprintf("ringtail run: rank %d did not stop within 300ms; killing it\n", r); !strings.Contains(j.stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if d < 300*time.Millisecond {
		t.Fatalf("Run took %v, less than the 300ms grace", d)
	}
	j.assertNoLeftovers(t)
}

func TestRunRankKilledBySignal(t *testing.T) {
	j := newJob(t, 3, "killself", "2")
	j.Name = "myjob"
	code, err, _ := j.run(t, context.Background())
	var re *launch.RankError
	if code != 128+9 || !errors.As(err, &re) || re.Rank != 2 || re.Signal != syscall.SIGKILL {
		t.Fatalf("Run = %d, %v; want 137 and rank 2 killed by SIGKILL", code, err)
	}
	if want := "myjob: rank 2 was killed by signal 9 (killed); stopping the other ranks\n"; !strings.Contains(j.stderr.String(), want) {
		t.Fatalf("stderr lacks %q", want)
	}
	j.assertNoLeftovers(t)
}

// TestRunNamesTheKilledRankBeforeItsPeers: peers that exit 1 because
// rank 1 died (each the moment it is a zombie) must not be named: the
// killed rank and 137 decide, whichever exit reaches the wait loop first.
func TestRunNamesTheKilledRankBeforeItsPeers(t *testing.T) {
	for i := range 5 {
		j := newJob(t, 5, "diefirst", "1")
		code, err, _ := j.run(t, context.Background())
		var re *launch.RankError
		if code != 128+9 || !errors.As(err, &re) || re.Rank != 1 || re.Signal != syscall.SIGKILL {
			t.Fatalf("job %d: Run = %d, %v; want 137 and rank 1 killed by SIGKILL", i, code, err)
		}
		j.assertNoLeftovers(t)
	}
}

func TestRunCancelStopsEveryRank(t *testing.T) {
	j := newJob(t, 3, "block")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if m, _ := filepath.Glob(filepath.Join(j.readyDir, "ready-*")); len(m) == 3 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	j.Grace = time.Minute
	code, err, _ := j.run(t, ctx)
	if code != launch.ExitInterrupted || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %d, %v; want %d and context.Canceled", code, err, launch.ExitInterrupted)
	}
	if !strings.Contains(j.stderr.String(), "ringtail run: interrupted; stopping the ranks\n") {
		t.Fatal("no interruption notice")
	}
	j.assertStoppedByTERM(t)
	j.assertNoLeftovers(t)
}

func TestRunKillsWhatRanksLeaveBehind(t *testing.T) {
	// Each rank starts a grandchild that holds its stdout, blocks forever
	// and exits 0: Run must kill the grandchildren (their process group),
	// not wait for the pipes. Waiting for them would last until the
	// context's 5-minute hang detector, an interruption (status 130).
	j := newJob(t, 2, "spawn")
	j.Grace = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code, err, _ := j.run(t, ctx)
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if strings.Count(j.stdout.String(), "spawned\n") != 2 {
		t.Fatal("ranks did not report their grandchildren")
	}
	j.assertNoLeftovers(t)
}

func TestRunOutputLinesAreWholeAndPrefixed(t *testing.T) {
	j := newJob(t, 3, "lines", "100")
	j.Stderr = j.stdout // one stream, as on a terminal
	if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	line := regexp.MustCompile(`^\[(\d)\] (\d):(\d+):(0+)$`)
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(j.stdout.String(), "\n"), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("mangled line %.80q", l)
		}
		if i, _ := strconv.Atoi(m[3]); m[1] != m[2] || len(m[4]) != 1000+i {
			t.Fatalf("mangled line %.80q", l)
		}
		count[m[1]]++
	}
	for r := range 3 {
		if count[strconv.Itoa(r)] != 200 {
			t.Fatalf("rank %d: %d lines, want 200", r, count[strconv.Itoa(r)])
		}
	}
}

// lineWrites records Write calls.
type lineWrites struct {
	mu    sync.Mutex
	calls []string
}

func (w *lineWrites) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

func TestRunUnprefixedOutputIsOneLinePerWrite(t *testing.T) {
	j := newJob(t, 2, "lines", "20")
	var w lineWrites
	j.Stdout, j.PrefixOutput = &w, false
	if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if len(w.calls) != 40 {
		t.Fatalf("%d writes, want 40", len(w.calls))
	}
	for _, c := range w.calls {
		if strings.Count(c, "\n") != 1 || !strings.HasSuffix(c, "\n") || strings.HasPrefix(c, "[") {
			t.Fatalf("write %.60q is not one unprefixed line", c)
		}
	}
}

func TestRunRanksRendezvousThroughTheLauncher(t *testing.T) {
	// The real runtime: rank 0 must not start a second coordinator
	// (RINGTAIL_COORDINATOR=external) and every rank must find the
	// launcher's.
	j := newJob(t, 3, "allreduce")
	code, err, _ := j.run(t, context.Background())
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for r := range 3 {
		if want := fmt.Sprintf("[%d] sum=6\n", r); !strings.Contains(j.stdout.String(), want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

func TestRunStartFailures(t *testing.T) {
	j := newJob(t, 2, "env")
	j.Command = []string{filepath.Join(t.TempDir(), "no-such-program")}
	if code, err, _ := j.run(t, context.Background()); code != launch.ExitNotFound || err == nil || !strings.Contains(err.Error(), "cannot start rank 0") {
		t.Fatalf("missing program: Run = %d, %v; want %d", code, err, launch.ExitNotFound)
	}
	if n := strings.Count(j.stderr.String(), "ringtail run: cannot start rank 0 on localhost:"); n != 1 {
		t.Fatalf("%d start-failure notices, want 1", n)
	}
	notExec := filepath.Join(t.TempDir(), "data.txt")
	os.WriteFile(notExec, []byte("x"), 0o644)
	j.Command = []string{notExec}
	if code, _, _ := j.run(t, context.Background()); code != launch.ExitCannotExecute {
		t.Fatalf("non-executable: Run = %d, want %d", code, launch.ExitCannotExecute)
	}
	j.NP = 0
	if code, err, _ := j.run(t, context.Background()); code != launch.ExitUsage || err == nil {
		t.Fatalf("invalid config: Run = %d, %v; want %d", code, err, launch.ExitUsage)
	}
	if want := "ringtail run: invalid config: -np 0 must be in 1..65536\n"; !strings.HasSuffix(j.stderr.String(), want) {
		t.Fatalf("stderr does not end with %q", want)
	}
}

func TestRunStopsRanksWhenTheCoordinatorFails(t *testing.T) {
	j := newJob(t, 2, "block")
	j.Coordinator = func(ctx context.Context, ln net.Listener, job launch.Job) error {
		ln.Close()
		for {
			if m, _ := filepath.Glob(filepath.Join(j.readyDir, "ready-*")); len(m) == 2 {
				return errors.New("disk on fire")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	code, err, _ := j.run(t, context.Background())
	if code != launch.ExitFailure || err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Run = %d, %v", code, err)
	}
	j.assertNoLeftovers(t)
}

// fakeSSH stands in for ssh: it drops the host and runs the remote
// command with sh, as the remote login shell would, in an environment as
// bare as a fresh login's.
func fakeSSH() []string {
	return []string{"env", "-i", "PATH=" + os.Getenv("PATH"), "sh", "-c", `exec sh -c "$2"`, "fakessh"}
}

func TestRunRemoteRanksOverSSH(t *testing.T) {
	t.Setenv("LAUNCH_LOCAL_ONLY", "yes") // inherited by local ranks only
	j := newJob(t, 3, "env")
	j.Hosts = []launch.HostSlots{{Host: "localhost", Slots: 1}, {Host: "node-a", Slots: 2}}
	j.SSH, j.MasterAddr, j.Dir = fakeSSH(), "127.0.0.1", t.TempDir()
	j.Secret = []byte(`it's "secret" $HOME`)
	j.Env = append(j.Env, "LAUNCH_EXTRA=x;y")
	if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	// envLine splits on spaces; compare the secret without them.
	j.Secret = []byte(`it's`)
	env := envOf(t, strings.ReplaceAll(j.stdout.String(), ` "secret" $HOME`, ""), 3)
	for r, kv := range env {
		local := r == 0
		want := map[string]string{"extra": "x;y", "secret": "it's", "dir": j.Dir, "coord": "external", "world": "3", "master": "127.0.0.1"}
		want["localonly"] = map[bool]string{true: "yes", false: ""}[local]
		want["local"], want["localworld"] = map[bool]string{true: "0", false: strconv.Itoa(r - 1)}[local], map[bool]string{true: "1", false: "2"}[local]
		for k, v := range want {
			if kv[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, kv[k], v)
			}
		}
	}
	if !strings.Contains(j.stdout.String(), `secret=it's "secret" $HOME `) {
		t.Error("the secret did not arrive intact")
	}
	j.assertNoLeftovers(t)
}

func TestRunRemoteFailureStopsRemoteRanks(t *testing.T) {
	j := newJob(t, 3, "fail", "0", "5")
	j.Hosts = []launch.HostSlots{{Host: "node-a", Slots: 3}}
	j.SSH, j.MasterAddr = fakeSSH(), "127.0.0.1"
	j.Grace = time.Minute // remote ranks exit on SIGTERM from their watcher
	code, err, _ := j.run(t, context.Background())
	if code != 5 || err == nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	j.assertStoppedByTERM(t)
	j.assertNoLeftovers(t)
}

func TestRunRemoteSSHFailure(t *testing.T) {
	j := newJob(t, 1, "env")
	j.Hosts = []launch.HostSlots{{Host: "node-a", Slots: 1}}
	j.SSH, j.MasterAddr = []string{"sh", "-c", "echo 'ssh: connect to host node-a: No route to host' >&2; exit 255", "fakessh"}, "127.0.0.1"
	code, _, _ := j.run(t, context.Background())
	if code != 255 || !strings.Contains(j.stderr.String(), "rank 0 on node-a exited with status 255 (ssh's status when it cannot connect)") ||
		!strings.Contains(j.stderr.String(), "[0] ssh: connect to host node-a") {
		t.Fatalf("Run = %d; want 255 and ssh's message", code)
	}
}

func TestRunStartTimeoutFailsAJobWhoseRankNeverJoins(t *testing.T) {
	j := newJob(t, 2, "absent", "1")
	j.StartTimeout = 2 * time.Second
	j.Grace = 2 * time.Second
	code, err, d := j.run(t, context.Background())
	var re *launch.RankError
	if code == 0 || !errors.As(err, &re) || re.Rank != 0 {
		t.Fatalf("Run = %d, %v; want rank 0 to fail", code, err)
	}
	// The start timeout (not its 30 s operation deadline) ended rank 0's
	// wait: its error says so, and it did not come early.
	if !strings.Contains(j.stderr.String(), "waiting for all 2 ranks to register") {
		t.Errorf("rank 0's error does not say it waited for the others")
	}
	if d < j.StartTimeout {
		t.Fatalf("rank 0 gave up after %v, before its %v start timeout", d, j.StartTimeout)
	}
	j.assertNoLeftovers(t)
}
