//go:build linux

package launch_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
)

// fakeSrunVar set in its environment makes the test binary a stand-in
// for srun (fakeSrun) instead of running the tests.
const fakeSrunVar = "LAUNCH_FAKE_SRUN"

// fakeSrun stands in for srun inside an allocation of one node,
// "fakenode": it reads the flags SrunCommand passes (--ntasks, --label,
// --kill-on-bad-exit, --chdir), starts the tasks with the variables srun
// gives them, labels their output lines as --label does, sends SIGTERM to
// the others when one fails (as --kill-on-bad-exit=1 has Slurm do), kills
// them all when it gets SIGTERM itself (as srun does: "forcing job
// termination"), says so as srun does, and exits with the highest status.
func fakeSrun(args []string) int {
	n, label, killOnBadExit, dir := 1, false, false, ""
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "--"); i++ {
		switch a := args[i]; {
		case strings.HasPrefix(a, "--ntasks="):
			n, _ = strconv.Atoi(strings.TrimPrefix(a, "--ntasks="))
		case a == "--label":
			label = true
		case a == "--kill-on-bad-exit=1":
			killOnBadExit = true
		case strings.HasPrefix(a, "--chdir="):
			dir = strings.TrimPrefix(a, "--chdir=")
		}
	}
	command := args[i:]
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, fakeSrunVar+"=") {
			env = append(env, kv)
		}
	}
	node, job := cmp.Or(os.Getenv("LAUNCH_FAKE_NODE"), "fakenode"), cmp.Or(os.Getenv("LAUNCH_FAKE_JOB"), "99")
	width := len(strconv.Itoa(n - 1))
	var mu sync.Mutex
	relay := func(r io.Reader, w io.Writer, task int, wg *sync.WaitGroup) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			mu.Lock()
			if label {
				fmt.Fprintf(w, "%*d: %s\n", width, task, sc.Text())
			} else {
				fmt.Fprintf(w, "%s\n", sc.Text())
			}
			mu.Unlock()
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tasks := make([]*exec.Cmd, n)
	type exit struct{ task, status int }
	exits := make(chan exit, n)
	for r := range n {
		c := exec.Command(command[0], command[1:]...)
		c.Dir = dir
		c.Env = append(slices.Clone(env), "SLURM_JOB_ID="+job, "SLURM_STEP_ID=0", "SLURM_PROCID="+strconv.Itoa(r),
			"SLURM_LOCALID="+strconv.Itoa(r), "SLURM_NODEID=0", "SLURM_STEP_NUM_TASKS="+strconv.Itoa(n),
			"SLURM_STEP_TASKS_PER_NODE="+strconv.Itoa(n), "SLURM_STEP_NODELIST="+node, "SLURMD_NODENAME="+node)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, _ := c.StdoutPipe()
		errp, _ := c.StderrPipe()
		if err := c.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "srun: error: %v\n", err)
			return 1
		}
		tasks[r] = c
		go func() {
			// Wait closes the pipes: read them to the end first.
			var relays sync.WaitGroup
			relays.Add(2)
			go relay(out, os.Stdout, r, &relays)
			go relay(errp, os.Stderr, r, &relays)
			relays.Wait()
			c.Wait()
			exits <- exit{r, c.ProcessState.ExitCode()}
		}()
	}
	signalAll := func(sig syscall.Signal) {
		for _, c := range tasks {
			syscall.Kill(-c.Process.Pid, sig)
		}
	}
	highest := 0
	for left := n; left > 0; {
		select {
		case e := <-exits:
			left--
			if e.status < 0 {
				e.status = 137
			}
			if e.status != 0 {
				fmt.Fprintf(os.Stderr, "srun: error: %s: task %d: Exited with exit code %d\n", node, e.task, e.status)
				if killOnBadExit {
					signalAll(syscall.SIGTERM)
				}
			}
			highest = max(highest, e.status)
		case <-sigs:
			fmt.Fprintln(os.Stderr, "srun: forcing job termination")
			signalAll(syscall.SIGKILL)
		}
	}
	return highest
}

// newSrunJob is newJob for ranks started by the fake srun.
func newSrunJob(t *testing.T, np int, mode string, args ...string) *testJob {
	j := newJob(t, np, mode, args...)
	j.Launcher = launch.LauncherSrun
	j.Hosts = []launch.HostSlots{{Host: "fakenode", Slots: np}}
	j.Srun = []string{os.Args[0]}
	j.MasterAddr = "127.0.0.1"
	j.Env = append(j.Env, fakeSrunVar+"=1")
	return j
}

