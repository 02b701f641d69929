package ringtail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/launch/slurm"
	"github.com/ringtail-ml/ringtail/internal/logging"
	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/topology"
)

// Environment variables read by ConfigFromEnv. The first six are the ones
// torchrun and `ringtail run` set. RINGTAIL_MASTER_ADDR and
// RINGTAIL_MASTER_PORT, when set, name ringtail's rendezvous instead of
// MASTER_ADDR and MASTER_PORT, which a launcher can then leave to torch
// (its TCPStore cannot share a port with ringtail's coordinator).
const (
	EnvRank           = "RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalRank      = "LOCAL_RANK"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	EnvRingtailAddr   = "RINGTAIL_MASTER_ADDR" // before MASTER_ADDR when set
	EnvRingtailPort   = "RINGTAIL_MASTER_PORT" // before MASTER_PORT when set
	EnvSecret         = "RINGTAIL_SECRET"      // the job secret itself
	EnvSecretFile     = "RINGTAIL_SECRET_FILE" // or a file holding it
	EnvInsecure       = "RINGTAIL_INSECURE"    // "1": allow a job without a secret
	EnvJobID          = "RINGTAIL_JOB_ID"
	EnvCoordinator    = "RINGTAIL_COORDINATOR" // "external": rank 0 does not host the rendezvous
	EnvListenIP       = "RINGTAIL_LISTEN_IP"
	EnvTimeout        = "RINGTAIL_TIMEOUT"      // operation timeout, e.g. "5m"
	EnvPeerTimeout    = "RINGTAIL_PEER_TIMEOUT" // silence before a peer is declared dead
	EnvConnectTimeout = "RINGTAIL_CONNECT_TIMEOUT"
	EnvChannels       = "RINGTAIL_CHANNELS"
	EnvChunkBytes     = "RINGTAIL_CHUNK_BYTES"
	EnvSmallBytes     = "RINGTAIL_SMALL_BYTES"
	EnvPieceBytes     = "RINGTAIL_PIECE_BYTES" // allreduce pieces on shared memory; "0": off
	EnvPieces         = "RINGTAIL_PIECES"      // "auto" (default: measured), "always" or "off"
	EnvAlgorithm      = "RINGTAIL_ALGORITHM"   // "auto" (default) or the program of a large allreduce: ring, ring-pieces, two-level, ring-offload
	EnvStreams        = "RINGTAIL_STREAMS"     // connections per pair of ranks across hosts; 0: 8, used where measured to pay
	EnvNoUnix         = "RINGTAIL_NO_UNIX"     // "1": TCP even within a host
	EnvNoShm          = "RINGTAIL_NO_SHM"      // "1": unix sockets instead of shared memory within a host
	EnvTolerate       = "RINGTAIL_TOLERATE_DEATHS"
	EnvFastSpin       = "RINGTAIL_FAST_SPIN"     // fastbox polling before yielding, e.g. "5us"; "0" when ranks outnumber CPUs
	EnvControlPlane   = "RINGTAIL_CONTROL_PLANE" // "libp2p" (default with a secret) or "tcp"
	EnvDataPlane      = "RINGTAIL_DATA_PLANE"    // "sockets" (default) or "libp2p"
	EnvRingOrder      = "RINGTAIL_RING_ORDER"    // "hosts" (default) or "ranks"
	EnvMetricsAddr    = "RINGTAIL_METRICS_ADDR"  // serve /metrics and /events on host:port ("host:9400+": 9400 + LOCAL_RANK)
	EnvTimeline       = "RINGTAIL_TIMELINE"      // write a Chrome trace to FILE (FILE.rank<r>.ext when world > 1)
	// The flight recorder and the call-site check (docs/debugging.md).
	// These three act on every communicator of the process, however it
	// was configured (New fills the Config fields they set when unset).
	EnvFlightDir  = "RINGTAIL_FLIGHT_DIR"  // dump each rank's last calls here when a collective fails (default: the timeline's directory)
	EnvFlightSize = "RINGTAIL_FLIGHT_SIZE" // calls the flight recorder keeps (default 2000; "0": off)
	EnvDebug      = "RINGTAIL_DEBUG"       // "detail": every collective checks that all ranks call it from the same call site
	// EnvJobCompletionIndex is the pod's index in a Kubernetes Indexed
	// Job: the rank when RANK is unset (see ConfigFromLookup).
	EnvJobCompletionIndex = "JOB_COMPLETION_INDEX"
)

