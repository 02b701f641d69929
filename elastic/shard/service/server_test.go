package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
)

var secret = []byte("ringtail-test-job-secret-0123456789")

type testServer struct {
	addr  string
	stop  context.CancelFunc
	done  chan error
	store *wal.Store
	once  sync.Once
}

func startServer(t *testing.T, dir string, cfg shard.Config, scfg ServerConfig) *testServer {
	t.Helper()
	ts, _ := startServerGate(t, dir, cfg, scfg)
	return ts
}

func startServerGate(t *testing.T, dir string, cfg shard.Config, scfg ServerConfig) (*testServer, *Server) {
	t.Helper()
	store, err := wal.Open(dir, cfg, wal.Options{SnapshotEvery: 50, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	scfg.Secret = secret
	srv, err := NewServer(scfg, store)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{addr: ln.Addr().String(), stop: cancel, done: make(chan error, 1), store: store}
	go func() { ts.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		ts.shutdown(t)
	})
	return ts, srv
}

// shutdown stops the server without closing the store (like a crash: no
// final snapshot).
func (ts *testServer) shutdown(t *testing.T) {
	t.Helper()
	ts.once.Do(func() {
		ts.stop()
		select {
		case err := <-ts.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
}

func newClient(t *testing.T, addr func() string, sec []byte) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{
		Secret: sec, Addr: "shard-service", CallTimeout: 5 * time.Second,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func fixed(a string) func() string { return func() string { return a } }

// coverage counts, per epoch and sample, how often gradients were applied.
type coverage struct {
	mu     sync.Mutex
	counts map[[2]int64]int
}

func (c *coverage) train(s shard.Shard) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[[2]int64]int{}
	}
	for _, i := range s.Indices() {
		c.counts[[2]int64{int64(s.Epoch), i}]++
	}
}

func (c *coverage) check(t *testing.T, cfg shard.Config) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := range cfg.Epochs {
		for i := range cfg.Samples {
			if c.counts[[2]int64{int64(e), i}] == 0 {
				t.Fatalf("epoch %d sample %d never trained", e, i)
			}
		}
	}
}

// worker pulls, "trains" (records coverage, sleeps a little), and reports
// done, retrying through unavailability (server restarts) until finished.
func worker(ctx context.Context, c *Client, id string, cov *coverage, onDone func()) error {
	for {
		s, err := c.Pull(ctx, id)
		switch {
		case errors.Is(err, shard.ErrFinished):
			return nil
		case errors.Is(err, shard.ErrNoShard), errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			time.Sleep(2 * time.Millisecond)
			continue
		case err != nil:
			return fmt.Errorf("%s pull: %w", id, err)
		}
		time.Sleep(time.Millisecond)
		cov.train(s)
		for {
			err := c.Done(ctx, id, s.ID)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
				return fmt.Errorf("%s done %s: %w", id, s, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if onDone != nil {
			onDone()
		}
	}
}

func TestService_BadSecretIsRejected(t *testing.T) {
	ts := startServer(t, t.TempDir(), shard.Config{Samples: 10, ShardSize: 5, Epochs: 1}, ServerConfig{})
	bad := newClient(t, fixed(ts.addr), []byte("not-the-job-secret-at-all"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := bad.Pull(ctx, "w"); !errors.Is(err, ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	good := newClient(t, fixed(ts.addr), secret)
	if _, err := good.Pull(ctx, "w"); err != nil {
		t.Fatalf("good secret: %v", err)
	}
	if _, err := NewClient(ClientConfig{Addr: ts.addr, Secret: []byte("short")}); err == nil {
		t.Fatal("a 5-byte secret must be refused")
	}
}

// The brief's test vector over TCP: 1000 samples, shards of 100.
func TestService_TestVectorOverTCP(t *testing.T) {
	ts := startServer(t, t.TempDir(), shard.Config{Samples: 1000, ShardSize: 100, Epochs: 1}, ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := newClient(t, fixed(ts.addr), secret)
	a, err := c.Pull(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Pull(ctx, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if a.Offset != 0 || a.Length != 100 || b.Offset != 100 || b.Length != 100 {
		t.Fatalf("pulled %s and %s, want [0,100) and [100,200)", a, b)
	}
	st, err := c.Stats(ctx)
	if err != nil || st.Doing != 2 || st.Todo != 8 {
		t.Fatalf("stats %+v, %v; want 2 DOING, 8 TODO", st, err)
	}
	if err := c.Fail(ctx, "w2", a.ID); !errors.Is(err, shard.ErrNotOwner) {
		t.Fatalf("foreign failure: %v, want ErrNotOwner", err)
	}
	if err := c.Fail(ctx, "w1", a.ID); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stats(ctx); st.Doing != 1 || st.Todo != 9 {
		t.Fatalf("after failure %+v, want 1 DOING, 9 TODO", st)
	}
	if err := c.Done(ctx, "w1", 999); !errors.Is(err, shard.ErrUnknownShard) {
		t.Fatalf("unknown shard: %v", err)
	}
	if _, err := c.Pull(ctx, ""); !errors.Is(err, shard.ErrInvalidCommand) {
		t.Fatalf("empty worker id: %v", err)
	}
}

// Several workers over loopback; one drops its connection in the middle of
// a shard. Its shard must return to TODO and be trained by someone else;
// every epoch ends with exactly K shards DONE and every sample trained.
func TestService_WorkerDyingMidShardLosesNoData(t *testing.T) {
	cfg := shard.Config{Samples: 2000, BatchSize: 10, BatchesPerShard: 5, Epochs: 2, Shuffle: true, Seed: 11}
	ts := startServer(t, t.TempDir(), cfg, ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cov coverage

	// The victim takes a shard and vanishes without reporting.
	victim := newClient(t, fixed(ts.addr), secret)
	lost, err := victim.Pull(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	victim.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- worker(ctx, newClient(t, fixed(ts.addr), secret), fmt.Sprintf("w%d", i), &cov, nil)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := newClient(t, fixed(ts.addr), secret).Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.NumShards()
	if !st.Finished || st.DoneTotal != k*2 || st.Requeued < 1 {
		t.Fatalf("stats %+v; want finished with %d DONE and the victim's shard requeued", st, 2*k)
	}
	cov.check(t, cfg)
	t.Logf("victim's %s retrained; stats %+v", lost, st)
}

// The coordinator stops in the middle of an epoch (no final snapshot,
// like SIGKILL) and a new one starts from the same directory on another
// port. Workers keep their shards across the gap and finish the job.
func TestService_RestartFromStoreMidEpoch(t *testing.T) {
	cfg := shard.Config{Samples: 3000, ShardSize: 60, Epochs: 2, Shuffle: true, Seed: 5}
	dir := t.TempDir()
	first := startServer(t, dir, cfg, ServerConfig{})
	var addr atomic.Value
	addr.Store(first.addr)
	current := func() string { return addr.Load().(string) }

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cov coverage
	var dones atomic.Int64
	restarted := make(chan struct{})
	half := cfg.NumShards() / 2
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- worker(ctx, newClient(t, current, secret), fmt.Sprintf("w%d", i), &cov, func() {
				if dones.Add(1) == half {
					close(restarted) // signal the test to restart
				}
			})
		}()
	}
	<-restarted
	first.shutdown(t)
	before := first.store.Stats()
	if before.Finished || before.Epoch != 0 {
		t.Fatalf("restart not mid-epoch: %+v", before)
	}
	second := startServer(t, dir, cfg, ServerConfig{})
	if got := second.store.Stats(); got.DoneTotal < before.DoneTotal {
		t.Fatalf("restart lost DONE shards: %d before, %d after", before.DoneTotal, got.DoneTotal)
	}
	addr.Store(second.addr)

	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := second.store.Stats()
	if !st.Finished || st.DoneTotal != 2*cfg.NumShards() {
		t.Fatalf("after restart: %+v, want finished with %d DONE", st, 2*cfg.NumShards())
	}
	cov.check(t, cfg)
}

// After a restart, a worker that held a shard but never comes back has it
// released after the grace period.
func TestService_RestartGraceReleasesAbsentHolders(t *testing.T) {
	cfg := shard.Config{Samples: 200, ShardSize: 100, Epochs: 1}
	dir := t.TempDir()
	first := startServer(t, dir, cfg, ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ghost := newClient(t, fixed(first.addr), secret)
	held, err := ghost.Pull(ctx, "ghost")
	if err != nil {
		t.Fatal(err)
	}
	first.shutdown(t) // the ghost's shard stays DOING on disk

	const grace = 500 * time.Millisecond
	started := time.Now() // before the server starts: a lower bound on its age
	second := startServer(t, dir, cfg, ServerConfig{RestartGrace: grace})
	c := newClient(t, fixed(second.addr), secret)
	other, err := c.Pull(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Done(ctx, "live", other.ID); err != nil {
		t.Fatal(err)
	}
	// Released or not, never before the grace period (on a loaded machine
	// the period may already be over by now).
	if sh, err := c.Pull(ctx, "live"); !errors.Is(err, shard.ErrNoShard) {
		if err != nil || sh.ID != held.ID || time.Since(started) < grace {
			t.Fatalf("%v after the restart: %v, %v; want ErrNoShard before the %v grace period", time.Since(started), sh, err, grace)
		}
		return
	}
	var got shard.Shard
	for {
		got, err = c.Pull(ctx, "live")
		if err == nil {
			break
		}
		if !errors.Is(err, shard.ErrNoShard) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got.ID != held.ID {
		t.Fatalf("released %s, want the ghost's %s", got, held)
	}
}

// Calls honour their context: a server that accepts but never answers
// cannot hold a worker past its deadline.
func TestClient_CallsHonourDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // never answers
		}
	}()
	// The client's own limits are ten minutes: only the context's 150 ms
	// deadline can end the call before then.
	c, err := NewClient(ClientConfig{
		Secret: secret, Addr: ln.Addr().String(), DialTimeout: 10 * time.Minute, CallTimeout: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Pull(ctx, "w")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if el := time.Since(start); el > 5*time.Minute {
		t.Fatalf("call took %v: it ignored its context's 150 ms deadline", el)
	}
	cancel()
	if _, err := c.Stats(ctx); err == nil {
		t.Fatal("call with a cancelled context succeeded")
	}
}

// A client that sends an oversized frame after authenticating is cut off
// without taking the server down.
func TestServer_OversizedFrameClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, t.TempDir(), shard.Config{Samples: 10, ShardSize: 5, Epochs: 1}, ServerConfig{})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := clientHandshake(conn, secret); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte{0xff, 0xff, 0xff, 0xff})
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var resp response
	if err := readMsg(conn, &resp); err == nil {
		t.Fatalf("server answered an oversized frame: %+v", resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := newClient(t, fixed(ts.addr), secret).Stats(ctx); err != nil {
		t.Fatalf("server unusable after a bad client: %v", err)
	}
}

// BenchmarkService_PullDone measures one worker's pull+done round trips
// over loopback TCP, including the fsync'd log writes.
func BenchmarkService_PullDone(b *testing.B) {
	store, err := wal.Open(b.TempDir(), shard.Config{Samples: 1 << 20, ShardSize: 1, Epochs: 1}, wal.Options{SnapshotEvery: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Secret: secret}, store)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	c, err := NewClient(ClientConfig{Addr: ln.Addr().String(), Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		s, err := c.Pull(ctx, "w")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Done(ctx, "w", s.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// A service started without a store (a launcher's, which does not know
// the job's data) opens it when the first worker declares the data, checks
// every later declaration, and refuses another job's; Release (the
// launcher's membership says a node died, its connection still open)
// requeues the holder's shard.
func TestService_WorkersDeclareTheDataAndTheLauncherReleasesTheDead(t *testing.T) {
	cfg := shard.Config{Samples: 300, ShardSize: 100, Epochs: 1}
	dir := t.TempDir()
	srv, err := NewServer(ServerConfig{Secret: secret, Open: func(c shard.Config) (*wal.Store, error) {
		return wal.Open(dir, c, wal.Options{Logger: zerolog.Nop()})
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	if _, err := srv.Stats(ctx); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("stats before any declaration: %v, want ErrNotOpen", err)
	}
	plain := newClient(t, fixed(ln.Addr().String()), secret)
	if _, err := plain.Pull(ctx, "w0"); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("pull before any declaration: %v, want ErrNotOpen", err)
	}
	declaring := func(c shard.Config) *Client {
		cl, err := NewClient(ClientConfig{Addr: ln.Addr().String(), Secret: secret, Job: &c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	w1, w2 := declaring(cfg), declaring(cfg)
	a, err := w1.Pull(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Pull(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Epochs = 2
	if _, err := declaring(other).Pull(ctx, "w3"); !errors.Is(err, wal.ErrConfigMismatch) {
		t.Fatalf("another job's data: %v, want ErrConfigMismatch", err)
	}
	requeued, err := srv.Release(ctx, "w1")
	if err != nil || len(requeued) != 1 || requeued[0] != a.ID {
		t.Fatalf("Release(w1) = %v, %v; want shard %d requeued", requeued, err, a.ID)
	}
	st, err := srv.Stats(ctx)
	if err != nil || st.Doing != 1 || st.Todo != 2 || st.Requeued != 1 {
		t.Fatalf("stats after the release %+v, %v; want 1 DOING, 2 TODO, 1 requeued", st, err)
	}
	// w1 was only slow: its late report is accepted (at-least-once).
	if err := w1.Done(ctx, "w1", a.ID); err != nil {
		t.Fatal(err)
	}
}
