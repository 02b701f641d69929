package ringtail

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startComms creates n communicators in this process over real sockets.
func startComms(t testing.TB, n int, mutate func(*Config)) []*Comm {
	t.Helper()
	return startCommsOn(t, n, mutate, nil)
}

// startCommsOn is startComms with rank r over network(r) (nil: the
// transports the Config chooses).
func startCommsOn(t testing.TB, n int, mutate func(*Config), network func(rank int) transport.Network) []*Comm {
	t.Helper()
	ctx := context.Background()
	comms, err := engine.NewLocal(n, func() ([]*Comm, []error, error) {
		return joinLocal(ctx, n, func(cfg *Config) {
			cfg.Secret = []byte("test-secret-0123456")
			cfg.JobID = "test"
			cfg.OpTimeout = 20 * time.Second
			cfg.PeerTimeout = 3 * time.Second
			cfg.ConnectTimeout = 20 * time.Second
			if mutate != nil {
				mutate(cfg)
			}
		}, network)
	}, (*Comm).Close)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// each runs f on every rank concurrently and returns the errors by rank.
func each(comms []*Comm, f func(r int, c *Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r, c) }()
	}
	wg.Wait()
	return errs
}

func noErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestAllReduceFloat32EqualsSequentialReference(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 8} {
		comms := startComms(t, n, func(c *Config) { c.SmallBytes = 256; c.Channels = 2 })
		for _, count := range []int{0, 1, 7, 61, 257, 10007} {
			for _, op := range []Op{Sum, Avg, Max, Min, Prod} {
				rng := rand.New(rand.NewSource(int64(n*1000 + count)))
				in := make([][]float32, n)
				for r := range in {
					in[r] = make([]float32, count)
					for i := range in[r] {
						in[r][i] = float32(rng.Intn(7) + 1) // small integers: exact in any order
					}
				}
				want := make([]float32, count)
				for i := range want {
					acc := in[0][i]
					for r := 1; r < n; r++ {
						switch op {
						case Sum, Avg:
							acc += in[r][i]
						case Prod:
							acc *= in[r][i]
						case Max:
							acc = max(acc, in[r][i])
						case Min:
							acc = min(acc, in[r][i])
						}
					}
					if op == Avg {
						acc /= float32(n)
					}
					want[i] = acc
				}
				bufs := make([][]float32, n)
				for r := range bufs {
					bufs[r] = append([]float32(nil), in[r]...)
				}
				noErrors(t, each(comms, func(r int, c *Comm) error {
					return c.AllReduce(context.Background(), Float32s(bufs[r]), op)
				}))
				for r := range bufs {
					for i := range want {
						if bufs[r][i] != want[i] {
							t.Fatalf("n=%d count=%d %v: rank %d elem %d = %v, want %v", n, count, op, r, i, bufs[r][i], want[i])
						}
					}
				}
			}
		}
	}
}

func TestEveryRankEndsWithIdenticalBits(t *testing.T) {
	const n, count = 4, 100003
	comms := startComms(t, n, nil)
	bufs := make([][]float32, n)
	for r := range bufs {
		rng := rand.New(rand.NewSource(int64(r)))
		bufs[r] = make([]float32, count)
		for i := range bufs[r] {
			bufs[r][i] = rng.Float32()*2 - 1 // sums depend on order: bits must still agree
		}
	}
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(context.Background(), Float32s(bufs[r]), Sum) }))
	for r := 1; r < n; r++ {
		for i := range bufs[0] {
			if bufs[r][i] != bufs[0][i] {
				t.Fatalf("rank %d elem %d: %v vs rank 0 %v", r, i, bufs[r][i], bufs[0][i])
			}
		}
	}
}

