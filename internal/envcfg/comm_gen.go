// Code generated from internal/envcfg's Table by `go generate ./internal/envcfg`; DO NOT EDIT.

package envcfg

import (
	"time"

	"github.com/rs/zerolog"
)

// The variables of the table's settings, Var and the field's name;
// ringtail's Env* constants name them.
const (
	VarRank                = "RANK"                     // this rank (torchrun's; else SLURM_PROCID or JOB_COMPLETION_INDEX)
	VarWorldSize           = "WORLD_SIZE"               // the number of ranks
	VarLocalRank           = "LOCAL_RANK"               // this rank's index on its host
	VarLocalWorldSize      = "LOCAL_WORLD_SIZE"         // the ranks on this host
	VarMasterAddr          = "MASTER_ADDR"              // the rendezvous host (RINGTAIL_MASTER_ADDR wins when set)
	VarMasterPort          = "MASTER_PORT"              // the rendezvous port (RINGTAIL_MASTER_PORT wins when set)
	VarExternalCoordinator = "RINGTAIL_COORDINATOR"     // "external": rank 0 does not host the rendezvous
	VarJobID               = "RINGTAIL_JOB_ID"          // scopes authentication (default: job@MASTER_ADDR:MASTER_PORT, or a Slurm step's name)
	VarSecret              = "RINGTAIL_SECRET"          // the job secret, at least 16 bytes (or RINGTAIL_SECRET_FILE: a file holding it; not both)
	VarInsecure            = "RINGTAIL_INSECURE"        // allow a job without a secret
	VarListenIP            = "RINGTAIL_LISTEN_IP"       // the IP the data plane binds and advertises (default: the one that routes to the master)
	VarDisableUnix         = "RINGTAIL_NO_UNIX"         // TCP even within a host
	VarDisableShm          = "RINGTAIL_NO_SHM"          // unix sockets instead of shared memory within a host
	VarTolerateDeaths      = "RINGTAIL_TOLERATE_DEATHS" // only a call involving a dead peer fails
	VarOpTimeout           = "RINGTAIL_TIMEOUT"         // bounds every collective, e.g. 5m
	VarPeerTimeout         = "RINGTAIL_PEER_TIMEOUT"    // silence before a peer is declared dead (at least 100ms)
	VarConnectTimeout      = "RINGTAIL_CONNECT_TIMEOUT" // bounds joining the job
	VarControlPlane        = "RINGTAIL_CONTROL_PLANE"   // libp2p (default with a secret) or tcp
	VarDataPlane           = "RINGTAIL_DATA_PLANE"      // sockets or libp2p (Noise-encrypted, slower)
	VarRingOrder           = "RINGTAIL_RING_ORDER"      // hosts (each host's ranks adjacent) or ranks
	VarFrameAuth           = "RINGTAIL_FRAME_AUTH"      // frames between hosts: integrity (an AEAD tag on each), off (trusted networks) or encrypt
	VarFastSpin            = "RINGTAIL_FAST_SPIN"       // fastbox polling before yielding the CPU (0..1s; 0 when ranks outnumber CPUs)
	VarChannels            = "RINGTAIL_CHANNELS"        // parallel rings (1..16)
	VarChunkBytes          = "RINGTAIL_CHUNK_BYTES"     // the pipelining unit, bytes (4096..16777216)
	VarSmallBytes          = "RINGTAIL_SMALL_BYTES"     // at or below: latency-optimal algorithms instead of the ring
	VarPieceBytes          = "RINGTAIL_PIECE_BYTES"     // the allreduce piece on shared memory (0: off; else 65536..1073741824)
	VarPieces              = "RINGTAIL_PIECES"          // auto (measured), always or off
	VarStreams             = "RINGTAIL_STREAMS"         // connections per pair of ranks across hosts (0: 8; 0..16)
	VarAlgorithm           = "RINGTAIL_ALGORITHM"       // auto, or the program of a large allreduce: ring, ring-pieces, two-level, ring-offload
	VarMetricsAddr         = "RINGTAIL_METRICS_ADDR"    // serve /metrics and /events on host:port ("host:9400+": 9400 + LOCAL_RANK)
	VarTimeline            = "RINGTAIL_TIMELINE"        // write a Chrome trace to FILE (FILE.rank<r>.ext when world > 1)
	VarFlightDir           = "RINGTAIL_FLIGHT_DIR"      // dump each rank's last calls here when a collective fails (default: the timeline's directory)
	VarFlightSize          = "RINGTAIL_FLIGHT_SIZE"     // calls the flight recorder keeps (0 here: 2000; the variable's 0: off)
	VarDebug               = "RINGTAIL_DEBUG"           // detail: every collective checks that all ranks call it from the same call site
)

// Comm is a communicator's configuration as the internal packages read
// it: ringtail.Config's fields (documented there), in its order, so
// that each converts to the other.
type Comm struct {
	Rank                int
	WorldSize           int
	LocalRank           int
	LocalWorldSize      int
	MasterAddr          string
	MasterPort          int
	ExternalCoordinator bool
	JobID               string
	Secret              []byte
	Insecure            bool
	Generation          uint64
	ListenIP            string
	DisableUnix         bool
	DisableShm          bool
	TolerateDeaths      bool
	OpTimeout           time.Duration
	PeerTimeout         time.Duration
	ConnectTimeout      time.Duration
	ControlPlane        string
	DataPlane           string
	RingOrder           string
	FrameAuth           string
	FastSpin            time.Duration
	Channels            int
	ChunkBytes          int
	SmallBytes          int
	PieceBytes          int
	Pieces              string
	Streams             int
	Algorithm           string
	Logger              zerolog.Logger
	MetricsAddr         string
	Timeline            string
	FlightDir           string
	FlightSize          int
	Debug               string
}
