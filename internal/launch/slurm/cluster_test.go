//go:build linux

package slurm

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/citest"
	"github.com/ringtail-ml/ringtail/internal/testbed"
)

// The Slurm integration test: a one-node Slurm cluster on this machine
// (munged, slurmctld and slurmd from Debian's slurmd, slurmctld,
// slurm-client and munge packages, which .ci/run installs), on which the
// main job runs under srun, salloc and sbatch. It skips, saying why, when
// not root or when Slurm is not installed. Everything it starts is
// stopped, and its directory removed, when it ends, also on failure; the
// daemons die with the test process (Pdeathsig) if it is killed.

// slurmPrograms are what the test needs installed.
var slurmPrograms = []string{"munged", "slurmctld", "slurmd", "srun", "salloc", "sbatch", "scontrol", "sinfo", "scancel"}

// cluster is a running one-node Slurm cluster.
type cluster struct {
	dir     string
	conf    string
	secret  string // the job secret, on the "shared" file system
	env     []string
	bin     map[string]string // slurmPrograms' paths
	hub     string            // the network namespace of slurmctld and the commands
	daemons []*exec.Cmd
}

// clusterNode is one node of a test cluster.
type clusterNode struct {
	name, addr string
	cpus       int
	netns      string // the network namespace its slurmd runs in ("": this one's)
}

// clusterConfig places a test cluster's daemons.
type clusterConfig struct {
	// ctlAddr is slurmctld's address, in the network namespace hub ("":
	// this one's), where the Slurm commands of the test run too.
	ctlAddr, hub string
	nodes        []clusterNode
}

// oneNode is the cluster of TestSlurmOnThisMachine: localhost, with 4
// CPUs whatever the hardware (SlurmdParameters=config_overrides).
var oneNode = clusterConfig{ctlAddr: "127.0.0.1", nodes: []clusterNode{{name: "localhost", addr: "127.0.0.1", cpus: 4}}}

// inNetns wraps argv to run in the named network namespace (nsenter, not
// `ip netns exec`, which remounts /sys and so hides the cgroup file system
// slurmd looks for).
func inNetns(netns string, argv []string) []string {
	if netns == "" {
		return argv
	}
	return append([]string{"nsenter", "--net=/run/netns/" + netns}, argv...)
}

// requireSlurm skips t unless it runs as root with Slurm installed, and
// returns the paths of slurmPrograms; under CI (CI=true) it fails instead
// (citest.Missing: .ci/run runs as root and installs Slurm).
func requireSlurm(t *testing.T) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		citest.Missing(t, "the Slurm test needs root: slurmd and slurmctld run as root with SlurmUser=root")
	}
	bin := map[string]string{}
	for _, p := range slurmPrograms {
		path, err := exec.LookPath(p)
		if err != nil {
			// The daemons live in /usr/sbin, which a user's PATH may lack.
			if _, serr := os.Stat(filepath.Join("/usr/sbin", p)); serr != nil {
				citest.Missing(t, fmt.Sprintf("Slurm is not installed (%s not found): apt-get install slurmd slurmctld slurm-client munge (.ci/run does)", p))
			}
			path = filepath.Join("/usr/sbin", p)
		}
		bin[p] = path
	}
	return bin
}

