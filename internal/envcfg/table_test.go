package envcfg

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// The table's defaults are the ones the hand-written Default had before
// the table (issue 41): the same Config for the same rank and world.
func TestDefaultIsTheHandWrittenOne(t *testing.T) {
	want := Comm{
		Rank: 2, WorldSize: 4, LocalRank: 2, LocalWorldSize: 4,
		MasterAddr: "127.0.0.1", JobID: "ringtail",
		OpTimeout: 5 * time.Minute, PeerTimeout: 10 * time.Second, ConnectTimeout: 2 * time.Minute,
		Channels: 1, ChunkBytes: 1 << 20, SmallBytes: 4 << 10,
		PieceBytes: 1 << 20, Pieces: "auto", DataPlane: "sockets", RingOrder: "hosts", FastSpin: 5 * time.Microsecond,
		FrameAuth: "integrity", // new since the table (issue 40): frames between hosts sealed by default
	}
	if got := Default(2, 4); !reflect.DeepEqual(got, want) {
		t.Fatalf("Default(2, 4) = %+v\nwant %+v", got, want)
	}
}

// Every variable the table reads lands in its field, and each kind of
// malformed value is reported naming its variable.
func TestTheTableReadsEveryVariable(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{
		"RINGTAIL_COORDINATOR": "external", "RINGTAIL_INSECURE": "yes", "RINGTAIL_LISTEN_IP": "10.0.0.2",
		"RINGTAIL_NO_UNIX": "1", "RINGTAIL_NO_SHM": "on", "RINGTAIL_TOLERATE_DEATHS": "true",
		"RINGTAIL_TIMEOUT": "1m", "RINGTAIL_PEER_TIMEOUT": "3s", "RINGTAIL_CONNECT_TIMEOUT": "7s",
		"RINGTAIL_CONTROL_PLANE": "tcp", "RINGTAIL_DATA_PLANE": "libp2p", "RINGTAIL_RING_ORDER": "ranks",
		"RINGTAIL_FAST_SPIN": "0s", "RINGTAIL_CHANNELS": "3", "RINGTAIL_CHUNK_BYTES": "65536",
		"RINGTAIL_SMALL_BYTES": "128", "RINGTAIL_PIECE_BYTES": "0", "RINGTAIL_PIECES": "off",
		"RINGTAIL_STREAMS": "4", "RINGTAIL_ALGORITHM": "ring", "RINGTAIL_METRICS_ADDR": "127.0.0.1:0",
		"RINGTAIL_TIMELINE": filepath.Join(dir, "t.json"), "RINGTAIL_FLIGHT_DIR": dir, "RINGTAIL_FLIGHT_SIZE": "0",
		"RINGTAIL_DEBUG": "detail",
	}
	c, err := FromLookup(func(name string) (string, bool) { v, ok := vars[name]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := Default(0, 1)
	want.ExternalCoordinator, want.Insecure, want.ListenIP = true, true, "10.0.0.2"
	want.DisableUnix, want.DisableShm, want.TolerateDeaths = true, true, true
	want.OpTimeout, want.PeerTimeout, want.ConnectTimeout = time.Minute, 3*time.Second, 7*time.Second
	want.ControlPlane, want.DataPlane, want.RingOrder, want.FastSpin = "tcp", "libp2p", "ranks", 0
	want.Channels, want.ChunkBytes, want.SmallBytes, want.PieceBytes, want.Pieces = 3, 65536, 128, 0, "off"
	want.Streams, want.Algorithm, want.MetricsAddr = 4, "ring", "127.0.0.1:0"
	want.Timeline, want.FlightDir, want.FlightSize, want.Debug = vars["RINGTAIL_TIMELINE"], dir, -1, "detail"
	c.Logger = want.Logger
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("read %+v\nwant %+v", c, want)
	}
	if tun := c.Tunables(); !reflect.DeepEqual(tun, algo.Tunables{SmallBytes: 128, Channels: 3, ChunkBytes: 65536}) {
		t.Fatalf("Tunables = %+v", tun)
	}
	bad := map[string]string{"RINGTAIL_CHANNELS": "three", "RINGTAIL_TIMEOUT": "soon", "RINGTAIL_NO_SHM": "maybe", "RINGTAIL_FLIGHT_SIZE": "lots"}
	_, err = FromLookup(func(name string) (string, bool) { v, ok := bad[name]; return v, ok })
	for name := range bad {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("a malformed %s is not reported: %v", name, err)
		}
	}
}

