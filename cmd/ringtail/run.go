package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/job"
	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
	"github.com/ringtail-ml/ringtail/internal/logging"
)

const runUsage = `Usage: ringtail run -np N [-H host:slots,... | --hostfile F] [flags] [--] CMD ARGS...
       ringtail run --elastic -np N [--min-np N] [--max-np N] [-H ... | --hostfile F | --host-discovery-script S] [flags] [--] CMD ARGS...

Starts N ranks of CMD with the rendezvous coordinator in this process and
waits for them. Ranks fill the hosts' slots in list order; N may be less
than the slots (the last hosts then get fewer ranks or none). Each rank gets RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, RINGTAIL_SECRET,
RINGTAIL_JOB_ID and RINGTAIL_COORDINATOR=external; its output lines are
prefixed with "[rank] ". Ranks on hosts other than this one start over
ssh. When a rank fails, the others are stopped (SIGTERM, SIGKILL after
--grace) and ringtail run exits with its status. See docs/launcher.md.

Inside a Slurm allocation (salloc, sbatch) and without -H or --hostfile,
the ranks start as one job step with srun, on the allocation's nodes; -np
defaults to its tasks (SLURM_NTASKS). See docs/slurm.md.

With --elastic (Horovod's elastic semantics) the job continues while
ranks come and go, between --min-np and --max-np: -np is how many the
first generation waits for, the hosts come from -H, --hostfile or
--host-discovery-script (polled), a rank that crashes takes its host out
of the job, new hosts get ranks, and a lost rank's data shards go back to
TODO. The ranks must be elastic (ringtail-train is, under
RINGTAIL_ELASTIC=1). See docs/launcher.md and docs/elastic.md.

-x NAME and --env K=V (both repeatable) pass variables to every rank;
--dashboard ADDR, --metrics-port P and --timeline FILE watch the job (see
docs/observability.md).
`

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runLaunch is `ringtail run`.
func runLaunch(args []string, stdout, stderr io.Writer) int {
	ctx, stop := interruptContext()
	code := launchMain(ctx, args, stdout, stderr)
	if sig := stop(); sig != nil && code == launch.ExitInterrupted {
		code = 128 + int(sig.(syscall.Signal))
	}
	return code
}

