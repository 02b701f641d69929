package elastic

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/loopback"
)

// Helpers for in-process tests: goroutine ranks, each a Worker with its
// own memberlist on loopback, training a tiny model.

var testSecret = []byte("elastic-test-secret-0123456789")

func testLogger() zerolog.Logger {
	if os.Getenv("ELASTIC_TEST_LOG") != "" {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	p, err := loopback.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testTimers are DefaultTimers made tolerant of a loaded CI machine: the
// race detector on a busy 2-core box stretches a 50 ms probe timeout into
// false suspicions that churn generations the tests do not expect. The
// tests check behaviour; the defaults' speed is what
// TestMemberlistDetectionTime and the recovery bench measure.
func testTimers() Timers {
	t := DefaultTimers()
	t.ProbeInterval, t.ProbeTimeout = 300*time.Millisecond, 250*time.Millisecond
	t.SuspicionMult, t.SuspicionMaxTimeoutMult, t.AwarenessMaxMultiplier = 4, 4, 8
	return t
}

func testConfig(id string, port int, seeds []string, minNP, initialNP int) Config {
	c := DefaultConfig(id, "elastic-test", testSecret)
	c.Timers = testTimers()
	c.BindPort = port
	c.Seeds = seeds
	c.MinNP, c.InitialNP = minNP, initialNP
	c.StartTimeout = 30 * time.Second
	c.MinWait = 20 * time.Second
	c.Logger = testLogger()
	c.Comm.Logger = zerolog.Nop()
	c.Comm.OpTimeout = 30 * time.Second
	return c
}

func seedList(ports []int) []string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return s
}

// stepEvent is one committed step as a rank saw it.
type stepEvent struct {
	id       string
	gen      uint64
	rank     int
	size     int
	step     uint64
	fresh    bool
	rejoined bool
}

// trainer is one goroutine rank: it joins, then trains a model of 64
// float64s whose update depends on the rank and step, so ranks that lost
// sync would diverge.
type trainer struct {
	id     string
	w      *Worker
	model  []float64
	result chan error
}

type cluster struct {
	t      *testing.T
	events chan stepEvent
	stopAt atomic.Uint64 // steps at or beyond this end Run (ErrStop)
	pace   time.Duration
	mu     sync.Mutex
	ranks  map[string]*trainer
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, events: make(chan stepEvent, 4096), ranks: map[string]*trainer{}, pace: 5 * time.Millisecond}
	c.stopAt.Store(math.MaxUint64)
	return c
}

// start joins a rank in the background and runs its training loop.
func (c *cluster) start(ctx context.Context, cfg Config) *trainer {
	tr := &trainer{id: cfg.ID, model: make([]float64, 64), result: make(chan error, 1)}
	c.mu.Lock()
	c.ranks[cfg.ID] = tr
	c.mu.Unlock()
	joined := make(chan struct{})
	go func() {
		w, err := Join(ctx, cfg)
		if err != nil {
			close(joined)
			tr.result <- err
			return
		}
		c.mu.Lock()
		tr.w = w
		c.mu.Unlock()
		close(joined)
		tr.result <- w.Run(ctx, c.step(tr))
	}()
	return tr
}

func (c *cluster) worker(id string) *Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ranks[id].w
}

func (c *cluster) step(tr *trainer) StepFunc {
	grad := make([]float64, len(tr.model))
	return func(ctx context.Context, comm *ringtail.Comm, g Generation) error {
		// Fresh first: a step that failed part-way may have committed on
		// some ranks only, and the ranks that stop right away must still
		// leave with rank 0's model.
		if g.Fresh {
			if err := comm.Broadcast(ctx, ringtail.Float64s(tr.model), 0); err != nil {
				return err
			}
		}
		if g.Step >= c.stopAt.Load() {
			return ErrStop
		}
		if err := ringtail.Sleep(ctx, c.pace); err != nil {
			return err
		}
		for i := range grad {
			grad[i] = float64((g.Rank+1)*(i+1)) * 1e-3 / float64(g.Step+1)
		}
		if err := comm.AllReduce(ctx, ringtail.Float64s(grad), ringtail.Sum); err != nil {
			return err
		}
		for i := range grad {
			tr.model[i] += grad[i]
		}
		select {
		case c.events <- stepEvent{id: tr.id, gen: g.Number, rank: g.Rank, size: g.Size, step: g.Step, fresh: g.Fresh, rejoined: g.Rejoined}:
		default:
		}
		return nil
	}
}

// waitFor consumes step events until ok returns true for one, or fails
// the test after d.
func (c *cluster) waitFor(d time.Duration, what string, ok func(stepEvent) bool) stepEvent {
	c.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-c.events:
			if ok(e) {
				return e
			}
		case <-deadline:
			c.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// waitAll waits until every id in ids has committed a step satisfying ok.
func (c *cluster) waitAll(d time.Duration, what string, ids []string, ok func(stepEvent) bool) map[string]stepEvent {
	c.t.Helper()
	got := map[string]stepEvent{}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(d)
	for len(got) < len(want) {
		select {
		case e := <-c.events:
			if want[e.id] && ok(e) {
				if _, seen := got[e.id]; !seen {
					got[e.id] = e
				}
			}
		case <-deadline:
			c.t.Fatalf("timed out after %v waiting for %s (have %v)", d, what, got)
		}
	}
	return got
}

// startAll starts a rank per id, the i-th on ports[i], all seeded with
// seeds and bounded by min and max np.
func (c *cluster) startAll(ctx context.Context, ids []string, ports []int, seeds []string, minNP, maxNP int) {
	for i, id := range ids {
		c.start(ctx, testConfig(id, ports[i], seeds, minNP, maxNP))
	}
}

// stop asks every rank to stop a few steps from now, checks that the
// listed ranks returned nil with bit-identical models, and closes their
// workers.
func (c *cluster) stop(ids []string) {
	c.t.Helper()
	e := c.waitFor(10*time.Second, "a step before stopping", func(stepEvent) bool { return true })
	c.stopAt.Store(e.step + 5)
	var ref []float64
	for _, id := range ids {
		c.mu.Lock()
		tr := c.ranks[id]
		c.mu.Unlock()
		select {
		case err := <-tr.result:
			if err != nil {
				c.t.Fatalf("%s: Run: %v", id, err)
			}
		case <-time.After(30 * time.Second):
			c.t.Fatalf("%s did not stop", id)
		}
		if ref == nil {
			ref = tr.model
			continue
		}
		for i := range ref {
			if math.Float64bits(ref[i]) != math.Float64bits(tr.model[i]) {
				c.t.Fatalf("%s's model differs from %s's at %d: %v vs %v", id, ids[0], i, tr.model[i], ref[i])
			}
		}
	}
	for _, id := range ids {
		c.worker(id).Close()
	}
}

// crashForTest stops a worker the way a crash would as far as membership
// goes: memberlist stops answering without leaving, and its communicator
// is abandoned.
func (w *Worker) crashForTest() {
	w.stop()
	<-w.loopDone
	w.wg.Wait() // no helper may call into the list once it is shut down
	w.shutdown()
}
