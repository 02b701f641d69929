package envcfg

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

//go:generate go test -run ^TestGeneratedFilesAreCurrent$ -update .

// Table declares every setting of a communicator once, in the order of
// ringtail.Config's fields: its field, variable, default, how the
// variable is read, how the value is checked, its line in the reference
// and its comment in Config. Comm and ringtail.Config (their fields and
// comments), the Var* constants, Default, FromLookup's reading of the
// RINGTAIL_* variables, Validate, Tunables and docs/settings.md's table
// come from it (`go generate ./internal/envcfg` writes the generated
// files; a test fails while they differ). Adding a setting is one entry
// here and its use. The slice is new on each call.
func Table() []Setting {
	return []Setting{
		Of[int]{Decl: Decl{Field: "Rank", Env: "RANK", Doc: "this rank (torchrun's; else SLURM_PROCID or JOB_COMPLETION_INDEX)"},
			Check: func(c *Comm, _ string, v int) error {
				if v < 0 || (c.WorldSize >= 1 && v >= c.WorldSize) {
					return errorf("rank %d must be in 0..%d", v, c.WorldSize-1)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "WorldSize", Env: "WORLD_SIZE", Doc: "the number of ranks"}, Default: 1,
			Check: func(_ *Comm, _ string, v int) error {
				if v < 1 {
					return errorf("world size %d must be at least 1", v)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "LocalRank", Env: "LOCAL_RANK", Doc: "this rank's index on its host"},
			Check: func(c *Comm, _ string, v int) error {
				if c.LocalWorldSize < 1 || v < 0 || v >= c.LocalWorldSize {
					return errorf("local rank %d must be in 0..%d", v, c.LocalWorldSize-1)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "LocalWorldSize", Env: "LOCAL_WORLD_SIZE", Doc: "the ranks on this host"}, Default: 1},
		Of[string]{Decl: Decl{Field: "MasterAddr", Env: "MASTER_ADDR", Also: VarRingtailAddr, Doc: "the rendezvous host (" + VarRingtailAddr + " wins when set)",
			GoDoc: "MasterAddr:MasterPort is the rendezvous coordinator. Rank 0 hosts it\n" +
				"unless ExternalCoordinator is set (as `ringtail run` does)."}, Default: "127.0.0.1",
			Check: func(c *Comm, name string, v string) error {
				if c.WorldSize <= 1 {
					return nil
				}
				if v == "" {
					return errorf("master address is empty (set %s)", name)
				} else if strings.ContainsAny(v, " /") {
					return errorf("master address %q is not a host name or IP", v)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "MasterPort", Env: "MASTER_PORT", Also: VarRingtailPort, Doc: "the rendezvous port (" + VarRingtailPort + " wins when set)"},
			Check: func(c *Comm, name string, v int) error {
				if c.WorldSize > 1 && (v < 1 || v > 65535) {
					return errorf("master port %d must be in 1..65535 (set %s)", v, name)
				}
				return nil
			}},
		Of[bool]{Decl: Decl{Field: "ExternalCoordinator", Env: "RINGTAIL_COORDINATOR", Doc: `"external": rank 0 does not host the rendezvous`},
			Read: func(r *Reader, name string, dst *bool) { *dst = r.Get(name) == "external" }},
		Of[string]{Decl: Decl{Field: "JobID", Env: "RINGTAIL_JOB_ID", Doc: "scopes authentication (default: job@MASTER_ADDR:MASTER_PORT, or a Slurm step's name)",
			GoDoc: "JobID scopes authentication; ranks of one job share it."}, Default: "ringtail",
			Check: func(_ *Comm, _ string, v string) error {
				if v == "" || len(v) > 128 {
					return errorf("job id must be 1..128 bytes")
				}
				return nil
			}},
		Of[[]byte]{Decl: Decl{Field: "Secret", Env: "RINGTAIL_SECRET", Also: VarSecretFile, Doc: "the job secret, at least 16 bytes (or " + VarSecretFile + ": a file holding it; not both)",
			GoDoc: "Secret authenticates every connection (HMAC-SHA256). Required for a\n" +
				"world larger than one unless Insecure is set."},
			Check: func(c *Comm, name string, v []byte) error {
				if len(v) > 0 {
					return settings.CheckSecret(v)
				}
				if c.WorldSize > 1 && !c.Insecure {
					return errorf("no job secret: set %s or %s (or %s=1 to run unauthenticated)", name, VarSecretFile, VarInsecure)
				}
				return nil
			}},
		Of[bool]{Decl: Decl{Field: "Insecure", Env: "RINGTAIL_INSECURE", Doc: "allow a job without a secret"}, Read: (*Reader).Bool},
		Of[uint64]{Decl: Decl{Field: "Generation", Doc: "the membership generation (set by elastic)",
			GoDoc: "Generation is the membership generation; connections from another\n" +
				"generation are refused."}},
		Of[string]{Decl: Decl{Field: "ListenIP", Env: "RINGTAIL_LISTEN_IP", Doc: "the IP the data plane binds and advertises (default: the one that routes to the master)",
			GoDoc: "ListenIP is the IP this rank's data plane binds and advertises; empty\n" +
				"means the address that routes to MasterAddr."},
			Read: (*Reader).String,
			Check: func(_ *Comm, _ string, v string) error {
				if v != "" && net.ParseIP(v) == nil {
					return errorf("listen IP %q is not an IP address", v)
				}
				return nil
			}},
		Of[bool]{Decl: Decl{Field: "DisableUnix", Env: "RINGTAIL_NO_UNIX", Doc: "TCP even within a host",
			GoDoc: "DisableUnix forces TCP between ranks of one host."}, Read: (*Reader).Bool},
		Of[bool]{Decl: Decl{Field: "DisableShm", Env: "RINGTAIL_NO_SHM", Doc: "unix sockets instead of shared memory within a host",
			GoDoc: "DisableShm keeps frames on the unix socket instead of moving them\n" +
				"through shared-memory rings between ranks of one host."}, Read: (*Reader).Bool},
		Of[bool]{Decl: Decl{Field: "TolerateDeaths", Env: "RINGTAIL_TOLERATE_DEATHS", Doc: "only a call involving a dead peer fails",
			GoDoc: "TolerateDeaths keeps the communicator usable when a peer dies or goes\n" +
				"silent: only a call that involves the dead peer fails (and then\n" +
				"fails the communicator); contributions and subgroup calls among the\n" +
				"living go on. For coded allreduce and eviction; Dead lists the dead."}, Read: (*Reader).Bool},
		Of[time.Duration]{Decl: Decl{Field: "OpTimeout", Env: "RINGTAIL_TIMEOUT", Doc: "bounds every collective, e.g. 5m",
			GoDoc: "OpTimeout bounds every collective (and Barrier); PeerTimeout is how\n" +
				"long a peer may be silent (not even heartbeats) before it is declared\n" +
				"dead or frozen; ConnectTimeout bounds New."}, Default: DefaultOpTimeout,
			Read: (*Reader).Duration,
			Check: func(_ *Comm, _ string, v time.Duration) error {
				if v <= 0 {
					return errorf("operation timeout %v must be positive", v)
				}
				return nil
			}},
		Of[time.Duration]{Decl: Decl{Field: "PeerTimeout", Env: "RINGTAIL_PEER_TIMEOUT", Doc: "silence before a peer is declared dead (at least 100ms)"}, Default: DefaultPeerTimeout,
			Read: (*Reader).Duration,
			Check: func(_ *Comm, _ string, v time.Duration) error {
				if v < 100*time.Millisecond {
					return errorf("peer timeout %v must be at least 100ms", v)
				}
				return nil
			}},
		Of[time.Duration]{Decl: Decl{Field: "ConnectTimeout", Env: "RINGTAIL_CONNECT_TIMEOUT", Doc: "bounds joining the job"}, Default: DefaultConnectTimeout,
			Read: (*Reader).Duration,
			Check: func(_ *Comm, _ string, v time.Duration) error {
				if v <= 0 {
					return errorf("connect timeout %v must be positive", v)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "ControlPlane", Env: "RINGTAIL_CONTROL_PLANE", Doc: "libp2p (default with a secret) or tcp",
			GoDoc: "ControlPlane is how ranks reach the rendezvous: \"libp2p\" (the\n" +
				"default when the job has a secret: length-prefixed JSON messages\n" +
				"over a Noise-secured libp2p stream to a coordinator whose peer\n" +
				"identity is derived from the job secret, so an impostor is refused\n" +
				"before anything is sent) or \"tcp\" (the same messages over TCP with\n" +
				"an HMAC challenge–response over the secret; the default of an\n" +
				"insecure job). Every rank and the coordinator must use the same one."},
			Read: (*Reader).String,
			Check: func(_ *Comm, _ string, v string) error {
				if v != "" && v != "tcp" && v != "libp2p" {
					return errorf("control plane %q must be tcp or libp2p", v)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "DataPlane", Env: "RINGTAIL_DATA_PLANE", Doc: "sockets or libp2p (Noise-encrypted, slower)",
			GoDoc: "DataPlane is how gradients move: \"sockets\" (unix sockets and shared\n" +
				"memory within a host, TCP between hosts) or \"libp2p\" (Noise-encrypted\n" +
				"streams, for untrusted networks; several times slower)."}, Default: "sockets",
			Read: (*Reader).String,
			Check: func(c *Comm, _ string, v string) error {
				var errs []error
				if v != "sockets" && v != "libp2p" {
					errs = append(errs, errorf("data plane %q must be sockets or libp2p", v))
				}
				if c.WorldSize > 1 && len(c.Secret) == 0 && (c.ControlPlane == "libp2p" || v == "libp2p") {
					errs = append(errs, errorf("the libp2p planes derive identities from the job secret: set %s", VarSecret))
				}
				return joined(errs...)
			}},
		Of[string]{Decl: Decl{Field: "RingOrder", Env: "RINGTAIL_RING_ORDER", Doc: "hosts (each host's ranks adjacent) or ranks",
			GoDoc: "RingOrder is the order of the ranks around the world's ring: \"hosts\"\n" +
				"(the default: each host's ranks adjacent, so the ring crosses every\n" +
				"host's network link once in each direction whatever the launcher's\n" +
				"placement; topology.RingOrder) or \"ranks\" (rank order, as NCCL and\n" +
				"Gloo use). Empty means \"hosts\". It changes only the speed and the order in which floats\n" +
				"are added, never which results land where."}, Default: "hosts",
			Read: (*Reader).String,
			Check: func(_ *Comm, _ string, v string) error {
				if v != "" && v != "hosts" && v != "ranks" {
					return errorf("ring order %q must be hosts or ranks", v)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "FrameAuth", Env: "RINGTAIL_FRAME_AUTH", Doc: "frames between hosts: integrity (an AEAD tag on each), off (trusted networks) or encrypt",
			GoDoc: "FrameAuth is how the sockets data plane protects frames on links\n" +
				"between hosts (TCP) after the handshake: \"integrity\" (the default;\n" +
				"\"\" too: every frame carries an AES-GCM or ChaCha20-Poly1305 tag\n" +
				"over its header and payload with keys derived per link and\n" +
				"direction in the handshake, so a frame changed on the path fails\n" +
				"the call with a KindIntegrity error naming the link and nothing of\n" +
				"it is applied), \"off\" (trusted networks) or \"encrypt\" (the payload\n" +
				"encrypted too). Links within a host are never sealed. Every rank\n" +
				"must give the same value (a rank that differs is refused)."}, Default: "integrity",
			Read: (*Reader).String,
			Check: func(_ *Comm, name string, v string) error {
				if _, ok := frameAuth(v); !ok {
					return errorf("frame auth %q must be integrity, off or encrypt (%s)", v, name)
				}
				return nil
			}},
		Of[time.Duration]{Decl: Decl{Field: "FastSpin", Env: "RINGTAIL_FAST_SPIN", Doc: "fastbox polling before yielding the CPU (0..1s; 0 when ranks outnumber CPUs)",
			GoDoc: "FastSpin is how long a small-message wait polls before yielding the\n" +
				"CPU; 0 yields at once (the launcher sets that when ranks outnumber\n" +
				"CPUs)."}, Default: 5 * time.Microsecond,
			Read: (*Reader).Duration,
			Check: func(_ *Comm, _ string, v time.Duration) error {
				if v < 0 || v > time.Second {
					return errorf("fast spin %v must be in 0..1s", v)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "Channels", Env: "RINGTAIL_CHANNELS", Doc: "parallel rings (1..16)",
			GoDoc: "Channels is the number of parallel rings (and connections per peer)."}, Default: DefaultChannels,
			Read: (*Reader).Int, Tune: func(t *algo.Tunables, v int) { t.Channels = v },
			Check: func(_ *Comm, _ string, v int) error {
				if v < 1 || v > 16 {
					return errorf("channels %d must be in 1..16", v)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "ChunkBytes", Env: "RINGTAIL_CHUNK_BYTES", Doc: "the pipelining unit, bytes (4096..16777216)",
			GoDoc: "ChunkBytes is the pipelining unit (frame size)."}, Default: DefaultChunkBytes,
			Read: (*Reader).Int, Tune: func(t *algo.Tunables, v int) { t.ChunkBytes = v },
			Check: func(_ *Comm, _ string, v int) error {
				if v < 4096 || v > 16<<20 {
					return errorf("chunk %d bytes must be in 4096..16777216", v)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "SmallBytes", Env: "RINGTAIL_SMALL_BYTES", Doc: "at or below: latency-optimal algorithms instead of the ring",
			GoDoc: "SmallBytes is the size at or below which latency-optimal algorithms\n" +
				"(recursive doubling, binomial tree) replace the ring."}, Default: DefaultSmallBytes,
			Read: (*Reader).Int, Tune: func(t *algo.Tunables, v int) { t.SmallBytes = v },
			Check: func(_ *Comm, _ string, v int) error {
				if v < 0 {
					return errorf("small-message threshold %d must not be negative", v)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "PieceBytes", Env: "RINGTAIL_PIECE_BYTES", Doc: "the allreduce piece on shared memory (0: off; else 65536..1073741824)",
			GoDoc: "PieceBytes, when positive, is the largest piece of an AllReduce\n" +
				"reduced at once when every rank's links are shared memory (one\n" +
				"host): a larger call runs as ring allreduces of consecutive pieces,\n" +
				"each finished before the next, so that a piece's steps run in the\n" +
				"CPUs' caches instead of streaming the whole buffer through memory in\n" +
				"every step of the ring. With the cores to itself a job gains up to\n" +
				"2× busbw; but pieces synchronise the ranks hundreds of times per\n" +
				"call, and with another program busy on the cores a large allreduce\n" +
				"then runs 3–10× slower than the plain ring (docs/benchmarks-collectives.md).\n" +
				"Pieces says which runs (0 here: never pieces). A piece whose ring\n" +
				"segments exceed a fastbox (512 KiB) runs on the queued path; across\n" +
				"hosts pieces are not used. Every rank must give the same value."}, Default: DefaultPieceBytes,
			Read: (*Reader).Int, Tune: func(t *algo.Tunables, v int) { t.PieceBytes = v },
			Check: func(_ *Comm, _ string, v int) error {
				if v != 0 && (v < 64<<10 || v > 1<<30) {
					return errorf("allreduce piece %d bytes must be 0 (off) or in 65536..1073741824", v)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "Pieces", Env: "RINGTAIL_PIECES", Doc: "auto (measured), always or off",
			GoDoc: "Pieces chooses between pieces and the plain ring for an AllReduce\n" +
				"of every rank larger than PieceBytes: \"auto\" (the default; \"\" too)\n" +
				"runs both in turn and keeps the one the ranks measure faster,\n" +
				"probing the other now and then and at once when the time drifts\n" +
				"(the load changed); \"always\" runs every AllReduce larger than\n" +
				"PieceBytes in pieces (a subgroup's too); \"off\" never. Every rank\n" +
				"must give the same value."}, Default: "auto",
			Read: (*Reader).String,
			Check: func(_ *Comm, name string, v string) error {
				switch v {
				case "", "auto", "always", "off":
					return nil
				}
				return errorf("pieces %q must be auto, always or off (%s)", v, name)
			}},
		Of[int]{Decl: Decl{Field: "Streams", Env: "RINGTAIL_STREAMS", Doc: "connections per pair of ranks across hosts (0: 8; 0..16)",
			GoDoc: "Streams is the number of connections per pair of ranks when the job\n" +
				"spans hosts (0, the default: 8; at least Channels): where one TCP\n" +
				"stream cannot fill a link (its window over a long round trip), the\n" +
				"link probe measures one stream against all of them at once and the\n" +
				"decision point gives programs as many channels as the cost model\n" +
				"says pay. Every rank must give the same value."},
			Read: (*Reader).Int,
			Check: func(_ *Comm, name string, v int) error {
				if v < 0 || v > 16 {
					return errorf("streams %d must be in 0..16 (%s)", v, name)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "Algorithm", Env: "RINGTAIL_ALGORITHM", Doc: "auto, or the program of a large allreduce: ring, ring-pieces, two-level, ring-offload",
			GoDoc: "Algorithm is the program of an AllReduce of every rank larger than\n" +
				"SmallBytes: \"auto\" (the default; \"\" too) lets the decision point\n" +
				"choose among those that apply — the ring, pieces (above), and\n" +
				"across hosts the two-level allreduce (hosts of several ranks) and\n" +
				"the offload of a rank behind a slow link — by the cost model and by\n" +
				"measuring them (docs/design.md); \"ring\", \"ring-pieces\", \"two-level\"\n" +
				"or \"ring-offload\" runs that one. As NCCL refuses an NCCL_ALGO it\n" +
				"cannot use, New fails when the program can never run on the ranks\n" +
				"(two-level without two or more hosts of as many ranks each,\n" +
				"ring-offload without three or more hosts one of which holds one\n" +
				"rank, ring-pieces with PieceBytes 0); a call of a size it does not\n" +
				"apply to (ring-pieces at one piece or less) runs the ring, said once\n" +
				"per size class at warn. Every rank must give the same value."},
			Read: (*Reader).String,
			Check: func(_ *Comm, name string, v string) error {
				if _, err := algo.ParseKind(v); err != nil {
					return errorf("algorithm %q must be auto, ring, ring-pieces, two-level or ring-offload (%s)", v, name)
				}
				return nil
			}},
		Of[zerolog.Logger]{Decl: Decl{Field: "Logger", Doc: "structured logs (from RINGTAIL_LOG_LEVEL and RINGTAIL_LOG_FORMAT)",
			GoDoc: "Logger receives structured logs. The zero value writes warnings and\n" +
				"errors to stderr (the shared-memory fallback, refused connections,\n" +
				"dead peers, a program set by Algorithm that a call skips; see\n" +
				"DefaultLogger); zerolog.Nop() silences them, any other logger\n" +
				"redirects them."}},
		Of[string]{Decl: Decl{Field: "MetricsAddr", Env: "RINGTAIL_METRICS_ADDR", Doc: `serve /metrics and /events on host:port ("host:9400+": 9400 + LOCAL_RANK)`,
			GoDoc: "MetricsAddr, when set, serves this rank's Prometheus metrics\n" +
				"(/metrics), its event stream for the dashboard (/events) and /info\n" +
				"on host:port (port 0: a free one; \"host:9400+\": port 9400 +\n" +
				"LocalRank). See docs/observability.md."},
			Read: (*Reader).String,
			Check: func(c *Comm, name string, v string) error {
				if v == "" {
					return nil
				}
				if addr, err := obs.RankMetricsAddr(v, c.LocalRank); err != nil {
					return errorf("metrics address (%s): %v", name, err)
				} else if err := obs.CheckAddr(addr); err != nil {
					return errorf("metrics address (%s): %v", name, err)
				} else if err := obs.CheckExposure(addr, "metrics address ("+name+")", c.Secret); err != nil {
					return err
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "Timeline", Env: "RINGTAIL_TIMELINE", Doc: "write a Chrome trace to FILE (FILE.rank<r>.ext when world > 1)",
			GoDoc: "Timeline, when set, writes this rank's Chrome trace / Perfetto\n" +
				"timeline to this file (with \".rank<r>\" before the extension when\n" +
				"WorldSize > 1); `ringtail timeline merge` joins the ranks' files."},
			Read: (*Reader).String,
			Check: func(_ *Comm, name string, v string) error {
				if v == "" {
					return nil
				}
				if fi, err := os.Stat(filepath.Dir(v)); err != nil || !fi.IsDir() {
					return errorf("timeline %q (%s): its directory does not exist", v, name)
				} else if fi, err := os.Stat(v); err == nil && fi.IsDir() {
					return errorf("timeline %q (%s) is a directory", v, name)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "FlightDir", Env: "RINGTAIL_FLIGHT_DIR", Process: true, Doc: "dump each rank's last calls here when a collective fails (default: the timeline's directory)",
			GoDoc: "FlightDir is where each rank dumps its flight recorder (its last\n" +
				"FlightSize calls, as JSON) when a collective fails on any rank, and\n" +
				"on SIGUSR1 (created if need be); empty: the timeline's directory, if\n" +
				"any (else a failure is not dumped, and SIGUSR1 dumps into the\n" +
				"temporary directory).\n" +
				"`ringtail debug analyze DIR` tells the story. See docs/debugging.md."},
			Read: (*Reader).String,
			Check: func(_ *Comm, name string, v string) error {
				if v == "" {
					return nil
				}
				if fi, err := os.Stat(v); err == nil && !fi.IsDir() {
					return errorf("flight recorder directory %q (%s) is a file", v, name)
				}
				return nil
			}},
		Of[int]{Decl: Decl{Field: "FlightSize", Env: "RINGTAIL_FLIGHT_SIZE", Process: true, Doc: "calls the flight recorder keeps (0 here: 2000; the variable's 0: off)",
			GoDoc: "FlightSize is how many calls the flight recorder keeps: 0 means\n" +
				"DefaultFlightSize, a negative value turns it off."},
			Read: readFlightSize,
			Check: func(_ *Comm, name string, v int) error {
				if v > flight.MaxSize {
					return errorf("flight recorder size %d must be at most %d (%s)", v, flight.MaxSize, name)
				}
				return nil
			}},
		Of[string]{Decl: Decl{Field: "Debug", Env: "RINGTAIL_DEBUG", Process: true, Doc: "detail: every collective checks that all ranks call it from the same call site",
			GoDoc: "Debug \"detail\" makes every collective check, before it runs, that\n" +
				"every rank calls it from the same call site (a hash of the caller's\n" +
				"program counters; WithCallSite names one): a rank that skipped one\n" +
				"of two calls of the same shape then fails every rank naming both\n" +
				"call sites, where it would otherwise get a wrong result. It costs a\n" +
				"small collective per call; \"\" or \"off\": none. Every rank must give\n" +
				"the same value."},
			Read: (*Reader).String,
			Check: func(_ *Comm, name string, v string) error {
				switch strings.ToLower(v) {
				case "", "off", "detail":
					return nil
				}
				return errorf("debug %q must be off or detail (%s)", v, name)
			}},
	}
}

// readFlightSize reads RINGTAIL_FLIGHT_SIZE: a count, "0" turning the
// recorder off (the field's -1; the field's 0 is the default size).
func readFlightSize(r *Reader, name string, dst *int) {
	if _, ok := r.LookupVar(name); ok {
		n := *dst
		r.Int(name, &n)
		if n == 0 {
			n = -1 // "0": off
		}
		*dst = n
	}
}
