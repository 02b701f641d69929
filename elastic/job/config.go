package job

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// Defaults of the zero Config fields that have one.
const (
	// DefaultDiscoveryInterval is how often the discovery script runs.
	DefaultDiscoveryInterval = time.Second
	// DefaultElasticTimeout is how long the job waits for min-np ranks
	// (at start-up, and after losing ranks) before failing: Horovod's
	// --elastic-timeout default.
	DefaultElasticTimeout = 10 * time.Minute
	// DefaultDrain is how long the other ranks have to finish once one
	// has (the data is all trained) before they are stopped.
	DefaultDrain = 30 * time.Second
)

// Config describes an elastic job.
type Config struct {
	// NP is how many ranks the first generation waits for (0: MinNP);
	// MinNP the fewest the job continues with; MaxNP the most it runs
	// (0: as many as the hosts' slots).
	NP, MinNP, MaxNP int
	// Hosts is a fixed host list; DiscoveryScript (run with sh -c every
	// DiscoveryInterval) lists the hosts available now instead, one
	// "host[:slots]" or "host slots=N" per line, SlotsPerHost (default 1)
	// for a line without a count. Neither: MaxNP (else NP) local ranks.
	Hosts             []launch.HostSlots
	DiscoveryScript   string
	DiscoveryInterval time.Duration
	SlotsPerHost      int
	// Command is each rank's program and arguments; Env extra K=V pairs
	// for every rank; Dir the ranks' working directory (remote ranks cd
	// to it; default: the launcher's).
	Command []string
	Env     []string
	Dir     string
	// Secret and JobID identify the job (empty: random ones).
	Secret []byte
	JobID  string
	// Timeout is the ranks' operation timeout (RINGTAIL_TIMEOUT; 0: the
	// runtime's). ElasticTimeout bounds every wait for min-np ranks (0:
	// DefaultElasticTimeout).
	Timeout, ElasticTimeout time.Duration
	// MaxRestarts is how often, per host, a crashed rank is restarted in
	// place before its host is blacklisted (0: blacklisted at once, as
	// Horovod does). A rank that exits with elastic.ExitEvicted is always
	// restarted.
	MaxRestarts int
	// Grace is how long stopped ranks have between SIGTERM and SIGKILL
	// (0: launch.DefaultGrace); Drain how long the others have to finish
	// once one has (0: DefaultDrain).
	Grace, Drain time.Duration
	// MasterAddr is the launcher's address as the ranks reach it (an IP,
	// or a name that resolves to one); empty: 127.0.0.1 when every host
	// is this one, else the address routing to the first remote host.
	// MasterPort, when set, is the observer's port (the ranks' seed) and
	// MasterPort+1 the shard service's; 0: free ports.
	MasterAddr string
	MasterPort int
	// SSH and SSHMode start ranks on other hosts (see launch.Config).
	SSH     []string
	SSHMode string
	// StateDir holds the shard service's write-ahead log; empty:
	// DefaultStateDir of the launcher's working directory
	// (./.ringtail/<job id>/shards). Either is created 0700 if missing
	// and kept after the job, so a launcher restarted with the same
	// JobID resumes the shard queue; remove it when the job is done.
	StateDir string
	// Stdout and Stderr receive the ranks' lines (nil: discarded);
	// Stderr also the launcher's notices. PrefixOutput prefixes each
	// rank's lines with "[host.slot] ".
	Stdout, Stderr io.Writer
	PrefixOutput   bool
	// Name starts the notices (default launch.DefaultName).
	Name string
	// Logger receives structured logs.
	Logger zerolog.Logger
}