func TestCollectivesEveryType(t *testing.T) {
	const n = 3
	comms := startComms(t, n, func(c *Config) { c.SmallBytes = 64 })
	ctx := context.Background()
	for _, count := range []int{0, 1, 13, 4099} {
		// int64, float64, int32 allreduce
		i64 := make([][]int64, n)
		f64 := make([][]float64, n)
		i32 := make([][]int32, n)
		h16 := make([][]uint16, n)
		for r := 0; r < n; r++ {
			i64[r], f64[r], i32[r], h16[r] = make([]int64, count), make([]float64, count), make([]int32, count), make([]uint16, count)
			for i := 0; i < count; i++ {
				i64[r][i], f64[r][i], i32[r][i] = int64(r*i), float64(r)+0.5, int32(r-i)
				h16[r][i] = f32ToF16(float32(r + 1))
			}
		}
		noErrors(t, each(comms, func(r int, c *Comm) error {
			return errors.Join(
				c.AllReduce(ctx, Int64s(i64[r]), Sum),
				c.AllReduce(ctx, Float64s(f64[r]), Max),
				c.AllReduce(ctx, Int32s(i32[r]), Min),
				c.AllReduce(ctx, Float16s(h16[r]), Sum))
		}))
		for r := 0; r < n; r++ {
			for i := 0; i < count; i++ {
				if i64[r][i] != int64(3*i) || f64[r][i] != 2.5 || i32[r][i] != int32(-i) || f16ToF32(h16[r][i]) != 6 {
					t.Fatalf("count=%d rank %d elem %d: %v %v %v %v", count, r, i, i64[r][i], f64[r][i], i32[r][i], f16ToF32(h16[r][i]))
				}
			}
		}
		// broadcast from each root
		for root := 0; root < n; root++ {
			b := make([][]float32, n)
			for r := range b {
				b[r] = make([]float32, count)
				for i := range b[r] {
					b[r][i] = float32(r*1000 + i)
				}
			}
			noErrors(t, each(comms, func(r int, c *Comm) error { return c.Broadcast(ctx, Float32s(b[r]), root) }))
			for r := range b {
				for i := range b[r] {
					if b[r][i] != float32(root*1000+i) {
						t.Fatalf("broadcast root %d rank %d elem %d = %v", root, r, i, b[r][i])
					}
				}
			}
		}
		// allgather and reduce-scatter
		send := make([][]int32, n)
		recv := make([][]int32, n)
		for r := range send {
			send[r] = make([]int32, count)
			for i := range send[r] {
				send[r][i] = int32(r*100 + i)
			}
			recv[r] = make([]int32, n*count)
		}
		noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllGather(ctx, Int32s(send[r]), Int32s(recv[r])) }))
		for r := range recv {
			for q := 0; q < n; q++ {
				for i := 0; i < count; i++ {
					if recv[r][q*count+i] != int32(q*100+i) {
						t.Fatalf("allgather rank %d block %d elem %d = %d", r, q, i, recv[r][q*count+i])
					}
				}
			}
		}
		out := make([][]int32, n)
		for r := range out {
			out[r] = make([]int32, count)
		}
		noErrors(t, each(comms, func(r int, c *Comm) error { return c.ReduceScatter(ctx, Int32s(recv[r]), Int32s(out[r]), Sum) }))
		for r := range out {
			for i := range out[r] {
				if want := int32(3 * (r*100 + i)); out[r][i] != want {
					t.Fatalf("reduce-scatter rank %d elem %d = %d want %d", r, i, out[r][i], want)
				}
			}
		}
		noErrors(t, each(comms, func(r int, c *Comm) error { return c.Barrier(ctx) }))
	}
}

func TestLargeAllReduce16MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("16 MiB per rank")
	}
	const n, count = 4, 4 << 20
	comms := startComms(t, n, nil)
	bufs := make([][]float32, n)
	for r := range bufs {
		bufs[r] = make([]float32, count)
		for i := range bufs[r] {
			bufs[r][i] = float32(r + i%5)
		}
	}
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(context.Background(), Float32s(bufs[r]), Sum) }))
	for r := range bufs {
		for i := range bufs[r] {
			if want := float32(6 + 4*(i%5)); bufs[r][i] != want {
				t.Fatalf("rank %d elem %d = %v want %v", r, i, bufs[r][i], want)
			}
		}
	}
}

func TestMismatchedCallsAreReportedOnEveryRank(t *testing.T) {
	cases := []struct {
		name string
		call func(r int, c *Comm) error
	}{
		{"count", func(r int, c *Comm) error {
			n := 1000
			if r == 2 {
				n = 999
			}
			return c.AllReduce(context.Background(), Float32s(make([]float32, n)), Sum)
		}},
		{"dtype", func(r int, c *Comm) error {
			if r == 1 {
				return c.AllReduce(context.Background(), Float64s(make([]float64, 500)), Sum)
			}
			return c.AllReduce(context.Background(), Float32s(make([]float32, 1000)), Sum)
		}},
		{"op", func(r int, c *Comm) error {
			op := Sum
			if r == 3 {
				op = Max
			}
			return c.AllReduce(context.Background(), Float32s(make([]float32, 100000)), op)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comms := startComms(t, 4, nil)
			// A mismatch noticed only by waiting would be a timeout
			// (KindTimeout after the 20 s OpTimeout), not KindMismatch.
			errs := each(comms, tc.call)
			for r, err := range errs {
				var e *Error
				if !errors.As(err, &e) || e.Kind != KindMismatch {
					t.Fatalf("rank %d: got %v, want a mismatch error", r, err)
				}
			}
			t.Logf("rank 0 says: %v", errs[0])
		})
	}
}

