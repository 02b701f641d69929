package envcfg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/nvml"
	"github.com/ringtail-ml/ringtail/topology"
)

// The variables a communicator reads; ringtail's Env* constants name them
// and say what each sets.
const (
	VarRank               = "RANK"
	VarWorldSize          = "WORLD_SIZE"
	VarLocalRank          = "LOCAL_RANK"
	VarLocalWorldSize     = "LOCAL_WORLD_SIZE"
	VarMasterAddr         = "MASTER_ADDR"
	VarMasterPort         = "MASTER_PORT"
	VarRingtailAddr       = "RINGTAIL_MASTER_ADDR"
	VarRingtailPort       = "RINGTAIL_MASTER_PORT"
	VarSecret             = "RINGTAIL_SECRET"
	VarSecretFile         = "RINGTAIL_SECRET_FILE"
	VarInsecure           = "RINGTAIL_INSECURE"
	VarJobID              = "RINGTAIL_JOB_ID"
	VarCoordinator        = "RINGTAIL_COORDINATOR"
	VarListenIP           = "RINGTAIL_LISTEN_IP"
	VarTimeout            = "RINGTAIL_TIMEOUT"
	VarPeerTimeout        = "RINGTAIL_PEER_TIMEOUT"
	VarConnectTimeout     = "RINGTAIL_CONNECT_TIMEOUT"
	VarChannels           = "RINGTAIL_CHANNELS"
	VarChunkBytes         = "RINGTAIL_CHUNK_BYTES"
	VarSmallBytes         = "RINGTAIL_SMALL_BYTES"
	VarPieceBytes         = "RINGTAIL_PIECE_BYTES"
	VarPieces             = "RINGTAIL_PIECES"
	VarAlgorithm          = "RINGTAIL_ALGORITHM"
	VarStreams            = "RINGTAIL_STREAMS"
	VarNoUnix             = "RINGTAIL_NO_UNIX"
	VarNoShm              = "RINGTAIL_NO_SHM"
	VarTolerate           = "RINGTAIL_TOLERATE_DEATHS"
	VarFastSpin           = "RINGTAIL_FAST_SPIN"
	VarControlPlane       = "RINGTAIL_CONTROL_PLANE"
	VarDataPlane          = "RINGTAIL_DATA_PLANE"
	VarFrameAuth          = "RINGTAIL_FRAME_AUTH"
	VarRingOrder          = "RINGTAIL_RING_ORDER"
	VarMetricsAddr        = "RINGTAIL_METRICS_ADDR"
	VarTimeline           = "RINGTAIL_TIMELINE"
	VarFlightDir          = "RINGTAIL_FLIGHT_DIR"
	VarFlightSize         = "RINGTAIL_FLIGHT_SIZE"
	VarDebug              = "RINGTAIL_DEBUG"
	VarJobCompletionIndex = "JOB_COMPLETION_INDEX"
)

// The defaults of a communicator's settings (ringtail's Default*
// constants; docs/benchmarks.md says where they were measured).
const (
	DefaultOpTimeout      = 5 * time.Minute
	DefaultPeerTimeout    = 10 * time.Second
	DefaultConnectTimeout = 2 * time.Minute
	DefaultChannels       = 1
	DefaultChunkBytes     = 1 << 20
	DefaultSmallBytes     = 4 << 10
	DefaultPieceBytes     = 1 << 20
)

// Comm is a communicator's configuration as the internal packages read
// it: ringtail.Config's fields (documented there), in its order, so that
// each converts to the other.
type Comm struct {
	Rank, WorldSize, LocalRank, LocalWorldSize int
	MasterAddr                                 string
	MasterPort                                 int
	ExternalCoordinator                        bool
	JobID                                      string
	Secret                                     []byte
	Insecure                                   bool
	Generation                                 uint64
	ListenIP                                   string
	DisableUnix, DisableShm, TolerateDeaths    bool
	OpTimeout, PeerTimeout, ConnectTimeout     time.Duration
	ControlPlane, DataPlane, RingOrder         string
	FrameAuth                                  string
	FastSpin                                   time.Duration
	Channels, ChunkBytes, SmallBytes           int
	PieceBytes                                 int
	Pieces                                     string
	Streams                                    int
	Algorithm                                  string
	Logger                                     zerolog.Logger
	MetricsAddr, Timeline, FlightDir           string
	FlightSize                                 int
	Debug                                      string
}