// Defaults, measured on a 2-core host over loopback and unix sockets (see
// docs/benchmarks.md).
const (
	DefaultOpTimeout      = 5 * time.Minute
	DefaultPeerTimeout    = 10 * time.Second
	DefaultConnectTimeout = 2 * time.Minute
	DefaultChannels       = 1
	DefaultChunkBytes     = 1 << 20
	DefaultSmallBytes     = 4 << 10
	// DefaultPieceBytes is the allreduce piece (see Config.PieceBytes),
	// the size that measured best where pieces pay; SuggestedPieceBytes
	// is the same size, for flags that set one.
	DefaultPieceBytes   = 1 << 20
	SuggestedPieceBytes = DefaultPieceBytes
)

// Config configures a communicator. The zero value is not valid; start from
// ConfigFromEnv or fill Rank, WorldSize, MasterAddr, MasterPort and Secret.
type Config struct {
	Rank           int
	WorldSize      int
	LocalRank      int
	LocalWorldSize int
	// MasterAddr:MasterPort is the rendezvous coordinator. Rank 0 hosts it
	// unless ExternalCoordinator is set (as `ringtail run` does).
	MasterAddr          string
	MasterPort          int
	ExternalCoordinator bool
	// JobID scopes authentication; ranks of one job share it.
	JobID string
	// Secret authenticates every connection (HMAC-SHA256). Required for a
	// world larger than one unless Insecure is set.
	Secret   []byte
	Insecure bool
	// Generation is the membership generation; connections from another
	// generation are refused.
	Generation uint64
	// ListenIP is the IP this rank's data plane binds and advertises; empty
	// means the address that routes to MasterAddr.
	ListenIP string
	// DisableUnix forces TCP between ranks of one host.
	DisableUnix bool
	// DisableShm keeps frames on the unix socket instead of moving them
	// through shared-memory rings between ranks of one host.
	DisableShm bool
	// TolerateDeaths keeps the communicator usable when a peer dies or goes
	// silent: only a call that involves the dead peer fails (and then
	// fails the communicator); contributions and subgroup calls among the
	// living go on. For coded allreduce and eviction; Dead lists the dead.
	TolerateDeaths bool
	// OpTimeout bounds every collective (and Barrier); PeerTimeout is how
	// long a peer may be silent (not even heartbeats) before it is declared
	// dead or frozen; ConnectTimeout bounds New.
	OpTimeout      time.Duration
	PeerTimeout    time.Duration
	ConnectTimeout time.Duration
	// ControlPlane is how ranks reach the rendezvous: "libp2p" (the
	// default when the job has a secret: length-prefixed JSON messages
	// over a Noise-secured libp2p stream to a coordinator whose peer
	// identity is derived from the job secret, so an impostor is refused
	// before anything is sent) or "tcp" (the same messages over TCP with
	// an HMAC challenge–response over the secret; the default of an
	// insecure job). Every rank and the coordinator must use the same one.
	ControlPlane string
	// DataPlane is how gradients move: "sockets" (unix sockets and shared
	// memory within a host, TCP between hosts) or "libp2p" (Noise-encrypted
	// streams, for untrusted networks; several times slower).
	DataPlane string
	// RingOrder is the order of the ranks around the world's ring: "hosts"
	// (the default: each host's ranks adjacent, so the ring crosses every
	// host's network link once in each direction whatever the launcher's
	// placement; topology.RingOrder) or "ranks" (rank order, as NCCL and
	// Gloo use). Empty means "hosts". It changes only the speed and the order in which floats
	// are added, never which results land where.
	RingOrder string
	// FastSpin is how long a small-message wait polls before yielding the
	// CPU; 0 yields at once (the launcher sets that when ranks outnumber
	// CPUs).
	FastSpin time.Duration
	// Channels is the number of parallel rings (and connections per peer).
	Channels int
	// ChunkBytes is the pipelining unit (frame size).
	ChunkBytes int
	// SmallBytes is the size at or below which latency-optimal algorithms
	// (recursive doubling, binomial tree) replace the ring.
	SmallBytes int
	// PieceBytes, when positive, is the largest piece of an AllReduce
	// reduced at once when every rank's links are shared memory (one
	// host): a larger call runs as ring allreduces of consecutive pieces,
	// each finished before the next, so that a piece's steps run in the
	// CPUs' caches instead of streaming the whole buffer through memory in
	// every step of the ring. With the cores to itself a job gains up to
	// 2× busbw; but pieces synchronise the ranks hundreds of times per
	// call, and with another program busy on the cores a large allreduce
	// then runs 3–10× slower than the plain ring (docs/benchmarks.md).
	// Pieces says which runs (0 here: never pieces). A piece whose ring
	// segments exceed a fastbox (512 KiB) runs on the queued path; across
	// hosts pieces are not used. Every rank must give the same value.
	PieceBytes int
	// Pieces chooses between pieces and the plain ring for an AllReduce
	// of every rank larger than PieceBytes: "auto" (the default; "" too)
	// runs both in turn and keeps the one the ranks measure faster,
	// probing the other now and then and at once when the time drifts
	// (the load changed); "always" runs every AllReduce larger than
	// PieceBytes in pieces (a subgroup's too); "off" never. Every rank
	// must give the same value.
	Pieces string
	// Streams is the number of connections per pair of ranks when the job
	// spans hosts (0, the default: 8; at least Channels): where one TCP
	// stream cannot fill a link (its window over a long round trip), the
	// link probe measures one stream against all of them at once and the
	// decision point gives programs as many channels as the cost model
	// says pay. Every rank must give the same value.
	Streams int
	// Algorithm is the program of an AllReduce of every rank larger than
	// SmallBytes: "auto" (the default; "" too) lets the decision point
	// choose among those that apply — the ring, pieces (above), and
	// across hosts the two-level allreduce (hosts of several ranks) and
	// the offload of a rank behind a slow link — by the cost model and by
	// measuring them (docs/design.md); "ring", "ring-pieces", "two-level"
	// or "ring-offload" runs that one where it applies (the ring where it
	// does not). Every rank must give the same value.
	Algorithm string
	// Logger receives structured logs; the zero value discards them.
	Logger zerolog.Logger
	// MetricsAddr, when set, serves this rank's Prometheus metrics
	// (/metrics), its event stream for the dashboard (/events) and /info
	// on host:port (port 0: a free one; "host:9400+": port 9400 +
	// LocalRank). See docs/observability.md.
	MetricsAddr string
	// Timeline, when set, writes this rank's Chrome trace / Perfetto
	// timeline to this file (with ".rank<r>" before the extension when
	// WorldSize > 1); `ringtail timeline merge` joins the ranks' files.
	Timeline string
	// FlightDir is where each rank dumps its flight recorder (its last
	// FlightSize calls, as JSON) when a collective fails on any rank, and
	// on SIGUSR1 (created if need be); empty: the timeline's directory, if
	// any (else a failure is not dumped, and SIGUSR1 dumps into the
	// temporary directory).
	// `ringtail debug analyze DIR` tells the story. See docs/debugging.md.
	FlightDir string
	// FlightSize is how many calls the flight recorder keeps: 0 means
	// DefaultFlightSize, a negative value turns it off.
	FlightSize int
	// Debug "detail" makes every collective check, before it runs, that
	// every rank calls it from the same call site (a hash of the caller's
	// program counters; WithCallSite names one): a rank that skipped one
	// of two calls of the same shape then fails every rank naming both
	// call sites, where it would otherwise get a wrong result. It costs a
	// small collective per call; "" or "off": none. Every rank must give
	// the same value.
	Debug string

	network transport.Network // tests: an in-memory network
}