// withDefaults fills the zero fields that have defaults.
func (c Config) withDefaults() Config {
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if c.SlotsPerHost == 0 {
		c.SlotsPerHost = 1
	}
	if c.ElasticTimeout == 0 {
		c.ElasticTimeout = DefaultElasticTimeout
	}
	if c.Grace == 0 {
		c.Grace = launch.DefaultGrace
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if c.Name == "" {
		c.Name = launch.DefaultName
	}
	if len(c.SSH) == 0 {
		c.SSH = launch.DefaultSSH()
	}
	if c.MinNP == 0 {
		c.MinNP = c.NP
	}
	if c.NP == 0 {
		c.NP = c.MinNP
	}
	if c.Hosts == nil && c.DiscoveryScript == "" {
		c.Hosts = []launch.HostSlots{{Host: "localhost", Slots: max(c.MaxNP, c.NP, 1)}}
	}
	if c.MaxNP == 0 && c.DiscoveryScript == "" {
		c.MaxNP = launch.TotalSlots(c.Hosts)
	}
	return c
}

// reserved are the variables the job sets for every rank.
var reserved = []string{
	launch.EnvSecret, launch.EnvSecretFile, launch.EnvJobID, launch.EnvMasterAddr, launch.EnvLocalRank, launch.EnvLocalWorldSize,
	elastic.EnvElastic, elastic.EnvID, elastic.EnvSeeds, elastic.EnvNP, elastic.EnvMinNP, elastic.EnvMaxNP,
	elastic.EnvStartTimeout, elastic.EnvMinWait, elastic.EnvBind, service.EnvAddr,
}

// Validate reports every invalid field (of the config with its defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MinNP < 1 || c.MinNP > launch.MaxRanks {
		bad("--min-np %d must be in 1..%d (or give -np)", c.MinNP, launch.MaxRanks)
	}
	if c.MaxNP != 0 && (c.MaxNP < c.MinNP || c.MaxNP > launch.MaxRanks) {
		bad("--max-np %d must be in --min-np %d..%d", c.MaxNP, c.MinNP, launch.MaxRanks)
	}
	if c.NP < c.MinNP || (c.MaxNP != 0 && c.NP > c.MaxNP) {
		bad("-np %d must be between --min-np %d and --max-np %d", c.NP, c.MinNP, c.MaxNP)
	}
	if len(c.Hosts) > 0 && c.DiscoveryScript != "" {
		bad("give a host list or a host discovery script, not both")
	}
	seen := map[string]bool{}
	for _, h := range c.Hosts {
		if h.Host == "" || h.Slots < 1 {
			bad("host %q with %d slots: need a name and at least one slot", h.Host, h.Slots)
		}
		if seen[h.Host] {
			bad("host %s is listed twice; give it more slots instead", h.Host)
		}
		seen[h.Host] = true
	}
	if c.DiscoveryScript == "" && launch.TotalSlots(c.Hosts) < c.NP {
		bad("-np %d exceeds the %d slots of the host list", c.NP, launch.TotalSlots(c.Hosts))
	}
	if c.DiscoveryInterval < 0 || c.SlotsPerHost < 1 {
		bad("discovery interval %v must not be negative and slots per host %d must be at least 1", c.DiscoveryInterval, c.SlotsPerHost)
	}
	if len(c.Secret) > 0 {
		if err := settings.CheckSecret(c.Secret); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		bad("no command to run")
	}
	for _, kv := range c.Env {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "" || strings.ContainsAny(name, " \t\n="):
			bad("environment entry %q is not NAME=VALUE", kv)
		case isReserved(name):
			bad("environment entry %q: %s is set by the elastic launcher", kv, name)
		}
	}
	if len(c.JobID) > 128 || strings.ContainsAny(c.JobID, "\x00\r\n/\\") || c.JobID == "." || c.JobID == ".." {
		bad("job id %q must be at most 128 bytes, not . or .., without '/', '\\' or line breaks (it names the shard state directory)", c.JobID)
	}
	if c.Timeout < 0 || c.ElasticTimeout < 0 || c.Grace < 0 || c.Drain < 0 || c.MaxRestarts < 0 {
		bad("timeouts, grace, drain and --max-restarts must not be negative")
	}
	if c.MasterPort < 0 || c.MasterPort > 65534 {
		bad("master port %d must be in 0..65534 (the shard service takes the next)", c.MasterPort)
	}
	if len(c.SSH) == 0 || c.SSH[0] == "" {
		bad("ssh command is empty")
	}
	switch c.SSHMode {
	case "", launch.SSHModeAuto, launch.SSHModeShell, launch.SSHModeExec:
	default:
		bad("ssh mode %q must be auto, shell or exec", c.SSHMode)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("job: invalid elastic config: %w", err)
	}
	return nil
}

func isReserved(name string) bool {
	for _, r := range reserved {
		if r == name {
			return true
		}
	}
	return false
}