// startCluster starts munged, slurmctld and a slurmd per node with a
// generated configuration — select/cons_tres, no accounting,
// proctrack/linuxproc, every file under a temporary directory — and waits
// until every node is idle.
func startCluster(t *testing.T, cc clusterConfig) *cluster {
	t.Helper()
	bin := requireSlurm(t)
	sweepStaleClusters()
	dir, err := os.MkdirTemp("", "ringtail-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), secret: filepath.Join(dir, "shared", "job.secret"), bin: bin, hub: cc.hub}
	t.Cleanup(c.stop)
	dirs := []string{"munge", "state", "log", "shared"}
	for _, n := range cc.nodes {
		dirs = append(dirs, filepath.Join("spool", n.name))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	rand.Read(key)
	secret := make([]byte, 32)
	rand.Read(secret)
	if err := os.WriteFile(filepath.Join(dir, "munge", "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.secret, fmt.Appendf(nil, "%x\n", secret), 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "munge", "munge.sock")
	c.daemon(t, "", "munged", "--foreground", "--force", "--key-file="+filepath.Join(dir, "munge", "munge.key"), "--socket="+socket,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "seed"))
	c.await(t, "munged's socket", func() bool { _, err := os.Stat(socket); return err == nil })

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	// A random first job id: the ranks' rendezvous port derives from the
	// job id, and another run of this test may share the machine.
	firstJob := 1000 + mrand.IntN(1_000_000)
	conf := fmt.Sprintf(`ClusterName=ringtail
SlurmctldHost=%s(%s)
SlurmctldPort=%d
SlurmdPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%s
StateSaveLocation=%s
SlurmdSpoolDir=%s/%%n
SlurmctldPidFile=%s
SlurmdPidFile=%s/slurmd-%%n.pid
SlurmctldLogFile=%s
SlurmdLogFile=%s/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
FirstJobId=%d
KillWait=5
`, host, cc.ctlAddr, freePort(t), freePort(t), socket, filepath.Join(dir, "state"), filepath.Join(dir, "spool"),
		filepath.Join(dir, "slurmctld.pid"), dir, filepath.Join(dir, "log", "slurmctld.log"), filepath.Join(dir, "log"), firstJob)
	var names []string
	for _, n := range cc.nodes {
		conf += fmt.Sprintf("NodeName=%s NodeHostname=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n", n.name, n.name, n.addr, n.cpus)
		names = append(names, n.name)
	}
	conf += "PartitionName=debug Nodes=" + strings.Join(names, ",") + " Default=YES MaxTime=INFINITE State=UP\n"
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "RINGTAIL_") {
			c.env = append(c.env, kv)
		}
	}
	c.env = append(c.env, "SLURM_CONF="+c.conf, "RINGTAIL_SECRET_FILE="+c.secret)
	c.daemon(t, cc.hub, "slurmctld", "-D", "-f", c.conf)
	for _, n := range cc.nodes {
		c.daemon(t, n.netns, "slurmd", "-D", "-N", n.name, "-f", c.conf)
	}
	c.await(t, "the nodes to be idle", func() bool {
		out, _ := c.command(context.Background(), "sinfo", "-h", "-N", "-o", "%T").Output()
		states := strings.Fields(string(out))
		return len(states) == len(cc.nodes) && !slices.ContainsFunc(states, func(s string) bool { return s != "idle" })
	})
	return c
}

// sweepStaleClusters removes the directories of clusters whose test
// process died without cleaning up (killed by go test's -timeout, say;
// the daemons died with it), after killing what still runs from them.
func sweepStaleClusters() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "ringtail-slurm-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		pid, _ := strconv.Atoi(string(b))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue // not ours, or its owner lives
		}
		for _, p := range processesWith([]byte(dir)) {
			syscall.Kill(p, syscall.SIGKILL)
		}
		os.RemoveAll(dir)
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// daemon starts a daemon in the foreground in network namespace netns,
// its output in log/NAME-N.out.
func (c *cluster) daemon(t *testing.T, netns, name string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(c.dir, "log", fmt.Sprintf("%s-%d.out", name, len(c.daemons))))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	argv := inNetns(netns, append([]string{c.bin[name]}, args...))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(c.env, "RINGTAIL_SLURM_TEST="+c.dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c.daemons = append(c.daemons, cmd)
}

// await polls ready (an outside daemon's state) for up to a minute.
func (c *cluster) await(t *testing.T, what string, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ready(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s\n%s", what, c.logs())
		}
		for _, d := range c.daemons {
			if d.ProcessState != nil {
				t.Fatalf("%s exited\n%s", d.Path, c.logs())
			}
		}
	}
}