func TestSrunCommandRunsOneStepWithLabels(t *testing.T) {
	argv := launch.SrunCommand([]string{"srun", "--gpus-per-task=1"}, launch.SrunStep{
		NP: 8, Dir: "/work dir", Command: []string{"python3", "train.py", "--lr", "0.1"}, ExitMarker: "m",
	})
	want := []string{"srun", "--ntasks=8", "--kill-on-bad-exit=1", "--export=ALL", "--gpus-per-task=1", "--label", "--chdir=/work dir", "sh", "-c"}
	if !slices.Equal(argv[:len(want)], want) {
		t.Fatalf("argv starts %q, want %q", argv[:len(want)], want)
	}
	if tail := argv[len(want)+1:]; !slices.Equal(tail, []string{"ringtail-rank", "python3", "train.py", "--lr", "0.1"}) {
		t.Fatalf("argv ends %q", tail)
	}
}

// wrapperScript is the script each task of step runs.
func wrapperScript(step launch.SrunStep) string {
	argv := launch.SrunCommand([]string{"srun"}, step)
	return argv[slices.Index(argv, "-c")+1]
}

// runScript runs the step's wrapper script under sh with env and returns
// the command's output and status.
func runScript(t *testing.T, env []string, step launch.SrunStep, command ...string) (string, string, int) {
	t.Helper()
	c := exec.Command("sh", append([]string{"-c", wrapperScript(step), "ringtail-rank"}, command...)...)
	c.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), c.ProcessState.ExitCode()
}

func TestSrunScriptExportsTheContractFromSlurm(t *testing.T) {
	print := []string{"sh", "-c", `echo "$RANK $LOCAL_RANK $LOCAL_WORLD_SIZE"`}
	for _, tc := range []struct {
		perNode string
		node    int
	}{{"4", 0}, {"2(x3),1", 0}, {"2(x3),1", 2}, {"2(x3),1", 3}, {"1,3(x2),5", 1}, {"1,3(x2),5", 2}, {"1,3(x2),5", 3}, {"16(x100),7(x2)", 101}} {
		tasks, err := slurm.ExpandTasksPerNode(tc.perNode)
		if err != nil {
			t.Fatal(err)
		}
		env := []string{"SLURM_PROCID=5", "SLURM_LOCALID=1", "SLURM_NODEID=" + strconv.Itoa(tc.node), "SLURM_STEP_TASKS_PER_NODE=" + tc.perNode}
		out, _, code := runScript(t, env, launch.SrunStep{NP: 1, ExitMarker: "m"}, print...)
		if want := fmt.Sprintf("5 1 %d\n", tasks[tc.node]); out != want || code != 0 {
			t.Errorf("%s at node %d: %q (exit %d), want %q", tc.perNode, tc.node, out, code, want)
		}
	}
	// Metrics on the local rank's port, on every interface.
	out, _, _ := runScript(t, []string{"SLURM_PROCID=5", "SLURM_LOCALID=3", "SLURM_NODEID=0", "SLURM_STEP_TASKS_PER_NODE=4"},
		launch.SrunStep{NP: 1, MetricsPort: 9400, ExitMarker: "m"}, "sh", "-c", `echo "$RINGTAIL_METRICS_ADDR"`)
	if out != "0.0.0.0:9403\n" {
		t.Errorf("metrics address %q, want 0.0.0.0:9403", out)
	}
	// The job's list stands in for the step's.
	out, _, _ = runScript(t, []string{"SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_TASKS_PER_NODE=3,2"}, launch.SrunStep{NP: 1, ExitMarker: "m"}, print...)
	if out != "0 0 2\n" {
		t.Errorf("job's tasks per node: %q", out)
	}
}