// launchMain parses the flags of `ringtail run` into a launch.Config and
// runs it until ctx ends.
func launchMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail run", runUsage)
	fs := cmd.Flags
	var (
		np            = fs.Int("np", 0, "number of ranks, at most the total slots of -H or --hostfile, filled in host order (default: all the slots)")
		hostList      = fs.String("H", "", "comma-separated `host:slots` list, e.g. gpu1:4,gpu2:4 (default: all ranks on this host)")
		hostfile      = fs.String("hostfile", "", "a `file` of lines \"host slots=N\"")
		secretFile    = fs.String("secret-file", "", "read the job secret from `file` (default: $RINGTAIL_SECRET, $RINGTAIL_SECRET_FILE, else random)")
		timeout       = fs.Duration("timeout", 0, "the ranks' operation timeout, RINGTAIL_TIMEOUT (default: the runtime's)")
		bindTo        = fs.String("bind-to", "core", "core: bind each local rank of a host with several to one CPU, CPUs shared evenly when ranks outnumber them (like mpirun's default); none: no binding. Remote ranks are not bound")
		controlPlane  = fs.String("control-plane", "libp2p", "how ranks reach the rendezvous: libp2p (Noise, coordinator identity derived from the secret) or tcp (HMAC-authenticated)")
		grace         = fs.Duration("grace", launch.DefaultGrace, "time stopped ranks have between SIGTERM and SIGKILL")
		masterAddr    = fs.String("master-addr", "", "this host's `address` as the ranks reach it (default: 127.0.0.1 for local jobs, else the address routing to the first remote host)")
		masterPort    = fs.Int("master-port", 0, "the coordinator's `port` (default: a free one)")
		sshCmd        = fs.String("ssh", strings.Join(launch.DefaultSSH(), " "), "the ssh `command` for remote hosts, split on spaces; the host and the rank's command are appended (e.g. \"ip netns exec\" with hosts named after network namespaces)")
		sshMode       = fs.String("ssh-mode", launch.SSHModeAuto, "how the rank's command is appended to --ssh: shell (one command line for the remote login shell, as ssh wants), exec (separate words, for ip netns exec, docker exec), auto (shell when a word of --ssh names an ssh program)")
		startTimeout  = fs.Duration("start-timeout", 0, "how long the ranks have to start and meet at the rendezvous, RINGTAIL_CONNECT_TIMEOUT (default: the runtime's)")
		outputDir     = fs.String("output-filename", "", "also write each rank's output to `DIR`/rank.N/stdout and stderr")
		nics          = fs.String("network-interface", "", "pin the ranks' data plane to the first of these comma-separated network `interfaces` that has an IPv4 address on each host (sets RINGTAIL_LISTEN_IP)")
		verbose       = fs.Bool("verbose", false, "log rank starts and exits to stderr")
		launcher      = fs.String("launcher", "auto", "how ranks start: direct (local processes, ssh for remote hosts), srun (one Slurm job step in the allocation this runs in), auto (srun in a Slurm batch script or salloc shell when no -H or --hostfile is given, else direct)")
		srunCmd       = fs.String("srun", strings.Join(launch.DefaultSrun(), " "), "the srun `command` and extra flags for the job step, split on spaces (e.g. \"srun --gpus-per-task=1\")")
		metricsPort   = fs.Int("metrics-port", 0, "every rank serves Prometheus /metrics and the dashboard's /events on `port` + its local rank (RINGTAIL_METRICS_ADDR; default with --dashboard: free ports)")
		timeline      = fs.String("timeline", "", "each rank writes a Chrome-trace/Perfetto timeline (RINGTAIL_TIMELINE); at exit they are merged, clocks aligned, into `FILE`")
		dashboard     = fs.String("dashboard", "", "serve the live dashboard on `ADDR` (host:port) while the job runs")
		envs, exports listFlag

		elasticMode    = fs.Bool("elastic", false, "run an elastic job: ranks come and go between --min-np and --max-np (Horovod's semantics; see docs/launcher.md)")
		minNP          = fs.Int("min-np", 0, "with --elastic: the fewest ranks the job continues with (default -np)")
		maxNP          = fs.Int("max-np", 0, "with --elastic: the most ranks the job runs (default: every slot of the hosts; unbounded with a discovery script)")
		discovery      = fs.String("host-discovery-script", "", "with --elastic: a `command` (run with sh -c every --discovery-interval) that prints the hosts available now, one \"host[:slots]\" per line")
		slotsPerHost   = fs.Int("slots-per-host", 1, "with --elastic: the slots of a discovered host listed without a count")
		discInterval   = fs.Duration("discovery-interval", job.DefaultDiscoveryInterval, "with --elastic: how often the host discovery script runs")
		elasticTimeout = fs.Duration("elastic-timeout", job.DefaultElasticTimeout, "with --elastic: how long the job waits for --min-np ranks (at start-up and after losing ranks) before it fails")
		maxRestarts    = fs.Int("max-restarts", 0, "with --elastic: restarts of a crashed rank on its own host before the host is blacklisted (0: blacklisted at once, as horovodrun does)")
		stateDir       = fs.String("elastic-state-dir", "", "with --elastic: keep the data-shard service's write-ahead log in `DIR` (default: .ringtail/JOB-ID/shards under the working directory, kept after the job)")
		elasticJobID   = fs.String("job-id", "", "with --elastic: the job's `ID` (default: a random one, printed at start); a launcher restarted with the same ID resumes the shard state it kept")
	)
	fs.StringVar(nics, "nics", "", "the same as --network-interface")
	fs.Var(&envs, "env", "set `K=V` for every rank (repeatable)")
	fs.Var(&exports, "x", "export `NAME` (or NAME=VALUE) from this environment to every rank, remote ones included (repeatable)")
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringtail run: "+format+"\n", a...)
		return launch.ExitUsage
	}
	if code, ok := cmd.ParseArgs(args, stdout, stderr); !ok {
		return code
	}
	command := fs.Args()
	if len(command) == 0 {
		return usageErr("no command given: ringtail run -np N [flags] -- CMD ARGS...")
	}
	set := cmd.Given()
	if set["np"] && *np < 1 {
		return usageErr("-np %d: a job needs at least one rank, e.g. -np 4", *np)
	}
	if !*elasticMode {
		for _, name := range []string{"min-np", "max-np", "host-discovery-script", "slots-per-host", "discovery-interval", "elastic-timeout", "max-restarts", "elastic-state-dir", "job-id"} {
			if set[name] {
				return usageErr("--%s needs --elastic", name)
			}
		}
	}

	var hosts []launch.HostSlots
	switch {
	case *hostList != "" && *hostfile != "":
		return usageErr("give -H or --hostfile, not both")
	case *hostList != "":
		h, err := launch.ParseHosts(*hostList)
		if err != nil {
			return usageErr("-H: %v", err)
		}
		hosts = h
	case *hostfile != "":
		f, err := os.Open(*hostfile)
		if err != nil {
			return usageErr("--hostfile: %v", err)
		}
		h, err := launch.ParseHostfile(f)
		f.Close()
		if err != nil {
			return usageErr("--hostfile %s: %v", *hostfile, err)
		}
		hosts = h
	}
	if len(strings.Fields(*sshCmd)) == 0 {
		return usageErr("--ssh is empty")
	}
	if *elasticMode {
		for _, name := range []string{"launcher", "srun", "dashboard", "metrics-port", "timeline", "output-filename", "network-interface", "nics", "start-timeout", "control-plane", "bind-to"} {
			if set[name] {
				return usageErr("--%s is not supported with --elastic", name)
			}
		}
		secret, err := jobSecret(*secretFile)
		if err != nil {
			return usageErr("%v", err)
		}
		return launchElastic(ctx, job.Config{
			NP: *np, MinNP: *minNP, MaxNP: *maxNP, Hosts: hosts, DiscoveryScript: *discovery, DiscoveryInterval: *discInterval,
			SlotsPerHost: *slotsPerHost, Command: command, Secret: secret, Timeout: *timeout, ElasticTimeout: *elasticTimeout,
			MaxRestarts: *maxRestarts, Grace: *grace, MasterAddr: *masterAddr, MasterPort: *masterPort, SSH: strings.Fields(*sshCmd),
			SSHMode: *sshMode, StateDir: *stateDir, JobID: *elasticJobID, Stdout: stdout, PrefixOutput: true, Name: "ringtail run",
		}, envs, exports, *verbose, stderr)
	}
	if len(strings.Fields(*srunCmd)) == 0 {
		return usageErr("--srun is empty")
	}
	alloc, inSlurm, err := slurm.AllocationFromLookup(os.LookupEnv)
	switch *launcher {
	case "auto":
		*launcher = launch.LauncherDirect
		// Not inside a job step: a nested srun would wait for the step's
		// own CPUs.
		if inSlurm && hosts == nil && !alloc.InStep() {
			*launcher = launch.LauncherSrun
		}
	case launch.LauncherDirect:
	case launch.LauncherSrun:
		if hosts != nil {
			return usageErr("--launcher srun takes the hosts from Slurm: leave out -H and --hostfile")
		}
		if !inSlurm {
			return usageErr("--launcher srun: not inside a Slurm allocation (%s and %s are not set); run it under salloc or sbatch", slurm.EnvJobID, slurm.EnvJobNodeList)
		}
	default:
		return usageErr("--launcher %q must be auto, direct or srun", *launcher)
	}
	if *launcher == launch.LauncherSrun {
		if err != nil {
			return usageErr("%v", err)
		}
		for i, node := range alloc.Nodes {
			hosts = append(hosts, launch.HostSlots{Host: node, Slots: alloc.Tasks[i]})
		}
		if *np == 0 {
			*np = alloc.NTasks
		} else if *np > alloc.NTasks {
			return usageErr("-np %d exceeds the %d tasks of Slurm job %s (%s)", *np, alloc.NTasks, alloc.JobID, slurm.EnvNTasks)
		}
	}
	if *grace <= 0 {
		return usageErr("--grace %v must be positive", *grace)
	}
	if *np == 0 {
		if hosts == nil {
			return usageErr("-np is required: the number of ranks, e.g. -np 4 (or give hosts with -H or --hostfile)")
		}
		*np = launch.TotalSlots(hosts)
	}
	if *startTimeout < 0 {
		return usageErr("--start-timeout %v must not be negative", *startTimeout)
	}
	var interfaces []string
	for _, name := range strings.Split(*nics, ",") {
		if name = strings.TrimSpace(name); name != "" {
			interfaces = append(interfaces, name)
		}
	}

	secret, err := jobSecret(*secretFile)
	if err != nil {
		return usageErr("%v", err)
	}
	if len(secret) == 0 {
		// The random secret launch.Run would make, made here: the
		// dashboard derives the ranks' endpoint token from it.
		if secret, err = launch.NewSecret(); err != nil {
			return usageErr("%v", err)
		}
	}
	var sharedSecretFile string
	if *launcher == launch.LauncherSrun {
		sharedSecretFile = secretFilePath(*secretFile)
	}

	env := append([]string{}, envs...)
	for _, x := range exports {
		if strings.Contains(x, "=") {
			env = append(env, x)
			continue
		}
		v, ok := os.LookupEnv(x)
		if !ok {
			return usageErr("-x %s: not set in this environment", x)
		}
		env = append(env, x+"="+v)
	}

	// The launcher's log and the ranks' stderr lines share stderr: one
	// lock keeps every line whole.
	errw := zerolog.SyncWriter(stderr)
	// Ranks write to pipes the launcher reads, so on their own they would
	// log JSON: they log as the launcher does, one format in one stream.
	logger, logFormat, err := logging.ForJob(os.LookupEnv, errw, logging.IsTerminal(stderr), *verbose)
	if err != nil {
		return usageErr("%v", err)
	}
	env = append([]string{logFormat}, env...) // --env and -x may override it
	obsv, err := startObservability(*dashboard, *metricsPort, *timeline, *np, hosts, secret, errw)
	if err != nil {
		return usageErr("%v", err)
	}
	defer obsv.close()
	cfg := launch.Config{
		NP: *np, Hosts: hosts, Command: command, Env: env, Secret: secret,
		Timeout: *timeout, Grace: *grace, ControlPlane: *controlPlane, BindTo: *bindTo, MasterAddr: *masterAddr, MasterPort: *masterPort, SSH: strings.Fields(*sshCmd),
		SSHMode: *sshMode, StartTimeout: *startTimeout, Interfaces: interfaces, OutputDir: *outputDir,
		Launcher: *launcher, Srun: strings.Fields(*srunCmd), SecretFile: sharedSecretFile,
		Stdout: stdout, Stderr: errw, PrefixOutput: true, Name: "ringtail run", Logger: logger, Hint: launch.PythonHints(command),
		MetricsPort: obsv.metricsPort, Timeline: obsv.timeline,
	}
	code, _ := launch.Run(ctx, cfg) // Run has written its failure to stderr
	obsv.finish(*np)
	return code
}

// secretFilePath is the absolute path of the file the job secret was read
// from (--secret-file, else $RINGTAIL_SECRET_FILE when $RINGTAIL_SECRET is
// unset, as jobSecret reads them), or "" when it did not come from a
// file. Under srun the ranks read it there instead of receiving the secret.
func secretFilePath(secretFile string) string {
	if secretFile == "" && os.Getenv(launch.EnvSecret) == "" {
		secretFile = os.Getenv(launch.EnvSecretFile)
	}
	if secretFile == "" {
		return ""
	}
	abs, err := filepath.Abs(secretFile)
	if err != nil {
		return ""
	}
	return abs
}

// interruptContext returns a context that ends on the first SIGINT or
// SIGTERM, and a function that stops listening and returns the signal
// that arrived (nil if none).
func interruptContext() (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	quit, got := make(chan struct{}), make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-ch:
			cancel(fmt.Errorf("received %v", s))
			got <- s
		case <-quit:
			got <- nil
		}
	}()
	return ctx, func() os.Signal {
		signal.Stop(ch)
		close(quit)
		s := <-got
		cancel(nil)
		return s
	}
}