// logs returns the end of every daemon's log.
func (c *cluster) logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.dir, "log", "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(f), data)
	}
	return b.String()
}

// command is a command against the cluster: a Slurm client, or a path.
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if path, ok := c.bin[name]; ok {
		name = path
	}
	argv := inNetns(c.hub, append([]string{name}, args...))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = c.env
	cmd.Dir = c.dir
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs a command against the cluster for at most two minutes and
// returns its status, stdout and stderr.
func (c *cluster) run(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	t.Logf("$ %s %s\n(status %d, %v, %.1fs)\nstdout:\n%sstderr:\n%s", name, strings.Join(args, " "), code, err, time.Since(start).Seconds(), stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// stop cancels every job, stops the daemons (SIGTERM, SIGKILL after 10s),
// kills whatever else still carries the cluster's directory in its
// environment (slurmstepd, tasks) and removes the directory.
func (c *cluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(c.daemons) > 1 {
		c.command(ctx, "scancel", "--user=root").Run()
	}
	for _, d := range slices.Backward(c.daemons) {
		syscall.Kill(-d.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-d.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	for _, pid := range processesWith([]byte(c.dir)) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	os.RemoveAll(c.dir)
}

// processesWith lists the processes (but this one) whose environment or
// command line holds marker.
func processesWith(marker []byte) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			if b, _ := os.ReadFile(filepath.Join(d, f)); bytes.Contains(b, marker) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// binaries builds bin/ringtail and bin/ringtail-train once per test
// binary, with -race when this test is (so that `go test -race` reuses
// its build cache), into a directory TestMain removes.
var binaries = sync.OnceValues(func() ([2]string, error) {
	dir, err := os.MkdirTemp("", "ringtail-slurm-bin-")
	if err != nil {
		return [2]string{}, err
	}
	binDir = dir
	// Swept like a cluster's directory if this process is killed.
	os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	bins := [2]string{filepath.Join(dir, "ringtail"), filepath.Join(dir, "ringtail-train")}
	for i, pkg := range []string{"./cmd/ringtail", "./cmd/ringtail-train"} {
		args := []string{"build", "-o", bins[i]}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool, append(args, pkg)...)
		cmd.Dir = filepath.Join("..", "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			return bins, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return bins, nil
})

// binDir is where binaries built them ("" until it runs).
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinaries returns the built bin/ringtail and bin/ringtail-train,
// failing t if they cannot be built.
func buildBinaries(t *testing.T) (ringtail, train string) {
	t.Helper()
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	return bins[0], bins[1]
}

// paramsLine matches ringtail-train's summary: the world size and the
// hash of the trained parameters.
var paramsLine = regexp.MustCompile(`done: world (\d+) .* params ([0-9a-f]+) \(identical on all ranks\)`)

// trained returns the world size and parameter hash of a ringtail-train
// run's output, failing t if there is none.
func trained(t *testing.T, out string) (int, string) {
	t.Helper()
	m := paramsLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in the output")
	}
	n, _ := strconv.Atoi(m[1])
	return n, m[2]
}

func TestSlurmOnThisMachine(t *testing.T) {
	start := time.Now()
	c := startCluster(t, oneNode)
	t.Logf("cluster up in %.1fs", time.Since(start).Seconds())
	start = time.Now()
	ringtail, train := buildBinaries(t)
	t.Logf("binaries built in %.1fs", time.Since(start).Seconds())
	// Synchronous SGD (bsp) is deterministic: every way of starting the 4
	// ranks must train the same parameters.
	// The ring on every run: across the two nodes the decision point would
	// otherwise choose the two-level allreduce, whose sums round in another
	// order than the one-host ring's, and the parameters would differ in
	// their last bits.
	trainArgs := []string{"env", "RINGTAIL_ALGORITHM=ring", train, "--epochs", "1", "--step-compute", "0", "--mode", "bsp"}

	t.Run("scontrol expands host lists as ExpandHostList does", func(t *testing.T) {
		for _, tc := range hostListCases {
			out, err := c.command(context.Background(), "scontrol", "show", "hostnames", tc.in).Output()
			if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("scontrol show hostnames %q = %q, %v; ExpandHostList says %q", tc.in, got, err, tc.want)
			}
		}
		for _, in := range []string{"n[3-1]", "n[]", "n[a-b]", "n[0-99999999999]"} {
			out, _ := c.command(context.Background(), "scontrol", "show", "hostnames", in).CombinedOutput()
			if !strings.Contains(string(out), "Invalid hostlist") {
				t.Errorf("scontrol accepts %q, which ExpandHostList refuses: %s", in, out)
			}
		}
	})

	// The reference: the same job under ringtail run's direct launcher.
	code, stdout, _ := c.run(t, ringtail, append([]string{"run", "--launcher", "direct", "-np", "4", "--"}, trainArgs...)...)
	if code != 0 {
		t.Fatalf("direct run: status %d", code)
	}
	_, want := trained(t, stdout)

	t.Run("srun -n 4 ringtail-train", func(t *testing.T) {
		// No ringtail variables but the secret file: the ranks read
		// Slurm's.
		code, stdout, _ := c.run(t, "srun", append([]string{"-n", "4"}, trainArgs...)...)
		if world, params := trained(t, stdout); code != 0 || world != 4 || params != want {
			t.Fatalf("status %d, world %d, params %s; want 0, 4, %s", code, world, params, want)
		}
	})

	t.Run("salloc -n 4 ringtail run", func(t *testing.T) {
		code, stdout, _ := c.run(t, "salloc", append([]string{"-n", "4", ringtail, "run", "--verbose", "--"}, trainArgs...)...)
		if world, params := trained(t, stdout); code != 0 || world != 4 || params != want || !strings.Contains(stdout, "[0] ringtail-train: world 4") {
			t.Fatalf("status %d, world %d, params %s; want 0, 4, %s, lines prefixed by rank", code, world, params, want)
		}
		code, stdout, _ = c.run(t, "salloc", "-n", "3", ringtail, "run", "--", "sh", "-c",
			`echo "$RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE $MASTER_ADDR $RINGTAIL_COORDINATOR $SLURM_STEP_NUM_TASKS"`)
		for r := range 3 {
			if line := fmt.Sprintf("[%d] %d/3 %d/3 127.0.0.1 external 3\n", r, r, r); code != 0 || !strings.Contains(stdout, line) {
				t.Errorf("status %d; stdout lacks %q", code, line)
			}
		}
	})

	t.Run("sbatch ringtail run", func(t *testing.T) {
		out := filepath.Join(c.dir, "shared", "batch.out")
		script := fmt.Sprintf("exec %s run -- %s", ringtail, strings.Join(trainArgs, " "))
		code, stdout, _ := c.run(t, "sbatch", "--parsable", "-n", "4", "-o", out, "--wrap", script)
		if code != 0 {
			t.Fatalf("sbatch: status %d", code)
		}
		// sbatch --wait polls every ten seconds or so; ask more often.
		job, state := strings.TrimSpace(stdout), ""
		c.await(t, "job "+job+" to end", func() bool {
			b, _ := c.command(context.Background(), "scontrol", "-o", "show", "job", job).Output()
			m := regexp.MustCompile(`JobState=(\w+)`).FindSubmatch(b)
			if m != nil {
				state = string(m[1])
			}
			return !slices.Contains([]string{"", "PENDING", "CONFIGURING", "RUNNING", "COMPLETING"}, state)
		})
		log, err := os.ReadFile(out)
		t.Logf("job %s %s; %s:\n%s", job, state, out, log)
		if err != nil || state != "COMPLETED" {
			t.Fatalf("job %s: %s, %v", job, state, err)
		}
		if world, params := trained(t, string(log)); world != 4 || params != want {
			t.Fatalf("world %d, params %s; want 4, %s", world, params, want)
		}
	})

	t.Run("a failing rank stops the step and sets the status", func(t *testing.T) {
		// The others sleep ten minutes, past run's two-minute limit (which
		// would kill salloc: status -1): status 3 means they were stopped.
		code, _, stderr := c.run(t, "salloc", "-n", "3", ringtail, "run", "--", "sh", "-c",
			`if [ "$RANK" = 1 ]; then sleep 0.5; exit 3; fi; exec sleep 600`)
		if code != 3 || !strings.Contains(stderr, "ringtail run: rank 1 on localhost exited with status 3; stopping the other ranks") {
			t.Fatalf("status %d; want 3 and a notice naming rank 1", code)
		}
	})
}

// TestSlurmAcrossHosts runs a two-node Slurm cluster on the namespace test
// bed (internal/testbed): slurmctld and the Slurm commands in the hub,
// one slurmd in each host namespace, the node names being the hosts'
// addresses (nothing else resolves them). Ranks on the two nodes reach
// each other, and the launcher in the hub, over TCP through the bed's
// links.
func TestSlurmAcrossHosts(t *testing.T) {
	requireSlurm(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		citest.Missing(t, "nsenter (util-linux) not found")
	}
	b := testbed.ForTest(t, false, testbed.Config{Hosts: 2})
	cc := clusterConfig{ctlAddr: b.HubAddr().String(), hub: b.HubName()}
	for _, h := range b.Hosts() {
		cc.nodes = append(cc.nodes, clusterNode{name: h.Addr.String(), addr: h.Addr.String(), cpus: 2, netns: h.Name})
	}
	c := startCluster(t, cc)
	ringtail, train := buildBinaries(t)
	// The ring on every run: across the two nodes the decision point would
	// otherwise choose the two-level allreduce, whose sums round in another
	// order than the one-host ring's, and the parameters would differ in
	// their last bits.
	trainArgs := []string{"env", "RINGTAIL_ALGORITHM=ring", train, "--epochs", "1", "--step-compute", "0", "--mode", "bsp"}
	first, second := cc.nodes[0].name, cc.nodes[1].name

	code, stdout, _ := c.run(t, ringtail, append([]string{"run", "--launcher", "direct", "-np", "4", "--"}, trainArgs...)...)
	if code != 0 {
		t.Fatalf("direct run: status %d", code)
	}
	_, want := trained(t, stdout)

	t.Run("srun -N 2 -n 4 ringtail-train", func(t *testing.T) {
		code, stdout, _ := c.run(t, "srun", append([]string{"-N", "2", "-n", "4"}, trainArgs...)...)
		if world, params := trained(t, stdout); code != 0 || world != 4 || params != want {
			t.Fatalf("status %d, world %d, params %s; want 0, 4, %s", code, world, params, want)
		}
	})

	t.Run("salloc -N 2 -n 4 ringtail run", func(t *testing.T) {
		code, stdout, _ := c.run(t, "salloc", "-N", "2", "-n", "4", ringtail, "run", "--", "sh", "-c",
			`echo "$RANK $LOCAL_RANK/$LOCAL_WORLD_SIZE $SLURMD_NODENAME $MASTER_ADDR"`)
		for r := range 4 {
			node := map[bool]string{true: first, false: second}[r < 2]
			if line := fmt.Sprintf("[%d] %d %d/2 %s %s\n", r, r, r%2, node, b.HubAddr()); code != 0 || !strings.Contains(stdout, line) {
				t.Errorf("status %d; stdout lacks %q", code, line)
			}
		}
		code, stdout, _ = c.run(t, "salloc", append([]string{"-N", "2", "-n", "4", ringtail, "run", "--"}, trainArgs...)...)
		if world, params := trained(t, stdout); code != 0 || world != 4 || params != want {
			t.Fatalf("status %d, world %d, params %s; want 0, 4, %s", code, world, params, want)
		}
	})
}