// Default returns the settings with every tunable at its default and the
// given rank and world size (ringtail.DefaultConfig).
func Default(rank, world int) Comm {
	return Comm{
		Rank: rank, WorldSize: world, LocalRank: rank, LocalWorldSize: world,
		MasterAddr: "127.0.0.1", JobID: "ringtail",
		OpTimeout: DefaultOpTimeout, PeerTimeout: DefaultPeerTimeout, ConnectTimeout: DefaultConnectTimeout,
		Channels: DefaultChannels, ChunkBytes: DefaultChunkBytes, SmallBytes: DefaultSmallBytes,
		PieceBytes: DefaultPieceBytes, Pieces: "auto", DataPlane: "sockets", RingOrder: "hosts", FastSpin: 5 * time.Microsecond,
	}
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

// withDefaultLogger gives c DefaultLogger when its Logger is the zero
// value (which writes nothing).
func (c *Comm) withDefaultLogger() {
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
// name (settings.Unknown).
func WarnUnknown(log zerolog.Logger, environ []string) {
	for _, line := range settings.Unknown(environ) {
		log.Warn().Msg("ringtail: " + line)
	}
}

// fromLookup is FromLookup with the logger writing to out.
func fromLookup(lookup func(name string) (string, bool), out io.Writer) (Comm, error) {
	c := Default(0, 1)
	env := Reader{Lookup: lookup}
	_, rankSet := env.LookupVar(VarRank)
	jobID := ""
	cluster := clusterPlacement(&env, rankSet, &c, &jobID)
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
	env.Bool(VarInsecure, &c.Insecure)
	c.ExternalCoordinator = env.Get(VarCoordinator) == "external"
	c.ListenIP = env.Get(VarListenIP)
	env.Bool(VarNoUnix, &c.DisableUnix)
	env.Bool(VarNoShm, &c.DisableShm)
	env.Bool(VarTolerate, &c.TolerateDeaths)
	env.String(VarControlPlane, &c.ControlPlane)
	env.String(VarDataPlane, &c.DataPlane)
	env.String(VarRingOrder, &c.RingOrder)
	env.String(VarFrameAuth, &c.FrameAuth)
	env.Duration(VarTimeout, &c.OpTimeout)
	env.Duration(VarPeerTimeout, &c.PeerTimeout)
	env.Duration(VarConnectTimeout, &c.ConnectTimeout)
	env.Duration(VarFastSpin, &c.FastSpin)
	env.Int(VarChannels, &c.Channels)
	env.Int(VarChunkBytes, &c.ChunkBytes)
	env.Int(VarSmallBytes, &c.SmallBytes)
	env.Int(VarPieceBytes, &c.PieceBytes)
	env.Int(VarStreams, &c.Streams)
	env.String(VarAlgorithm, &c.Algorithm)
	env.String(VarPieces, &c.Pieces)
	c.MetricsAddr = env.Get(VarMetricsAddr)
	c.Timeline = env.Get(VarTimeline)
	c.debugFromEnv(&env)
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

// controlPlane resolves the default control plane: libp2p when the job
// has a secret (its coordinator's identity derives from it), tcp for an
// insecure job.
func (c *Comm) controlPlane() string {
	if c.ControlPlane != "" {
		return c.ControlPlane
	}
	if len(c.Secret) == 0 {
		return "tcp"
	}
	return "libp2p"
}

// tunables are the program builders' settings (internal/algo).
func (c *Comm) tunables() algo.Tunables {
	return algo.Tunables{SmallBytes: c.SmallBytes, Channels: c.Channels, ChunkBytes: c.ChunkBytes, PieceBytes: c.PieceBytes}
}

// PlanFacts are the facts the ranks of a communicator with this Config
// would agree on, for --dump-plan: hosts of LocalWorldSize ranks each
// (block placement), fastboxes where that is one host with shared
// memory, and bandwidth (nil: none) as the links' measurements.
func (c *Comm) PlanFacts(bandwidth topology.Matrix) algo.Facts {
	f := algo.Facts{World: c.WorldSize, FastboxBytes: transport.FastboxPayload}
	per := max(1, c.LocalWorldSize)
	if per < c.WorldSize {
		f.Host = make([]int, c.WorldSize)
		for r := range f.Host {
			f.Host[r] = r / per
		}
	} else {
		f.Fast = !c.DisableShm && !c.DisableUnix
	}
	if bandwidth != nil {
		f.Net.Bandwidth, f.Measured = bandwidth, true
	}
	return f
}

// Settings maps a validated Config to the engine's.
func (c *Comm) Settings() engine.Settings {
	program, _ := algo.ParseKind(c.Algorithm) // validated
	frames, _ := frameAuth(c.FrameAuth)       // validated
	return engine.Settings{
		Rank: c.Rank, World: c.WorldSize, MasterAddr: c.MasterAddr, MasterPort: c.MasterPort,
		ExternalCoordinator: c.ExternalCoordinator, JobID: c.JobID, Secret: c.Secret, Generation: c.Generation,
		ListenIP: c.ListenIP, DisableUnix: c.DisableUnix, DisableShm: c.DisableShm, TolerateDeaths: c.TolerateDeaths,
		OpTimeout: c.OpTimeout, PeerTimeout: c.PeerTimeout, ConnectTimeout: c.ConnectTimeout,
		ControlPlane: c.controlPlane(), DataPlane: c.DataPlane, HostRingOrder: c.RingOrder != "ranks", FastSpin: c.FastSpin, Tunables: c.tunables(),
		Frames: frames,
		Pieces: c.Pieces, Program: program, Streams: c.Streams, Logger: c.Logger,
	}
}

// Validate reports every invalid field.
func (c *Comm) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.WorldSize < 1 {
		bad("world size %d must be at least 1", c.WorldSize)
	}
	if c.Rank < 0 || (c.WorldSize >= 1 && c.Rank >= c.WorldSize) {
		bad("rank %d must be in 0..%d", c.Rank, c.WorldSize-1)
	}
	if c.LocalWorldSize < 1 || c.LocalRank < 0 || c.LocalRank >= c.LocalWorldSize {
		bad("local rank %d must be in 0..%d", c.LocalRank, c.LocalWorldSize-1)
	}
	if c.WorldSize > 1 {
		if c.MasterAddr == "" {
			bad("master address is empty (set %s)", VarMasterAddr)
		} else if strings.ContainsAny(c.MasterAddr, " /") {
			bad("master address %q is not a host name or IP", c.MasterAddr)
		}
		if c.MasterPort < 1 || c.MasterPort > 65535 {
			bad("master port %d must be in 1..65535 (set %s)", c.MasterPort, VarMasterPort)
		}
		if len(c.Secret) == 0 && !c.Insecure {
			bad("no job secret: set %s or %s (or %s=1 to run unauthenticated)", VarSecret, VarSecretFile, VarInsecure)
		}
	}
	if len(c.Secret) > 0 {
		if err := settings.CheckSecret(c.Secret); err != nil {
			errs = append(errs, err)
		}
	}
	if c.JobID == "" || len(c.JobID) > 128 {
		bad("job id must be 1..128 bytes")
	}
	if c.ListenIP != "" && net.ParseIP(c.ListenIP) == nil {
		bad("listen IP %q is not an IP address", c.ListenIP)
	}
	if c.OpTimeout <= 0 {
		bad("operation timeout %v must be positive", c.OpTimeout)
	}
	if c.PeerTimeout < 100*time.Millisecond {
		bad("peer timeout %v must be at least 100ms", c.PeerTimeout)
	}
	if c.ConnectTimeout <= 0 {
		bad("connect timeout %v must be positive", c.ConnectTimeout)
	}
	if c.Channels < 1 || c.Channels > 16 {
		bad("channels %d must be in 1..16", c.Channels)
	}
	if c.ChunkBytes < 4096 || c.ChunkBytes > 16<<20 {
		bad("chunk %d bytes must be in 4096..16777216", c.ChunkBytes)
	}
	if c.ControlPlane != "" && c.ControlPlane != "tcp" && c.ControlPlane != "libp2p" {
		bad("control plane %q must be tcp or libp2p", c.ControlPlane)
	}
	if c.DataPlane != "sockets" && c.DataPlane != "libp2p" {
		bad("data plane %q must be sockets or libp2p", c.DataPlane)
	}
	if c.RingOrder != "" && c.RingOrder != "hosts" && c.RingOrder != "ranks" {
		bad("ring order %q must be hosts or ranks", c.RingOrder)
	}
	if _, ok := frameAuth(c.FrameAuth); !ok {
		bad("frame auth %q must be integrity, off or encrypt (%s)", c.FrameAuth, VarFrameAuth)
	}
	if c.WorldSize > 1 && len(c.Secret) == 0 && (c.ControlPlane == "libp2p" || c.DataPlane == "libp2p") {
		bad("the libp2p planes derive identities from the job secret: set %s", VarSecret)
	}
	if c.FastSpin < 0 || c.FastSpin > time.Second {
		bad("fast spin %v must be in 0..1s", c.FastSpin)
	}
	if c.SmallBytes < 0 {
		bad("small-message threshold %d must not be negative", c.SmallBytes)
	}
	if c.PieceBytes != 0 && (c.PieceBytes < 64<<10 || c.PieceBytes > 1<<30) {
		bad("allreduce piece %d bytes must be 0 (off) or in 65536..1073741824", c.PieceBytes)
	}
	switch c.Pieces {
	case "", "auto", "always", "off":
	default:
		bad("pieces %q must be auto, always or off (%s)", c.Pieces, VarPieces)
	}
	if c.Streams < 0 || c.Streams > 16 {
		bad("streams %d must be in 0..16 (%s)", c.Streams, VarStreams)
	}
	if _, err := algo.ParseKind(c.Algorithm); err != nil {
		bad("algorithm %q must be auto, ring, ring-pieces, two-level or ring-offload (%s)", c.Algorithm, VarAlgorithm)
	}
	if c.MetricsAddr != "" {
		if addr, err := obs.RankMetricsAddr(c.MetricsAddr, c.LocalRank); err != nil {
			bad("metrics address (%s): %v", VarMetricsAddr, err)
		} else if err := obs.CheckAddr(addr); err != nil {
			bad("metrics address (%s): %v", VarMetricsAddr, err)
		} else if err := obs.CheckExposure(addr, "metrics address ("+VarMetricsAddr+")", c.Secret); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Timeline != "" {
		if fi, err := os.Stat(filepath.Dir(c.Timeline)); err != nil || !fi.IsDir() {
			bad("timeline %q (%s): its directory does not exist", c.Timeline, VarTimeline)
		} else if fi, err := os.Stat(c.Timeline); err == nil && fi.IsDir() {
			bad("timeline %q (%s) is a directory", c.Timeline, VarTimeline)
		}
	}
	errs = append(errs, c.validateDebug()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ringtail: invalid config: %w", err)
	}
	return nil
}

// debugFromEnv reads the flight recorder's and the call-site check's
// variables into c.
func (c *Comm) debugFromEnv(env *Reader) {
	env.String(VarFlightDir, &c.FlightDir)
	if _, ok := env.LookupVar(VarFlightSize); ok {
		n := c.FlightSize
		env.Int(VarFlightSize, &n)
		if n == 0 {
			n = -1 // "0": off
		}
		c.FlightSize = n
	}
	env.String(VarDebug, &c.Debug)
}

// WithProcessDebug fills the fields RINGTAIL_FLIGHT_DIR,
// RINGTAIL_FLIGHT_SIZE and RINGTAIL_DEBUG set that c leaves unset, so that
// the variables act on every communicator of the process (one that
// NewLocal or a program's own Config made too), as torch's do.
func (c *Comm) WithProcessDebug() error {
	env := Reader{}
	var d Comm
	d.debugFromEnv(&env)
	if err := env.Err(); err != nil {
		return fmt.Errorf("ringtail: environment: %w", err)
	}
	if c.FlightDir == "" {
		c.FlightDir = d.FlightDir
	}
	if c.FlightSize == 0 {
		c.FlightSize = d.FlightSize
	}
	if c.Debug == "" {
		c.Debug = d.Debug
	}
	return nil
}

// validateDebug reports the invalid debugging fields.
func (c *Comm) validateDebug() []error {
	var errs []error
	if c.FlightSize > flight.MaxSize {
		errs = append(errs, fmt.Errorf("flight recorder size %d must be at most %d (%s)", c.FlightSize, flight.MaxSize, VarFlightSize))
	}
	if c.FlightDir != "" {
		if fi, err := os.Stat(c.FlightDir); err == nil && !fi.IsDir() {
			errs = append(errs, fmt.Errorf("flight recorder directory %q (%s) is a file", c.FlightDir, VarFlightDir))
		}
	}
	switch strings.ToLower(c.Debug) {
	case "", "off", "detail":
	default:
		errs = append(errs, fmt.Errorf("debug %q must be off or detail (%s)", c.Debug, VarDebug))
	}
	return errs
}

// Detail reports whether calls check their call sites.
func (c *Comm) Detail() bool { return strings.EqualFold(c.Debug, "detail") }

// FlightRecorder returns the rank's flight recorder (nil when off).
func (c *Comm) FlightRecorder() (*flight.Recorder, error) {
	if c.FlightSize < 0 {
		return nil, nil
	}
	dir := c.FlightDir
	if dir == "" && c.Timeline != "" {
		dir = filepath.Dir(c.Timeline)
	}
	r, err := flight.New(flight.Config{Rank: c.Rank, World: c.WorldSize, JobID: c.JobID, Generation: c.Generation,
		Size: c.FlightSize, Dir: dir, Names: engine.Names(), Logger: c.Logger})
	if err != nil {
		return nil, fmt.Errorf("ringtail: %w", err)
	}
	return r, nil
}

// Recorder starts the rank's observability when MetricsAddr or Timeline
// is set (nil otherwise: nothing is recorded and the calls' path makes
// one nil check); its server shows fl (the flight recorder; nil: off) at
// /debug/flight.
func (c *Comm) Recorder(fl *flight.Recorder) (*obs.Recorder, error) {
	if c.MetricsAddr == "" && c.Timeline == "" {
		return nil, nil
	}
	addr := ""
	if c.MetricsAddr != "" {
		a, err := obs.RankMetricsAddr(c.MetricsAddr, c.LocalRank)
		if err != nil {
			return nil, fmt.Errorf("ringtail: %w", err)
		}
		addr = a
	}
	timeline := ""
	if c.Timeline != "" {
		timeline = obs.RankTimelinePath(c.Timeline, c.Rank, c.WorldSize)
	}
	gpu, err := nvml.Open(nvml.Config{})
	if err != nil {
		gpu = nil
	}
	// The recorder logs through the communicator's logger: the job-wide
	// logger honouring RINGTAIL_LOG_LEVEL arrives as Config.Logger.
	ocfg := obs.Config{Rank: c.Rank, World: c.WorldSize, MetricsAddr: addr, Secret: c.Secret, Timeline: timeline, GPU: gpu, Logger: c.Logger}
	if fl != nil {
		ocfg.Flight = fl.WriteLive
	}
	rec, err := obs.New(ocfg)
	if err != nil {
		if gpu != nil {
			gpu.Close()
		}
		return nil, fmt.Errorf("ringtail: rank %d: %w", c.Rank, err)
	}
	ev := c.Logger.Info().Int("rank", c.Rank)
	if a := rec.Addr(); a != "" {
		ev = ev.Str("metrics", "http://"+a+"/metrics")
	}
	if timeline != "" {
		ev = ev.Str("timeline", timeline)
	}
	ev.Msg("ringtail: observability on")
	return rec, nil
}

// Open starts a communicator's engine (ringtail.New) over network (nil:
// the transports c chooses; tests pass one): a zero Logger becomes
// DefaultLogger (c keeps it), the process's debugging
// variables fill the fields c leaves unset (WithProcessDebug; c keeps
// them), then it validates c and starts the flight recorder, the
// observability recorder (nil when off; told each link's transport) and
// the engine, which joins the job.
func (c *Comm) Open(ctx context.Context, network transport.Network) (*engine.Engine, *obs.Recorder, error) {
	c.withDefaultLogger()
	if err := c.WithProcessDebug(); err != nil {
		return nil, nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	fl, err := c.FlightRecorder()
	if err != nil {
		return nil, nil, err
	}
	rec, err := c.Recorder(fl)
	if err != nil {
		return nil, nil, err
	}
	s := c.Settings()
	if rec != nil {
		s.Tracer, s.TracePhases = rec, rec.TracesPhases()
	}
	s.Flight, s.Detail, s.Network = fl, c.Detail(), network
	e, err := engine.New(ctx, s)
	if err != nil {
		if rec != nil {
			rec.Close()
		}
		return nil, nil, err
	}
	if rec != nil {
		var links []obs.LinkInfo
		for _, l := range e.Links() {
			links = append(links, obs.LinkInfo{Peer: l.Peer, Channel: l.Channel, Transport: l.Transport, Fallback: l.Fallback})
			c.Logger.Debug().Int("rank", c.Rank).Int("peer", l.Peer).Int("channel", l.Channel).Str("transport", l.Transport).Msg("ringtail: link")
		}
		rec.SetLinks(links)
	}
	return e, rec, nil
}

// Program returns, as text, the program rank c.Rank would run for cl
// (--dump-plan: ringtail.DumpPlan and DumpTree) among ranks placed as
// PlanFacts places them, bandwidth (nil: none) measured; c must be valid.
func (c *Comm) Program(cl *engine.Call, bandwidth topology.Matrix) (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	p, err := engine.Program(cl, c.Rank, c.Settings(), c.PlanFacts(bandwidth))
	if err != nil {
		return "", err
	}
	return p.String(), nil
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
