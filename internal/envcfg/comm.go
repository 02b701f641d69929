package envcfg

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// The variables the placement reads besides the table's own (Decl.Also
// names the first three).
const (
	VarRingtailAddr       = "RINGTAIL_MASTER_ADDR"
	VarRingtailPort       = "RINGTAIL_MASTER_PORT"
	VarSecretFile         = "RINGTAIL_SECRET_FILE"
	VarJobCompletionIndex = "JOB_COMPLETION_INDEX"
)

// The defaults of a communicator's settings (ringtail's Default*
// constants; docs/benchmarks-collectives.md says where they were measured).
const (
	DefaultOpTimeout      = 5 * time.Minute
	DefaultPeerTimeout    = 10 * time.Second
	DefaultConnectTimeout = 2 * time.Minute
	DefaultChannels       = 1
	DefaultChunkBytes     = 1 << 20
	DefaultSmallBytes     = 4 << 10
	DefaultPieceBytes     = 1 << 20
)

// Default returns the settings with every field at its default (Table)
// and the given rank and world size (ringtail.DefaultConfig).
func Default(rank, world int) Comm {
	var c Comm
	for _, s := range Table() {
		s.setDefault(&c)
	}
	c.Rank, c.WorldSize, c.LocalRank, c.LocalWorldSize = rank, world, rank, world
	return c
}

// Names returns every variable the table and the placement read, in
// the table's order: settings.Unknown's runtime part.
func Names() []string {
	var names []string
	for _, s := range Table() {
		if d := s.Declared(); d.Env != "" {
			names = append(names, d.Env)
			if d.Also != "" {
				names = append(names, d.Also)
			}
		}
	}
	return append(names, VarJobCompletionIndex)
}

// DefaultLogger is the logger of a communicator whose Logger is the zero
// value: warnings and errors (logging.DefaultLevel) to stderr, for humans
// on a terminal and JSON otherwise, so that a library user sees the
// shared-memory fallback, refused connections and dead peers without
// configuring anything. zerolog.Nop() silences them; any other logger
// redirects them.
func DefaultLogger() zerolog.Logger {
	return logging.New(logging.Options{Level: logging.DefaultLevel, Out: os.Stderr, Terminal: logging.IsTerminal(os.Stderr)})
}

// WithDefaultLogger gives c DefaultLogger when its Logger is the zero
// value (which writes nothing).
func (c *Comm) WithDefaultLogger() {
	if reflect.ValueOf(c.Logger).IsZero() {
		c.Logger = DefaultLogger().With().Int("rank", c.Rank).Logger()
	}
}

// FromLookup reads the settings ringtail.ConfigFromLookup documents
// (torchrun's variables, a Slurm task's or an Indexed Job's placement,
// RINGTAIL_*) through lookup over Default(0, 1), and reports every
// malformed variable at once.
func FromLookup(lookup func(name string) (string, bool)) (Comm, error) {
	return fromLookup(lookup, os.Stderr)
}

// FromEnviron is FromLookup over environ (NAME=VALUE entries, as
// os.Environ gives them; the last of a name wins), its logger writing to
// out. It also warns, through that logger, about each RINGTAIL_* name of
// environ that no part of ringtail reads (settings.Unknown: one line
// naming the nearest known name), on the process of local rank 0 only, so
// that a host's ranks say it once.
func FromEnviron(environ []string, out io.Writer) (Comm, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok {
			vars[name] = value
		}
	}
	c, err := fromLookup(func(name string) (string, bool) { v, ok := vars[name]; return v, ok }, out)
	if c.LocalRank == 0 {
		WarnUnknown(c.Logger, environ)
	}
	return c, err
}

// WarnUnknown logs at warn, on log, one line for each RINGTAIL_* variable
// of environ that no part of ringtail reads, naming the nearest known
// name (settings.Unknown over the table's names).
func WarnUnknown(log zerolog.Logger, environ []string) {
	for _, line := range settings.Unknown(environ, Names()...) {
		log.Warn().Msg("ringtail: " + line)
	}
}

// fromLookup is FromLookup with the logger writing to out: the placement
// (rank, world, rendezvous, job id, secret) first, then every variable
// the table reads.
func fromLookup(lookup func(name string) (string, bool), out io.Writer) (Comm, error) {
	c := Default(0, 1)
	env := Reader{Lookup: lookup}
	place(&env, &c)
	for _, s := range Table() {
		s.read(&env, &c)
	}
	logger, err := logging.FromLookup(lookup, out)
	if err != nil {
		env.Fail(err)
	}
	c.Logger = logger.With().Int("rank", c.Rank).Logger()
	if err := env.Err(); err != nil {
		return c, fmt.Errorf("ringtail: environment: %w", err)
	}
	return c, nil
}

