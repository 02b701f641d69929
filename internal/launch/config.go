package launch

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// DefaultGrace is how long stopped ranks have between SIGTERM and SIGKILL
// when Config.Grace is zero.
const DefaultGrace = 5 * time.Second

// DefaultName prefixes the launcher's notices when Config.Name is empty.
const DefaultName = "ringtail run"

// MaxRanks bounds Config.NP.
const MaxRanks = 1 << 16

// Config describes one job for Run. Only NP and Command are required: the
// zero value of every other field starts NP local ranks with a random
// secret and job id and discards their output.
type Config struct {
	// BindTo is "core" (the default, also ""): each local rank is bound to
	// one CPU when the ranks of the host fit its CPUs, as OpenMPI binds by
	// default; "none" leaves the scheduler free.
	BindTo string
	// ControlPlane is "libp2p" (the default, also "") or "tcp": how the
	// ranks reach the launcher's rendezvous (see the root package's
	// Config.ControlPlane); the ranks are told which.
	ControlPlane string
	// NP is the number of ranks.
	NP int
	// Hosts places the ranks, up to Slots consecutive ranks per host,
	// filling the hosts in list order (horovodrun's rule): their slots
	// must add up to at least NP, and hosts past the NP-th slot get no
	// rank. Empty: every rank runs on the launcher host. Hosts named
	// localhost, 127.0.0.1, ::1 or the launcher's host name run as local
	// processes, the others through SSH.
	Hosts []HostSlots
	// Command is the program and its arguments, the same for every rank.
	Command []string
	// Launcher is how the ranks start: LauncherDirect ("" too), local
	// processes and SSH for remote hosts; or LauncherSrun, one Slurm job
	// step started with Srun inside the allocation whose nodes and tasks
	// Hosts lists (slurm.AllocationFromLookup; at least NP tasks). With
	// srun, Slurm places the ranks and binds them (BindTo, SSH and
	// SSHMode do not apply) and stops them when one fails.
	Launcher string
	// Srun is the srun command and any flags of the user's for the job
	// step (`srun --gpus-per-task=1`); empty: DefaultSrun. See
	// SrunCommand for the flags Run adds.
	Srun []string
	// SecretFile, with LauncherSrun, is an absolute path holding Secret on
	// every node (a shared file system): the ranks get
	// RINGTAIL_SECRET_FILE instead of the secret itself travelling in
	// srun's environment, through Slurm's unencrypted launch messages.
	// Ignored by the direct launcher.
	SecretFile string
	// Env holds extra K=V pairs for every rank. Local ranks inherit the
	// launcher's environment as well; remote ranks get only these and the
	// contract variables, so export what they need here (`-x NAME`). The
	// contract variables (RANK, MASTER_ADDR, RINGTAIL_SECRET, ...) cannot
	// be set here.
	Env []string
	// Dir is the ranks' working directory (remote ranks cd to it); empty:
	// the launcher's.
	Dir string
	// Secret is the job secret, passed to the ranks as RINGTAIL_SECRET;
	// empty: a random one (NewSecret). It must be one line of text.
	Secret []byte
	// JobID is passed as RINGTAIL_JOB_ID; empty: a random one (NewJobID).
	JobID string
	// Timeout is passed as RINGTAIL_TIMEOUT, the ranks' operation timeout;
	// zero leaves the ranks' default.
	Timeout time.Duration
	// Grace is how long ranks being stopped have between SIGTERM and
	// SIGKILL; zero means DefaultGrace.
	Grace time.Duration
	// MasterAddr is the launcher-host address the ranks dial for the
	// rendezvous (MASTER_ADDR). Empty: 127.0.0.1 when every rank is
	// local, else the local address that routes to the first remote host.
	// The coordinator listens on loopback when MasterAddr is a loopback
	// address, on every interface otherwise.
	MasterAddr string
	// MasterPort is the coordinator's port; zero picks a free one.
	MasterPort int
	// SSH is the ssh client command for remote hosts (DefaultSSH if
	// empty); the host and the remote command are appended to it.
	SSH []string
	// SSHMode says how the remote command is appended to SSH:
	// SSHModeShell (one command line for a remote login shell, as ssh
	// wants: SSHCommand), SSHModeExec (separate words, for agents that run
	// a program: `ip netns exec`, `docker exec`; ExecCommand) or
	// SSHModeAuto ("" too; see AgentExecs).
	SSHMode string
	// StartTimeout bounds how long the ranks have to start and meet at
	// the rendezvous: it is passed to every rank as
	// RINGTAIL_CONNECT_TIMEOUT, after which a rank that is still waiting
	// for the others fails, and with it the job. Zero leaves the ranks'
	// default.
	StartTimeout time.Duration
	// Interfaces pins every rank's data plane to a network interface (the
	// first of the list that has an IPv4 address on the rank's host): the
	// rank gets RINGTAIL_LISTEN_IP, its data plane's bind and advertised
	// address. Local ranks' addresses are looked up by the launcher,
	// remote ranks' by their ssh-side script (with `ip`). Empty: the
	// ranks' default (the address that routes to MASTER_ADDR).
	Interfaces []string
	// OutputDir, when set, also writes each rank's output to
	// OutputDir/rank.N/stdout and OutputDir/rank.N/stderr (N zero-padded
	// to the width of the largest rank, as horovodrun does), unprefixed;
	// the directories are created. Stdout and Stderr still get every line.
	OutputDir string
	// Stdout and Stderr receive the ranks' output lines (nil: discarded),
	// each line in exactly one Write call; Stderr also receives the
	// launcher's notices ("<Name>: rank 2 exited with status 3; stopping
	// the other ranks").
	Stdout io.Writer
	Stderr io.Writer
	// PrefixOutput prefixes every output line with "[rank] ".
	PrefixOutput bool
	// Hint, if set, is asked about each line a rank writes to stderr
	// (without the prefix); a non-empty answer is written to Stderr after
	// it, as "<Name>: rank R: <hint>", once per job however many ranks
	// give it (PythonHints: what to do when a rank's python lacks torch or
	// ringtail_torch). Called from the goroutines copying the ranks'
	// output.
	Hint func(line string) string
	// Name starts the launcher's notices; empty means DefaultName.
	Name string
	// Logger receives structured logs (rank starts and exits at debug
	// level); the zero value discards them.
	Logger zerolog.Logger
	// MetricsPort, when set, has every rank serve its metrics and event
	// stream on port MetricsPort + its local rank (RINGTAIL_METRICS_ADDR;
	// MetricsAddrs lists where). Timeline, when set, is passed as
	// RINGTAIL_TIMELINE: each rank writes its Chrome trace there (with
	// ".rank<r>" before the extension).
	MetricsPort int
	Timeline    string
	// Coordinator serves the job's rendezvous on the listener Run opens;
	// nil means an in-process internal/rendezvous server
	// (ServeRendezvous). Tests replace it.
	Coordinator CoordinatorFunc
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.NP < 1 || c.NP > MaxRanks {
		bad("-np %d must be in 1..%d", c.NP, MaxRanks)
	}
	switch c.Launcher {
	case "", LauncherDirect:
	case LauncherSrun:
		if len(c.Hosts) == 0 {
			bad("the srun launcher needs the allocation's nodes (Hosts)")
		}
		if len(c.Srun) > 0 && c.Srun[0] == "" {
			bad("srun command is empty")
		}
		if c.SecretFile != "" && (!filepath.IsAbs(c.SecretFile) || strings.ContainsAny(c.SecretFile, "\x00\n")) {
			bad("secret file %q must be an absolute path", c.SecretFile)
		}
		if c.SecretFile != "" && len(c.Secret) == 0 {
			bad("secret file %q given without the secret it holds", c.SecretFile)
		}
	default:
		bad("launcher %q must be direct or srun", c.Launcher)
	}
	if c.MetricsPort < 0 || c.MetricsPort+c.NP > 65536 {
		bad("metrics port %d: the ranks' ports must fit in 1..65535", c.MetricsPort)
	}
	if c.BindTo != "" && c.BindTo != "core" && c.BindTo != "none" {
		bad("bind-to %q must be core or none", c.BindTo)
	}
	if c.ControlPlane != "" && c.ControlPlane != "tcp" && c.ControlPlane != "libp2p" {
		bad("control plane %q must be tcp or libp2p", c.ControlPlane)
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		bad("no command to run")
	}
	if len(c.Hosts) > 0 {
		seen := map[string]bool{}
		for _, h := range c.Hosts {
			if err := checkHostName(h.Host); err != nil {
				bad("%w", err)
			}
			if h.Slots < 1 {
				bad("host %s has %d slots; it needs at least 1", h.Host, h.Slots)
			}
			if seen[h.Host] {
				bad("host %s is listed twice; give it more slots instead", h.Host)
			}
			seen[h.Host] = true
		}
		if total := TotalSlots(c.Hosts); c.NP >= 1 && total < c.NP {
			bad("-np %d exceeds the %d slots of the host list", c.NP, total)
		}
	}
	for _, kv := range c.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			bad("environment entry %q is not NAME=VALUE", kv)
			continue
		}
		if err := checkEnvName(name); err != nil {
			bad("environment entry %q: %w", kv, err)
		} else if reservedEnv(name) {
			bad("environment entry %q: %s is set by the launcher", kv, name)
		} else if name == EnvTimeout && c.Timeout > 0 {
			bad("environment entry %q conflicts with the timeout %v", kv, c.Timeout)
		} else if name == EnvConnectTimeout && c.StartTimeout > 0 {
			bad("environment entry %q conflicts with the start timeout %v", kv, c.StartTimeout)
		} else if name == EnvListenIP && len(c.Interfaces) > 0 {
			bad("environment entry %q conflicts with the network interfaces %s", kv, strings.Join(c.Interfaces, ","))
		}
	}
	if len(c.Secret) > 0 {
		if err := checkSecret(c.Secret); err != nil {
			bad("%w", err)
		}
	}
	if len(c.JobID) > 128 || strings.ContainsAny(c.JobID, "\x00\r\n") {
		bad("job id must be at most 128 bytes of one line")
	}
	if c.Timeout < 0 {
		bad("timeout %v must not be negative", c.Timeout)
	}
	if c.Grace < 0 {
		bad("grace period %v must not be negative", c.Grace)
	}
	if c.MasterAddr != "" && (strings.ContainsAny(c.MasterAddr, " /[]") || strings.HasPrefix(c.MasterAddr, "-")) {
		bad("master address %q is not a host name or IP", c.MasterAddr)
	}
	if c.MasterPort < 0 || c.MasterPort > 65535 {
		bad("master port %d must be in 0..65535", c.MasterPort)
	}
	if len(c.SSH) > 0 && c.SSH[0] == "" {
		bad("ssh command is empty")
	}
	switch c.SSHMode {
	case "", SSHModeAuto, SSHModeShell, SSHModeExec:
	default:
		bad("ssh mode %q must be auto, shell or exec", c.SSHMode)
	}
	if c.StartTimeout < 0 {
		bad("start timeout %v must not be negative", c.StartTimeout)
	}
	for _, name := range c.Interfaces {
		if err := checkInterfaceName(name); err != nil {
			bad("%w", err)
		}
	}
	if strings.ContainsRune(c.OutputDir, 0) {
		bad("output directory %q contains a NUL byte", c.OutputDir)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("launch: invalid config: %w", err)
	}
	return nil
}

// withDefaults fills the zero fields that have defaults (not Secret and
// JobID, which need randomness and may fail).
func (c Config) withDefaults() Config {
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if len(c.SSH) == 0 {
		c.SSH = DefaultSSH()
	}
	if len(c.Srun) == 0 {
		c.Srun = DefaultSrun()
	}
	if c.Coordinator == nil {
		c.Coordinator = ServeRendezvous(c.Logger)
	}
	return c
}

// checkInterfaceName accepts names Linux allows for a network interface
// that need no quoting in a shell: 1..15 bytes of letters, digits and
// "-_.:@".
func checkInterfaceName(name string) error {
	if name == "" || len(name) > 15 {
		return fmt.Errorf("network interface name %q must be 1..15 bytes", name)
	}
	for _, c := range name {
		ok := c == '-' || c == '_' || c == '.' || c == ':' || c == '@' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("network interface name %q contains %q", name, c)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("network interface name %q is not allowed", name)
	}
	return nil
}

// isLoopback reports whether host names the loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
