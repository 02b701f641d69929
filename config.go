package ringtail

import (
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// Environment variables read by ConfigFromEnv. The first six are the ones
// torchrun and `ringtail run` set. RINGTAIL_MASTER_ADDR and
// RINGTAIL_MASTER_PORT, when set, name ringtail's rendezvous instead of
// MASTER_ADDR and MASTER_PORT, which a launcher can then leave to torch
// (its TCPStore cannot share a port with ringtail's coordinator).
//
// What is refused (ConfigFromEnv's error, or Validate's): a boolean
// (RINGTAIL_INSECURE, RINGTAIL_NO_UNIX, RINGTAIL_NO_SHM,
// RINGTAIL_TOLERATE_DEATHS) other than 1/0, true/false, yes/no or on/off
// (any case; empty is the default); RINGTAIL_SECRET and
// RINGTAIL_SECRET_FILE both set; a job secret shorter than 16 bytes
// (make one with `head -c 32 /dev/urandom | base64`). A RINGTAIL_* name
// that nothing reads gets a warning naming the nearest known one; the
// one table of known names is internal/settings.Known. New refuses a
// program (RINGTAIL_ALGORITHM) that cannot run on the ranks at all.
const (
	EnvRank           = envcfg.VarRank
	EnvWorldSize      = envcfg.VarWorldSize
	EnvLocalRank      = envcfg.VarLocalRank
	EnvLocalWorldSize = envcfg.VarLocalWorldSize
	EnvMasterAddr     = envcfg.VarMasterAddr
	EnvMasterPort     = envcfg.VarMasterPort
	EnvRingtailAddr   = envcfg.VarRingtailAddr // before MASTER_ADDR when set
	EnvRingtailPort   = envcfg.VarRingtailPort // before MASTER_PORT when set
	EnvSecret         = envcfg.VarSecret       // the job secret itself, at least 16 bytes
	EnvSecretFile     = envcfg.VarSecretFile   // or a file holding it (not both)
	EnvInsecure       = envcfg.VarInsecure     // "1" (a boolean): allow a job without a secret
	EnvJobID          = envcfg.VarJobID
	EnvCoordinator    = envcfg.VarCoordinator // "external": rank 0 does not host the rendezvous
	EnvListenIP       = envcfg.VarListenIP
	EnvTimeout        = envcfg.VarTimeout     // operation timeout, e.g. "5m"
	EnvPeerTimeout    = envcfg.VarPeerTimeout // silence before a peer is declared dead
	EnvConnectTimeout = envcfg.VarConnectTimeout
	EnvChannels       = envcfg.VarChannels
	EnvChunkBytes     = envcfg.VarChunkBytes
	EnvSmallBytes     = envcfg.VarSmallBytes
	EnvPieceBytes     = envcfg.VarPieceBytes // allreduce pieces on shared memory; "0": off
	EnvPieces         = envcfg.VarPieces     // "auto" (default: measured), "always" or "off"
	EnvAlgorithm      = envcfg.VarAlgorithm  // "auto" (default) or the program of a large allreduce: ring, ring-pieces, two-level, ring-offload (New fails where it cannot run)
	EnvStreams        = envcfg.VarStreams    // connections per pair of ranks across hosts; 0: 8, used where measured to pay
	EnvNoUnix         = envcfg.VarNoUnix     // "1": TCP even within a host
	EnvNoShm          = envcfg.VarNoShm      // "1": unix sockets instead of shared memory within a host
	EnvTolerate       = envcfg.VarTolerate
	EnvFastSpin       = envcfg.VarFastSpin     // fastbox polling before yielding, e.g. "5us"; "0" when ranks outnumber CPUs
	EnvControlPlane   = envcfg.VarControlPlane // "libp2p" (default with a secret) or "tcp"
	EnvDataPlane      = envcfg.VarDataPlane    // "sockets" (default) or "libp2p"
	EnvFrameAuth      = envcfg.VarFrameAuth    // frames between hosts: "integrity" (default), "off" (trusted networks) or "encrypt"
	EnvRingOrder      = envcfg.VarRingOrder    // "hosts" (default) or "ranks"
	EnvMetricsAddr    = envcfg.VarMetricsAddr  // serve /metrics and /events on host:port ("host:9400+": 9400 + LOCAL_RANK)
	EnvTimeline       = envcfg.VarTimeline     // write a Chrome trace to FILE (FILE.rank<r>.ext when world > 1)
	// The flight recorder and the call-site check (docs/debugging.md).
	// These three act on every communicator of the process, however it
	// was configured (New fills the Config fields they set when unset).
	EnvFlightDir  = envcfg.VarFlightDir  // dump each rank's last calls here when a collective fails (default: the timeline's directory)
	EnvFlightSize = envcfg.VarFlightSize // calls the flight recorder keeps (default 2000; "0": off)
	EnvDebug      = envcfg.VarDebug      // "detail": every collective checks that all ranks call it from the same call site
	// EnvJobCompletionIndex is the pod's index in a Kubernetes Indexed
	// Job: the rank when RANK is unset (see ConfigFromLookup).
	EnvJobCompletionIndex = envcfg.VarJobCompletionIndex
)

// Defaults, measured on a 2-core host over loopback and unix sockets (see
// docs/benchmarks.md).
const (
	DefaultOpTimeout      = envcfg.DefaultOpTimeout
	DefaultPeerTimeout    = envcfg.DefaultPeerTimeout
	DefaultConnectTimeout = envcfg.DefaultConnectTimeout
	DefaultChannels       = envcfg.DefaultChannels
	DefaultChunkBytes     = envcfg.DefaultChunkBytes
	DefaultSmallBytes     = envcfg.DefaultSmallBytes
	// DefaultPieceBytes is the allreduce piece (see Config.PieceBytes),
	// the size that measured best where pieces pay; SuggestedPieceBytes
	// is the same size, for flags that set one.
	DefaultPieceBytes   = envcfg.DefaultPieceBytes
	SuggestedPieceBytes = DefaultPieceBytes
)

// DefaultFlightSize is how many calls the flight recorder keeps by
// default (Config.FlightSize, RINGTAIL_FLIGHT_SIZE).
const DefaultFlightSize = flight.DefaultSize

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
	// FrameAuth is how the sockets data plane protects frames on links
	// between hosts (TCP) after the handshake: "integrity" (the default;
	// "" too: every frame carries an AES-GCM or ChaCha20-Poly1305 tag
	// over its header and payload with keys derived per link and
	// direction in the handshake, so a frame changed on the path fails
	// the call with a KindIntegrity error naming the link and nothing of
	// it is applied), "off" (trusted networks) or "encrypt" (the payload
	// encrypted too). Links within a host are never sealed. Every rank
	// must give the same value (a rank that differs is refused).
	FrameAuth string
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
	// or "ring-offload" runs that one. As NCCL refuses an NCCL_ALGO it
	// cannot use, New fails when the program can never run on the ranks
	// (two-level without two or more hosts of as many ranks each,
	// ring-offload without three or more hosts one of which holds one
	// rank, ring-pieces with PieceBytes 0); a call of a size it does not
	// apply to (ring-pieces at one piece or less) runs the ring, said once
	// per size class at warn. Every rank must give the same value.
	Algorithm string
	// Logger receives structured logs. The zero value writes warnings and
	// errors to stderr (the shared-memory fallback, refused connections,
	// dead peers, a program set by Algorithm that a call skips; see
	// DefaultLogger); zerolog.Nop() silences them, any other logger
	// redirects them.
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
}

// DefaultConfig returns a Config with every tunable at its default and the
// given rank and world size.
func DefaultConfig(rank, world int) Config { return Config(envcfg.Default(rank, world)) }

// ConfigFromEnv reads the torchrun/ringtail environment (see the Env*
// constants) over DefaultConfig, as ConfigFromLookup does. It reports
// every malformed variable (a boolean other than 1/0, true/false, yes/no
// or on/off; RINGTAIL_SECRET and RINGTAIL_SECRET_FILE both set; ...), and
// warns, through the Config's Logger, about every RINGTAIL_* variable no
// part of ringtail reads, naming the nearest one it does (a misspelling),
// on local rank 0.
func ConfigFromEnv() (Config, error) {
	c, err := envcfg.FromEnviron(os.Environ(), os.Stderr)
	return Config(c), err
}

// DefaultLogger returns the logger a communicator uses when Config.Logger
// is the zero value: warnings and errors to stderr (JSON, or lines for
// humans on a terminal).
func DefaultLogger() zerolog.Logger { return envcfg.DefaultLogger() }

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
	c, err := envcfg.FromLookup(lookup)
	return Config(c), err
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
	return (*envcfg.Comm)(c).Validate()
}