func TestSrunScriptReportsARankThatFailsOnItsOwn(t *testing.T) {
	step := launch.SrunStep{NP: 1, ExitMarker: "ringtail-rank-exit:j1"}
	env := []string{"SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURMD_NODENAME=n7"}
	_, stderr, code := runScript(t, env, step, "sh", "-c", "echo bye >&2; exit 3")
	if code != 3 || stderr != "bye\nringtail-rank-exit:j1 3 n7\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runScript(t, env, step, "true"); code != 0 || stderr != "" {
		t.Fatalf("success: exit %d, stderr %q", code, stderr)
	}
	// A rank stopped with the step (SIGTERM to the wrapper) is no failure
	// of its own.
	ready := filepath.Join(t.TempDir(), "ready")
	c := exec.Command("sh", "-c", wrapperScript(step), "ringtail-rank", "sh", "-c", `trap 'exit 143' TERM; touch "$0"; while :; do sleep 0.05; done`, ready)
	c.Env = append(env, "PATH="+os.Getenv("PATH"))
	c.WaitDelay = 10 * time.Second
	var stderrB strings.Builder
	c.Stderr = &stderrB
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rank never set its TERM handler")
		}
	}
	c.Process.Signal(syscall.SIGTERM)
	c.Wait()
	if code := c.ProcessState.ExitCode(); code != 143 || strings.Contains(stderrB.String(), "ringtail-rank-exit") {
		t.Fatalf("stopped rank: exit %d, stderr %q", code, stderrB.String())
	}
}

func TestRunSrunStartsOneStep(t *testing.T) {
	j := newSrunJob(t, 3, "env")
	j.Secret, j.JobID, j.Timeout = []byte("srun-secret-0123456"), "job-srun", time.Minute
	code, err, _ := j.run(t, context.Background())
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	env := envOf(t, j.stdout.String(), 3)
	for r, kv := range env {
		want := map[string]string{"prefix": strconv.Itoa(r), "world": "3", "local": strconv.Itoa(r), "localworld": "3",
			"master": "127.0.0.1", "job": "job-srun", "coord": "external", "timeout": "1m0s", "secret": "srun-secret-0123456"}
		for k, v := range want {
			if kv[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, kv[k], v)
			}
		}
	}
	for r := range 3 {
		if want := fmt.Sprintf("[%d] stderr of %d\n", r, r); !strings.Contains(j.stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	j.assertNoLeftovers(t)
}

func TestRunSrunRanksRendezvous(t *testing.T) {
	j := newSrunJob(t, 4, "allreduce")
	j.OutputDir = t.TempDir()
	if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for r := range 4 {
		b, err := os.ReadFile(filepath.Join(j.OutputDir, "rank."+strconv.Itoa(r), "stdout"))
		if err != nil || string(b) != "sum=10\n" {
			t.Errorf("rank %d's log: %q, %v", r, b, err)
		}
	}
}

func TestRunSrunNamesTheFirstFailingRank(t *testing.T) {
	j := newSrunJob(t, 3, "fail", "2", "3")
	j.Grace = time.Minute // Slurm's SIGTERM stops the others long before
	code, err, _ := j.run(t, context.Background())
	var re *launch.RankError
	if code != 3 || !errors.As(err, &re) || re.Rank != 2 || re.Host != "fakenode" {
		t.Fatalf("Run = %d, %v; want rank 2's status 3", code, err)
	}
	if want := "ringtail run: rank 2 on fakenode exited with status 3; stopping the other ranks\n"; !strings.Contains(j.stderr.String(), want) {
		t.Errorf("stderr lacks %q", want)
	}
	if strings.Contains(j.stderr.String(), "ringtail-rank-exit") {
		t.Error("the exit marker reached the output")
	}
	if !strings.Contains(j.stderr.String(), "srun: error: fakenode: task 2: Exited with exit code 3\n") {
		t.Error("srun's own message was not passed on")
	}
	j.assertStoppedByTERM(t)
	j.assertNoLeftovers(t)
}

func TestRunSrunEndsAStepSlurmDidNotStop(t *testing.T) {
	// Rank 0 fails; the others ignore the SIGTERM Slurm sends them. After
	// the grace period the launcher has srun end the step.
	j := newSrunJob(t, 3, "ignoreterm", "0", "5")
	j.Grace = 300 * time.Millisecond
	code, err, _ := j.run(t, context.Background())
	if code != 5 || err == nil {
		t.Fatalf("Run = %d, %v; want rank 0's 5", code, err)
	}
	if want := "ringtail run: the " + os.Args[0] + " step did not stop within 300ms; ending it\n"; !strings.Contains(j.stderr.String(), want) {
		t.Errorf("stderr lacks %q", want)
	}
	j.assertNoLeftovers(t)
}

func TestRunSrunCancelStopsTheStep(t *testing.T) {
	j := newSrunJob(t, 2, "block")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if m, _ := filepath.Glob(filepath.Join(j.readyDir, "ready-*")); len(m) == 2 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	code, _, _ := j.run(t, ctx)
	if code != launch.ExitInterrupted || !strings.Contains(j.stderr.String(), "ringtail run: interrupted; stopping the ranks") {
		t.Fatalf("Run = %d", code)
	}
	j.assertNoLeftovers(t)
}

func TestRunSrunFailures(t *testing.T) {
	j := newSrunJob(t, 2, "env")
	j.Srun = []string{filepath.Join(t.TempDir(), "no-srun")}
	if code, err, _ := j.run(t, context.Background()); code != launch.ExitNotFound || err == nil || !strings.Contains(err.Error(), "cannot start") {
		t.Fatalf("no srun: Run = %d, %v", code, err)
	}
	// srun failing by itself (no rank reported anything) is srun's status.
	badSrun := filepath.Join(t.TempDir(), "srun")
	os.WriteFile(badSrun, []byte("#!/bin/sh\necho 'srun: error: Unable to allocate resources: Invalid account' >&2\nexit 1\n"), 0o755)
	j.Srun = []string{badSrun}
	if code, err, _ := j.run(t, context.Background()); code != 1 || err == nil || !strings.Contains(err.Error(), "srun exited with status 1") ||
		!strings.Contains(j.stderr.String(), "srun: error: Unable to allocate resources") {
		t.Fatalf("srun fails: Run = %d, %v", code, err)
	}
	// A command that is not there: the wrapper's sh says so; 127.
	j = newSrunJob(t, 2, "env")
	j.Command = []string{filepath.Join(t.TempDir(), "no-such-program")}
	if code, _, _ := j.run(t, context.Background()); code != launch.ExitNotFound {
		t.Fatalf("missing program: Run = %d", code)
	}
	for name, edit := range map[string]func(*launch.Config){
		"needs the allocation's nodes": func(c *launch.Config) { c.Hosts = nil },
		"must be an absolute path":     func(c *launch.Config) { c.SecretFile, c.Secret = "rel/secret", []byte("sixteen-byte-key") },
		"without the secret":           func(c *launch.Config) { c.SecretFile = "/shared/secret" },
		"must be direct or srun":       func(c *launch.Config) { c.Launcher = "mpirun" },
		"exceeds the 2 slots":          func(c *launch.Config) { c.NP = 3 },
	} {
		c := newSrunJob(t, 2, "env").Config
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate = %v, want mention of %q", err, name)
		}
	}
}

