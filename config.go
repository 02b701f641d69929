package ringtail

import (
	"os"

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
// that nothing reads gets a warning naming the nearest known one.
// docs/settings.md lists every setting: each is declared once, in
// internal/envcfg's Table, from which Config's fields come. New refuses a
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
	EnvCoordinator    = envcfg.VarExternalCoordinator // "external": rank 0 does not host the rendezvous
	EnvListenIP       = envcfg.VarListenIP
	EnvTimeout        = envcfg.VarOpTimeout   // operation timeout, e.g. "5m"
	EnvPeerTimeout    = envcfg.VarPeerTimeout // silence before a peer is declared dead
	EnvConnectTimeout = envcfg.VarConnectTimeout
	EnvChannels       = envcfg.VarChannels
	EnvChunkBytes     = envcfg.VarChunkBytes
	EnvSmallBytes     = envcfg.VarSmallBytes
	EnvPieceBytes     = envcfg.VarPieceBytes  // allreduce pieces on shared memory; "0": off
	EnvPieces         = envcfg.VarPieces      // "auto" (default: measured), "always" or "off"
	EnvAlgorithm      = envcfg.VarAlgorithm   // "auto" (default) or the program of a large allreduce: ring, ring-pieces, two-level, ring-offload (New fails where it cannot run)
	EnvStreams        = envcfg.VarStreams     // connections per pair of ranks across hosts; 0: 8, used where measured to pay
	EnvNoUnix         = envcfg.VarDisableUnix // "1": TCP even within a host
	EnvNoShm          = envcfg.VarDisableShm  // "1": unix sockets instead of shared memory within a host
	EnvTolerate       = envcfg.VarTolerateDeaths
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
// docs/benchmarks-collectives.md, "How the defaults were chosen").
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