func TestInvalidCallOnOneRankFailsEveryRankFast(t *testing.T) {
	comms := startComms(t, 3, nil)
	errs := each(comms, func(r int, c *Comm) error {
		if r == 1 {
			return c.AllReduce(context.Background(), Raw(make([]byte, 7), Float32), Sum)
		}
		return c.AllReduce(context.Background(), Float32s(make([]float32, 100)), Sum)
	})
	for r, err := range errs {
		if rank, ok := RankOf(err); !ok || rank != 1 {
			t.Fatalf("rank %d: %v does not blame rank 1", r, err)
		}
	}
}

func TestContextDeadlineNamesTheRankWaitedOn(t *testing.T) {
	comms := startComms(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Rank 1 never calls: rank 0 must time out naming rank 1.
	err := comms[0].AllReduce(ctx, Float32s(make([]float32, 10)), Sum)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTimeout || e.Rank != 1 {
		t.Fatalf("got %v, want a timeout blaming rank 1", err)
	}
	// Rank 1 hears of it rather than hanging.
	err = comms[1].AllReduce(context.Background(), Float32s(make([]float32, 10)), Sum)
	if rank, ok := RankOf(err); !ok || rank != 1 {
		t.Fatalf("rank 1 got %v", err)
	}
}

// TestWrongSecretIsRefused joins a rank with the wrong secret over each
// control plane: the TCP rendezvous refuses its HMAC answer, the libp2p
// one its derived coordinator key (Noise fails before anything is sent).
func TestWrongSecretIsRefused(t *testing.T) {
	for _, plane := range []string{"tcp", "libp2p"} {
		t.Run(plane, func(t *testing.T) {
			errs := joinWithSecrets(t, plane, "secret-0-0123456789", "secret-1-0123456789")
			if errs[1] == nil {
				t.Fatal("rank with the wrong secret joined")
			}
			if plane == "libp2p" && !strings.Contains(errs[1].Error(), "coordinator key") {
				t.Fatalf("rank with the wrong secret: %v", errs[1])
			}
			t.Logf("rank 1: %v", errs[1])
		})
	}
}

// joinWithSecrets starts one rank per secret over the given control plane
// and returns each rank's New error (closing those that joined).
func joinWithSecrets(t *testing.T, plane string, secrets ...string) []error {
	port := freePort(t)
	errs := make([]error, len(secrets))
	var wg sync.WaitGroup
	for r := range secrets {
		wg.Go(func() {
			cfg := DefaultConfig(r, len(secrets))
			cfg.MasterPort, cfg.ControlPlane = port, plane
			cfg.Secret = []byte(secrets[r])
			cfg.ConnectTimeout = 3 * time.Second
			c, err := New(context.Background(), cfg)
			if c != nil {
				c.Close()
			}
			errs[r] = err
		})
	}
	wg.Wait()
	return errs
}

func TestConfigValidation(t *testing.T) {
	good := DefaultConfig(0, 2)
	good.MasterPort = 1234
	good.Secret = []byte("sixteen-byte-key")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"negative rank":   func(c *Config) { c.Rank = -1 },
		"rank >= world":   func(c *Config) { c.Rank = 2 },
		"zero world":      func(c *Config) { c.WorldSize = 0 },
		"no secret":       func(c *Config) { c.Secret = nil },
		"short secret":    func(c *Config) { c.Secret = []byte("s") },
		"bad port":        func(c *Config) { c.MasterPort = 70000 },
		"bad addr":        func(c *Config) { c.MasterAddr = "a b" },
		"bad listen ip":   func(c *Config) { c.ListenIP = "nope" },
		"zero timeout":    func(c *Config) { c.OpTimeout = 0 },
		"tiny chunk":      func(c *Config) { c.ChunkBytes = 10 },
		"tiny piece":      func(c *Config) { c.PieceBytes = 4096 },
		"negative piece":  func(c *Config) { c.PieceBytes = -1 },
		"bad pieces":      func(c *Config) { c.Pieces = "sometimes" },
		"too many chans":  func(c *Config) { c.Channels = 99 },
		"bad local rank":  func(c *Config) { c.LocalRank = 5 },
		"tiny peer limit": func(c *Config) { c.PeerTimeout = time.Millisecond },
	}
	for name, mutate := range cases {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(EnvRank, "3")
	t.Setenv(EnvWorldSize, "4")
	t.Setenv(EnvMasterAddr, "10.0.0.1")
	t.Setenv(EnvMasterPort, "29500")
	t.Setenv(EnvSecret, "xyz-0123456789ab")
	t.Setenv(EnvTimeout, "30s")
	t.Setenv(EnvPieceBytes, "0")
	t.Setenv(EnvPieces, "always")
	c, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank != 3 || c.WorldSize != 4 || c.MasterPort != 29500 || string(c.Secret) != "xyz-0123456789ab" || c.OpTimeout != 30*time.Second || c.PieceBytes != 0 || c.Pieces != "always" {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvWorldSize, "four")
	if _, err := ConfigFromEnv(); err == nil {
		t.Fatal("WORLD_SIZE=four accepted")
	}
}

// RINGTAIL_MASTER_ADDR and RINGTAIL_MASTER_PORT, when set, come before
// MASTER_ADDR and MASTER_PORT, which are then torch's (a MASTER_PORT that
// ringtail would not accept does not matter).
func TestConfigFromEnvPrefersRingtailMaster(t *testing.T) {
	env := map[string]string{EnvRank: "1", EnvWorldSize: "2", EnvMasterAddr: "10.0.0.1", EnvMasterPort: "29500"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	c, err := ConfigFromLookup(lookup)
	if err != nil || c.MasterAddr != "10.0.0.1" || c.MasterPort != 29500 {
		t.Fatalf("MASTER_* only: %s:%d %v", c.MasterAddr, c.MasterPort, err)
	}
	env[EnvRingtailAddr], env[EnvRingtailPort] = "10.0.0.2", "29400"
	env[EnvMasterPort] = "torch's"
	c, err = ConfigFromLookup(lookup)
	if err != nil || c.MasterAddr != "10.0.0.2" || c.MasterPort != 29400 || c.JobID != "job@10.0.0.2:29400" {
		t.Fatalf("RINGTAIL_MASTER_*: %s:%d job %q %v", c.MasterAddr, c.MasterPort, c.JobID, err)
	}
	delete(env, EnvRingtailAddr) // the port alone: the address is still MASTER_ADDR
	c, err = ConfigFromLookup(lookup)
	if err != nil || c.MasterAddr != "10.0.0.1" || c.MasterPort != 29400 {
		t.Fatalf("RINGTAIL_MASTER_PORT only: %s:%d %v", c.MasterAddr, c.MasterPort, err)
	}
	env[EnvRingtailPort] = "many"
	if _, err := ConfigFromLookup(lookup); err == nil || !strings.Contains(err.Error(), EnvRingtailPort) {
		t.Fatalf("RINGTAIL_MASTER_PORT=many: %v", err)
	}
	env[EnvRingtailPort] = "" // empty is unset: MASTER_PORT again, and now it must parse
	if _, err := ConfigFromLookup(lookup); err == nil || !strings.Contains(err.Error(), EnvMasterPort) {
		t.Fatalf("MASTER_PORT=torch's without RINGTAIL_MASTER_PORT: %v", err)
	}
}

func TestWorldOfOne(t *testing.T) {
	cfg := DefaultConfig(0, 1)
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := []float32{1, 2, 3}
	if err := c.AllReduce(context.Background(), Float32s(v), Avg); err != nil || v[2] != 3 {
		t.Fatalf("%v %v", v, err)
	}
	out := make([]float32, 3)
	if err := c.AllGather(context.Background(), Float32s(v), Float32s(out)); err != nil || out[1] != 2 {
		t.Fatalf("%v %v", out, err)
	}
	if err := c.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCloseReleasesEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 2; i++ {
		port := freePort(t)
		comms := make([]*Comm, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for r := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := DefaultConfig(r, 3)
				cfg.MasterPort, cfg.Secret = port, []byte("sixteen-byte-key")
				comms[r], errs[r] = New(context.Background(), cfg)
			}()
		}
		wg.Wait()
		noErrors(t, errs)
		noErrors(t, each(comms, func(r int, c *Comm) error {
			return c.AllReduce(context.Background(), Float32s(make([]float32, 1<<16)), Sum)
		}))
		for _, c := range comms {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := comms[0].AllReduce(context.Background(), Float32s(make([]float32, 4)), Sum); !errors.Is(err, ErrClosed) {
			t.Fatalf("call after Close: %v", err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLibp2pControlAndDataPlanes(t *testing.T) {
	for _, planes := range [][2]string{{"libp2p", "sockets"}, {"libp2p", "libp2p"}, {"tcp", "libp2p"}} {
		t.Run(planes[0]+"+"+planes[1], func(t *testing.T) {
			comms := startComms(t, 3, func(c *Config) { c.ControlPlane, c.DataPlane = planes[0], planes[1] })
			bufs := make([][]float32, 3)
			for r := range bufs {
				bufs[r] = make([]float32, 100000)
				for i := range bufs[r] {
					bufs[r][i] = float32(r + 1)
				}
			}
			noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(context.Background(), Float32s(bufs[r]), Sum) }))
			for r := range bufs {
				if bufs[r][0] != 6 || bufs[r][99999] != 6 {
					t.Fatalf("rank %d: %v", r, bufs[r][0])
				}
			}
		})
	}
}

// TestSmallAndLargeCallsInterleave alternates fastbox-sized and ring-sized
// allreduces: a rank that finishes a small call and starts a large one
// sends ring frames while its peer may still be waiting for its fastbox
// message, which must not be taken for a mismatched call.
func TestSmallAndLargeCallsInterleave(t *testing.T) {
	const n, iters = 3, 300
	comms := startComms(t, n, nil)
	noErrors(t, each(comms, func(r int, c *Comm) error {
		small, large := make([]float32, 1000), make([]int64, 65536)
		for i := range iters {
			for j := range small {
				small[j] = float32(r + i)
			}
			if err := c.AllReduce(context.Background(), Float32s(small), Sum); err != nil {
				return fmt.Errorf("iteration %d small: %w", i, err)
			}
			if want := float32(n*i + n*(n-1)/2); small[0] != want || small[len(small)-1] != want {
				return fmt.Errorf("iteration %d small: %v, want %v", i, small[0], want)
			}
			for j := range large {
				large[j] = int64(r*i + j)
			}
			if err := c.AllReduce(context.Background(), Int64s(large), Max); err != nil {
				return fmt.Errorf("iteration %d large: %w", i, err)
			}
			if want := int64((n-1)*i + 7); large[7] != want {
				return fmt.Errorf("iteration %d large: %v, want %v", i, large[7], want)
			}
		}
		return nil
	}))
}

// TestFastboxesNeedEveryRankOnSharedMemory runs small calls in a job where
// one rank reaches the others over TCP while the other two share memory:
// the fastbox path must be off for everyone, or a rank would wait in its
// fastbox for a peer that sends over the ring.
func TestFastboxesNeedEveryRankOnSharedMemory(t *testing.T) {
	const n = 3
	comms := startComms(t, n, func(c *Config) { c.DisableUnix = c.Rank == 2 })
	noErrors(t, each(comms, func(r int, c *Comm) error {
		buf := make([]float32, 5)
		for i := range 200 {
			for j := range buf {
				buf[j] = float32(r + i + j)
			}
			if err := c.AllReduce(context.Background(), Float32s(buf), Sum); err != nil {
				return fmt.Errorf("call %d: %w", i, err)
			}
			if want := float32(n*(i+4) + n*(n-1)/2); buf[4] != want {
				return fmt.Errorf("call %d: %v, want %v", i, buf[4], want)
			}
		}
		return c.Barrier(context.Background())
	}))
}

// TestRankClosingMidCallFailsTheOthersFast: rank 2 closes its communicator
// while ranks 0 and 1 run small (fastbox) and mid-sized (fastbox ring)
// allreduces. Rank 1 may hear of it first and relay the close to rank 0,
// whose link then only records it ("fail if used again"): a fastbox wait
// must treat that as the use, not wait out its two-second grace.
func TestRankClosingMidCallFailsTheOthersFast(t *testing.T) {
	for _, count := range []int{2, 16384} {
		t.Run(fmt.Sprintf("count=%d", count), func(t *testing.T) {
			comms := startComms(t, 3, nil)
			noErrors(t, each(comms, func(r int, c *Comm) error {
				return c.AllReduce(context.Background(), Float32s(make([]float32, count)), Sum)
			}))
			errs := each(comms, func(r int, c *Comm) error {
				if r == 2 {
					return c.Close()
				}
				for {
					if err := c.AllReduce(context.Background(), Float32s(make([]float32, count)), Sum); err != nil {
						return err
					}
				}
			})
			if errs[2] != nil {
				t.Fatalf("rank 2 Close: %v", errs[2])
			}
			// The close itself (KindClosed), not what a fastbox wait
			// reports after waiting out its 2 s grace (KindPeerDied,
			// "peer's communicator failed").
			for r := range 2 {
				var e *Error
				if !errors.As(errs[r], &e) || e.Kind != KindClosed || e.Rank != 2 {
					t.Errorf("rank %d: %v, want rank 2's close", r, errs[r])
				}
			}
		})
	}
}