func TestRunSrunPassesTheSecretFileInsteadOfTheSecret(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("from-file-0123456789\n"), 0o600)
	j := newSrunJob(t, 2, "allreduce")
	j.Secret, j.SecretFile = []byte("from-file-0123456789"), secret
	j.Command = []string{"sh", "-c", `[ -z "$RINGTAIL_SECRET" ] && [ "$RINGTAIL_SECRET_FILE" = "$1" ] && exec "$2" "$3" "$4"`, "x", secret, os.Args[0], helperArg, "allreduce"}
	if code, err, _ := j.run(t, context.Background()); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if !strings.Contains(j.stdout.String(), "[1] sum=3") {
		t.Fatal("ranks did not all-reduce with the secret read from the file")
	}
}

// TestSrunStartedRanksNeedNoOtherVariables starts ranks as srun would
// without ringtail run (the fake srun sets only Slurm's variables; the
// secret comes from a file): ConfigFromEnv places them, rank 0 hosts the
// rendezvous on the first node of the list, at the port the job and step
// ids give.
func TestSrunStartedRanksNeedNoOtherVariables(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("direct-secret-0123456\n"), 0o600)
	c := exec.Command(os.Args[0], "--ntasks=3", "--label", "--kill-on-bad-exit=1", os.Args[0], helperArg, "allreduce")
	// A random job id: the rendezvous port derives from it.
	job := strconv.Itoa(1000 + int(time.Now().UnixNano()%1_000_000))
	c.Env = []string{fakeSrunVar + "=1", "PATH=" + os.Getenv("PATH"), ringtail.EnvSecretFile + "=" + secret, "GORACE=atexit_sleep_ms=0",
		"LAUNCH_FAKE_NODE=localhost", "LAUNCH_FAKE_JOB=" + job}
	out, err := c.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if !strings.Contains(string(out), fmt.Sprintf("%d: sum=6\n", r)) {
			t.Errorf("task %d did not all-reduce", r)
		}
	}
}