// DefaultConfig returns a Config with every tunable at its default and the
// given rank and world size.
func DefaultConfig(rank, world int) Config {
	return Config{
		Rank: rank, WorldSize: world, LocalRank: rank, LocalWorldSize: world,
		MasterAddr: "127.0.0.1", JobID: "ringtail",
		OpTimeout: DefaultOpTimeout, PeerTimeout: DefaultPeerTimeout, ConnectTimeout: DefaultConnectTimeout,
		Channels: DefaultChannels, ChunkBytes: DefaultChunkBytes, SmallBytes: DefaultSmallBytes,
		PieceBytes: DefaultPieceBytes, Pieces: "auto", DataPlane: "sockets", RingOrder: "hosts", FastSpin: 5 * time.Microsecond, Logger: zerolog.Nop(),
	}
}

// ConfigFromEnv reads the torchrun/ringtail environment (see the Env*
// constants) over DefaultConfig. It reports every malformed variable.
func ConfigFromEnv() (Config, error) { return ConfigFromLookup(os.LookupEnv) }

// ConfigFromLookup is ConfigFromEnv reading variables through lookup (for
// callers that overlay their own settings on the environment, such as the
// C API's overrides). It asks for every variable it knows, whichever others
// are set. Its Logger writes to stderr as RINGTAIL_LOG_LEVEL (default warn:
// refused peers are logged) and RINGTAIL_LOG_FORMAT say.
//
// Ranks started by a cluster's own launcher need no torchrun variables:
// when RANK is unset,
//   - a task of a Slurm job step (srun sets SLURM_JOB_ID, SLURM_STEP_ID
//     and SLURM_PROCID; see internal/launch/slurm) takes its rank from
//     SLURM_PROCID, the world size from SLURM_STEP_NUM_TASKS, its local
//     rank and world from SLURM_LOCALID and the step's tasks on its node,
//     the master address from the first node of the step's node list, the
//     master port from the job and step ids (20000 + (10·job + step) mod
//     10000) and the job id "slurm-JOB.STEP";
//   - a pod of a Kubernetes Indexed Job takes its rank from
//     JOB_COMPLETION_INDEX, with local rank 0 of 1; WORLD_SIZE, MASTER_ADDR
//     and MASTER_PORT come from the manifest (deploy/k8s).
//
// Any of WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (and their RINGTAIL_MASTER_* forms) and RINGTAIL_JOB_ID that is set still
// wins; the secret always comes from RINGTAIL_SECRET or RINGTAIL_SECRET_FILE.
func ConfigFromLookup(lookup func(name string) (string, bool)) (Config, error) {
	c := DefaultConfig(0, 1)
	env := envcfg.Reader{Lookup: lookup}
	_, rankSet := env.LookupVar(EnvRank)
	jobID := ""
	cluster := clusterPlacement(&env, rankSet, &c, &jobID)
	env.Int(EnvRank, &c.Rank)
	env.Int(EnvWorldSize, &c.WorldSize)
	if !cluster {
		c.LocalRank, c.LocalWorldSize = c.Rank, c.WorldSize
	}
	env.Int(EnvLocalRank, &c.LocalRank)
	env.Int(EnvLocalWorldSize, &c.LocalWorldSize)
	if v := env.Get(EnvMasterAddr); v != "" {
		c.MasterAddr = v
	}
	if v := env.Get(EnvRingtailAddr); v != "" {
		c.MasterAddr = v
	}
	if v := env.Get(EnvRingtailPort); strings.TrimSpace(v) != "" {
		_ = env.Get(EnvMasterPort) // asked for (see above), but torch's, not ours to parse
		env.Int(EnvRingtailPort, &c.MasterPort)
	} else {
		env.Int(EnvMasterPort, &c.MasterPort)
	}
	if v := env.Get(EnvJobID); v != "" {
		c.JobID = v
	} else if jobID != "" {
		c.JobID = jobID
	} else if c.MasterPort != 0 {
		c.JobID = "job@" + net.JoinHostPort(c.MasterAddr, strconv.Itoa(c.MasterPort))
	}
	secret, hasSecret := env.LookupVar(EnvSecret)
	if f := env.Get(EnvSecretFile); hasSecret {
		c.Secret = []byte(secret)
	} else if f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			env.Fail(fmt.Errorf("%s: %w", EnvSecretFile, err))
		}
		c.Secret = []byte(strings.TrimSpace(string(b)))
	}
	c.Insecure = env.Bool(EnvInsecure)
	c.ExternalCoordinator = env.Get(EnvCoordinator) == "external"
	c.ListenIP = env.Get(EnvListenIP)
	c.DisableUnix = env.Bool(EnvNoUnix)
	c.DisableShm = env.Bool(EnvNoShm)
	c.TolerateDeaths = env.Bool(EnvTolerate)
	if v := env.Get(EnvControlPlane); v != "" {
		c.ControlPlane = v
	}
	if v := env.Get(EnvDataPlane); v != "" {
		c.DataPlane = v
	}
	if v := env.Get(EnvRingOrder); v != "" {
		c.RingOrder = v
	}
	env.Duration(EnvTimeout, &c.OpTimeout)
	env.Duration(EnvPeerTimeout, &c.PeerTimeout)
	env.Duration(EnvConnectTimeout, &c.ConnectTimeout)
	env.Duration(EnvFastSpin, &c.FastSpin)
	env.Int(EnvChannels, &c.Channels)
	env.Int(EnvChunkBytes, &c.ChunkBytes)
	env.Int(EnvSmallBytes, &c.SmallBytes)
	env.Int(EnvPieceBytes, &c.PieceBytes)
	env.Int(EnvStreams, &c.Streams)
	if v := env.Get(EnvAlgorithm); v != "" {
		c.Algorithm = v
	}
	if v := env.Get(EnvPieces); v != "" {
		c.Pieces = v
	}
	c.MetricsAddr = env.Get(EnvMetricsAddr)
	c.Timeline = env.Get(EnvTimeline)
	c.debugFromEnv(&env)
	logger, err := logging.FromLookup(lookup, os.Stderr)
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
func clusterPlacement(env *envcfg.Reader, rankSet bool, c *Config, jobID *string) bool {
	task, isTask, err := slurm.TaskFromLookup(env.LookupVar)
	index, hasIndex := env.LookupVar(EnvJobCompletionIndex)
	_, worldSet := env.LookupVar(EnvWorldSize)
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
		env.Int(EnvJobCompletionIndex, &c.Rank)
		if !worldSet {
			env.Fail(fmt.Errorf("%s=%s gives the rank, but %s (the Job's completions) is not set", EnvJobCompletionIndex, index, EnvWorldSize))
		}
		c.LocalRank, c.LocalWorldSize = 0, 1
		return true
	}
	return false
}