// Validate says what the hand-written Validate said before the table,
// word for word, for each field it refuses.
func TestValidateSaysWhatItSaidBefore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  func(c *Comm)
		want string
	}{
		{func(c *Comm) { c.WorldSize = 0 }, "world size 0 must be at least 1"},
		{func(c *Comm) { c.Rank = 4 }, "rank 4 must be in 0..3"},
		{func(c *Comm) { c.LocalRank = 5 }, "local rank 5 must be in 0..3"},
		{func(c *Comm) { c.MasterAddr = "" }, "master address is empty (set MASTER_ADDR)"},
		{func(c *Comm) { c.MasterAddr = "a b" }, `master address "a b" is not a host name or IP`},
		{func(c *Comm) { c.MasterPort = 0 }, "master port 0 must be in 1..65535 (set MASTER_PORT)"},
		{func(c *Comm) { c.Secret = nil }, "no job secret: set RINGTAIL_SECRET or RINGTAIL_SECRET_FILE (or RINGTAIL_INSECURE=1 to run unauthenticated)"},
		{func(c *Comm) { c.Secret = []byte("short") }, "the job secret is too short: it has 5 bytes"},
		{func(c *Comm) { c.JobID = "" }, "job id must be 1..128 bytes"},
		{func(c *Comm) { c.ListenIP = "host" }, `listen IP "host" is not an IP address`},
		{func(c *Comm) { c.OpTimeout = 0 }, "operation timeout 0s must be positive"},
		{func(c *Comm) { c.PeerTimeout = time.Millisecond }, "peer timeout 1ms must be at least 100ms"},
		{func(c *Comm) { c.ConnectTimeout = -1 }, "connect timeout -1ns must be positive"},
		{func(c *Comm) { c.Channels = 17 }, "channels 17 must be in 1..16"},
		{func(c *Comm) { c.ChunkBytes = 1 }, "chunk 1 bytes must be in 4096..16777216"},
		{func(c *Comm) { c.ControlPlane = "udp" }, `control plane "udp" must be tcp or libp2p`},
		{func(c *Comm) { c.DataPlane = "rdma" }, `data plane "rdma" must be sockets or libp2p`},
		{func(c *Comm) { c.Secret, c.Insecure, c.DataPlane = nil, true, "libp2p" }, "the libp2p planes derive identities from the job secret: set RINGTAIL_SECRET"},
		{func(c *Comm) { c.RingOrder = "random" }, `ring order "random" must be hosts or ranks`},
		{func(c *Comm) { c.FastSpin = 2 * time.Second }, "fast spin 2s must be in 0..1s"},
		{func(c *Comm) { c.SmallBytes = -1 }, "small-message threshold -1 must not be negative"},
		{func(c *Comm) { c.PieceBytes = 1 }, "allreduce piece 1 bytes must be 0 (off) or in 65536..1073741824"},
		{func(c *Comm) { c.Pieces = "some" }, `pieces "some" must be auto, always or off (RINGTAIL_PIECES)`},
		{func(c *Comm) { c.Streams = 17 }, "streams 17 must be in 0..16 (RINGTAIL_STREAMS)"},
		{func(c *Comm) { c.Algorithm = "tree" }, `algorithm "tree" must be auto, ring, ring-pieces, two-level or ring-offload (RINGTAIL_ALGORITHM)`},
		{func(c *Comm) { c.MetricsAddr = "nohost" }, "metrics address (RINGTAIL_METRICS_ADDR): "},
		{func(c *Comm) { c.Timeline = "/no/such/dir/t.json" }, `timeline "/no/such/dir/t.json" (RINGTAIL_TIMELINE): its directory does not exist`},
		{func(c *Comm) { c.FlightDir = file }, `flight recorder directory "` + file + `" (RINGTAIL_FLIGHT_DIR) is a file`},
		{func(c *Comm) { c.FlightSize = flight.MaxSize + 1 }, "flight recorder size"},
		{func(c *Comm) { c.Debug = "verbose" }, `debug "verbose" must be off or detail (RINGTAIL_DEBUG)`},
	} {
		c := Default(0, 4)
		c.MasterPort, c.Secret = 29500, []byte("sixteen-bytes-ok")
		if err := c.Validate(); err != nil {
			t.Fatalf("the base config is invalid: %v", err)
		}
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "ringtail: invalid config: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want it to say %q", err, tc.want)
		}
	}
}
