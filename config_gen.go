// Code generated from internal/envcfg's Table by `go generate ./internal/envcfg`; DO NOT EDIT.

package ringtail

import (
	"time"

	"github.com/rs/zerolog"
)

// Config configures a communicator. The zero value is not valid; start from
// ConfigFromEnv or fill Rank, WorldSize, MasterAddr, MasterPort and Secret.
// docs/settings.md lists the variables that set its fields.
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
	// then runs 3–10× slower than the plain ring (docs/benchmarks-collectives.md).
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