// controlPlane resolves the default control plane: libp2p when the job
// has a secret (its coordinator's identity derives from it), tcp for an
// insecure job.
func (c *Config) controlPlane() string {
	if c.ControlPlane != "" {
		return c.ControlPlane
	}
	if len(c.Secret) == 0 {
		return "tcp"
	}
	return "libp2p"
}

// tunables are the program builders' settings (internal/algo).
func (c *Config) tunables() algo.Tunables {
	return algo.Tunables{SmallBytes: c.SmallBytes, Channels: c.Channels, ChunkBytes: c.ChunkBytes, PieceBytes: c.PieceBytes}
}

// planFacts are the facts the ranks of a communicator with this Config
// would agree on, for --dump-plan: hosts of LocalWorldSize ranks each
// (block placement), fastboxes where that is one host with shared
// memory, and bandwidth (nil: none) as the links' measurements.
func (c *Config) planFacts(bandwidth topology.Matrix) algo.Facts {
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

// settings maps a validated Config to the engine's.
func (c *Config) settings() engine.Settings {
	program, _ := algo.ParseKind(c.Algorithm) // validated
	return engine.Settings{
		Rank: c.Rank, World: c.WorldSize, MasterAddr: c.MasterAddr, MasterPort: c.MasterPort,
		ExternalCoordinator: c.ExternalCoordinator, JobID: c.JobID, Secret: c.Secret, Generation: c.Generation,
		ListenIP: c.ListenIP, DisableUnix: c.DisableUnix, DisableShm: c.DisableShm, TolerateDeaths: c.TolerateDeaths,
		OpTimeout: c.OpTimeout, PeerTimeout: c.PeerTimeout, ConnectTimeout: c.ConnectTimeout,
		ControlPlane: c.controlPlane(), DataPlane: c.DataPlane, HostRingOrder: c.RingOrder != "ranks", FastSpin: c.FastSpin, Tunables: c.tunables(),
		Pieces: c.Pieces, Program: program, Streams: c.Streams, Logger: c.Logger, Network: c.network,
	}
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
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
			bad("master address is empty (set %s)", EnvMasterAddr)
		} else if strings.ContainsAny(c.MasterAddr, " /") {
			bad("master address %q is not a host name or IP", c.MasterAddr)
		}
		if c.MasterPort < 1 || c.MasterPort > 65535 {
			bad("master port %d must be in 1..65535 (set %s)", c.MasterPort, EnvMasterPort)
		}
		if len(c.Secret) == 0 && !c.Insecure {
			bad("no job secret: set %s or %s (or %s=1 to run unauthenticated)", EnvSecret, EnvSecretFile, EnvInsecure)
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
	if c.WorldSize > 1 && len(c.Secret) == 0 && (c.ControlPlane == "libp2p" || c.DataPlane == "libp2p") {
		bad("the libp2p planes derive identities from the job secret: set %s", EnvSecret)
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
		bad("pieces %q must be auto, always or off (%s)", c.Pieces, EnvPieces)
	}
	if c.Streams < 0 || c.Streams > 16 {
		bad("streams %d must be in 0..16 (%s)", c.Streams, EnvStreams)
	}
	if _, err := algo.ParseKind(c.Algorithm); err != nil {
		bad("algorithm %q must be auto, ring, ring-pieces, two-level or ring-offload (%s)", c.Algorithm, EnvAlgorithm)
	}
	if c.MetricsAddr != "" {
		if addr, err := obs.RankMetricsAddr(c.MetricsAddr, c.LocalRank); err != nil {
			bad("metrics address (%s): %v", EnvMetricsAddr, err)
		} else if err := obs.CheckAddr(addr); err != nil {
			bad("metrics address (%s): %v", EnvMetricsAddr, err)
		}
	}
	if c.Timeline != "" {
		if fi, err := os.Stat(filepath.Dir(c.Timeline)); err != nil || !fi.IsDir() {
			bad("timeline %q (%s): its directory does not exist", c.Timeline, EnvTimeline)
		} else if fi, err := os.Stat(c.Timeline); err == nil && fi.IsDir() {
			bad("timeline %q (%s) is a directory", c.Timeline, EnvTimeline)
		}
	}
	errs = append(errs, c.validateDebug()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ringtail: invalid config: %w", err)
	}
	return nil
}