// place reads the rank's placement: rank and world (torchrun's
// variables, else a Slurm task's or an Indexed Job's), the rendezvous,
// the job id and the secret.
func place(env *Reader, c *Comm) {
	_, rankSet := env.LookupVar(VarRank)
	jobID := ""
	cluster := clusterPlacement(env, rankSet, c, &jobID)
	env.Int(VarRank, &c.Rank)
	env.Int(VarWorldSize, &c.WorldSize)
	if !cluster {
		c.LocalRank, c.LocalWorldSize = c.Rank, c.WorldSize
	}
	env.Int(VarLocalRank, &c.LocalRank)
	env.Int(VarLocalWorldSize, &c.LocalWorldSize)
	env.String(VarMasterAddr, &c.MasterAddr)
	env.String(VarRingtailAddr, &c.MasterAddr)
	if v := env.Get(VarRingtailPort); strings.TrimSpace(v) != "" {
		_ = env.Get(VarMasterPort) // asked for (see above), but torch's, not ours to parse
		env.Int(VarRingtailPort, &c.MasterPort)
	} else {
		env.Int(VarMasterPort, &c.MasterPort)
	}
	if v := env.Get(VarJobID); v != "" {
		c.JobID = v
	} else if jobID != "" {
		c.JobID = jobID
	} else if c.MasterPort != 0 {
		c.JobID = "job@" + net.JoinHostPort(c.MasterAddr, strconv.Itoa(c.MasterPort))
	}
	secret, file := env.Get(VarSecret), env.Get(VarSecretFile)
	switch {
	case secret != "" && file != "":
		env.Fail(settings.ErrTwoSecrets)
	case secret != "":
		c.Secret = []byte(secret)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			env.Fail(fmt.Errorf("%s: %w", VarSecretFile, err))
		}
		c.Secret = []byte(strings.TrimSpace(string(b)))
	}
}

// clusterPlacement fills c's rank, world, local rank and world, and
// rendezvous from a Slurm job step's or a Kubernetes Indexed Job's
// variables when RANK is unset (see ConfigFromLookup), and *jobID with
// the job id they imply, if any. It reports whether it placed the rank.
// Every variable is looked up whether or not RANK is set.
func clusterPlacement(env *Reader, rankSet bool, c *Comm, jobID *string) bool {
	task, isTask, err := slurm.TaskFromLookup(env.LookupVar)
	index, hasIndex := env.LookupVar(VarJobCompletionIndex)
	_, worldSet := env.LookupVar(VarWorldSize)
	switch {
	case rankSet:
		return false
	case isTask && err != nil:
		env.Fail(err)
		return false
	case isTask:
		c.Rank, c.WorldSize, c.LocalRank, c.LocalWorldSize = task.Rank, task.World, task.LocalRank, task.LocalWorld
		c.MasterAddr, c.MasterPort, *jobID = task.MasterAddr(), task.MasterPort(), task.Name()
		return true
	case hasIndex:
		env.Int(VarJobCompletionIndex, &c.Rank)
		if !worldSet {
			env.Fail(fmt.Errorf("%s=%s gives the rank, but %s (the Job's completions) is not set", VarJobCompletionIndex, index, VarWorldSize))
		}
		c.LocalRank, c.LocalWorldSize = 0, 1
		return true
	}
	return false
}

// ResolvedControlPlane is the control plane c runs: ControlPlane when
// set, else libp2p when the job has a secret (its coordinator's identity
// derives from it) and tcp for an insecure job.
func (c *Comm) ResolvedControlPlane() string {
	if c.ControlPlane != "" {
		return c.ControlPlane
	}
	if len(c.Secret) == 0 {
		return "tcp"
	}
	return "libp2p"
}

// HostRingOrder reports whether the world's ring places each host's
// ranks next to each other (RingOrder "hosts" or empty) rather than in
// rank order.
func (c *Comm) HostRingOrder() bool { return c.RingOrder != "ranks" }

// Frames is how the sockets data plane protects frames between hosts
// (FrameAuth; validated).
func (c *Comm) Frames() transport.FrameAuth {
	f, _ := frameAuth(c.FrameAuth)
	return f
}

// frameAuth maps a FrameAuth value to the transport's protection; false
// for a value it does not know.
func frameAuth(v string) (transport.FrameAuth, bool) {
	switch v {
	case "", "integrity":
		return transport.FrameAuthTag, true
	case "off":
		return transport.FrameAuthOff, true
	case "encrypt":
		return transport.FrameAuthEncrypt, true
	}
	return 0, false
}

// Tunables are the program builders' settings (internal/algo) that c
// sets: each table entry with a Tune feeds its value.
func (c *Comm) Tunables() algo.Tunables {
	var t algo.Tunables
	for _, s := range Table() {
		s.tune(c, &t)
	}
	return t
}

// Validate reports every invalid field (each table entry's Check, in
// the table's order).
func (c *Comm) Validate() error {
	var errs []error
	for _, s := range Table() {
		if err := s.check(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ringtail: invalid config: %w", err)
	}
	return nil
}

// WithProcessDebug fills the fields of the table's Process entries
// (RINGTAIL_FLIGHT_DIR, RINGTAIL_FLIGHT_SIZE and RINGTAIL_DEBUG) that c
// leaves at their zero value from the variables, so that they act on
// every communicator of the process (one that NewLocal or a program's
// own Config made too), as torch's do.
func (c *Comm) WithProcessDebug() error {
	env := Reader{}
	var d Comm
	var process []Setting
	for _, s := range Table() {
		if s.Declared().Process {
			s.read(&env, &d)
			process = append(process, s)
		}
	}
	if err := env.Err(); err != nil {
		return fmt.Errorf("ringtail: environment: %w", err)
	}
	for _, s := range process {
		s.fromProcess(c, &d)
	}
	return nil
}

// Detail reports whether calls check their call sites.
func (c *Comm) Detail() bool { return strings.EqualFold(c.Debug, "detail") }
