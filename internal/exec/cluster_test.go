package exec

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// cluster is n executors over one mesh, in one process: what the engine
// does for a communicator, reduced to what the executor needs (the call
// counters of the stall rules, a mailbox for Collect ops, the answer to a
// peer's stall query between calls).
type cluster struct {
	t      *testing.T
	n      int
	net    transport.Network
	lns    []transport.Listener
	meshes []*transport.Mesh
	execs  []*Executor
	boxes  []*testMailbox
	ranks  []*rankState
	tun    algo.Tunables
	fast   bool // programs take the fastbox path where they fit
}

// rankState is one rank's call counters; mu is held while a call runs, as
// the engine holds its lock, so that idle answers see a settled state.
type rankState struct {
	mu   sync.Mutex
	done map[uint32]uint64
	last map[uint32]wire.Desc
}

// clusterOpts shape a cluster.
type clusterOpts struct {
	shm      bool // shared memory between the ranks (and fastboxes when fast)
	fast     bool // enable the fastbox path (needs shm)
	tolerate bool // TolerateDeaths
	channels int  // links per pair (default 2)
	chunk    int  // frame size in bytes (default 512: many frames per message)
}

// newCluster forms an n-rank mesh and one executor per rank. The link
// timeouts are long: failures in these tests are reported by what the
// test does (a severed rank, a mismatch, a context), never by a loaded
// machine's scheduling.
func newCluster(t *testing.T, n int, o clusterOpts) *cluster {
	t.Helper()
	if o.channels == 0 {
		o.channels = 2
	}
	if o.chunk == 0 {
		o.chunk = 512
	}
	c := &cluster{t: t, n: n, lns: make([]transport.Listener, n), meshes: make([]*transport.Mesh, n),
		execs: make([]*Executor, n), boxes: make([]*testMailbox, n), ranks: make([]*rankState, n),
		tun: algo.Tunables{SmallBytes: 256, Channels: o.channels, ChunkBytes: o.chunk}, fast: o.fast}
	if o.shm {
		s, err := transport.NewSockets(transport.SocketsConfig{})
		if err != nil {
			t.Fatal(err)
		}
		c.net = s
	} else {
		c.net = transport.NewInmem()
	}
	eps := make([]transport.Endpoint, n)
	for r := range eps {
		ln, err := c.net.Listen(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.lns[r], eps[r] = ln, ln.Endpoint()
		c.ranks[r] = &rankState{done: map[uint32]uint64{}, last: map[uint32]wire.Desc{}}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c.meshes[r], errs[r] = transport.Connect(ctx, transport.MeshConfig{
				Identity: transport.Identity{JobID: "exec", Rank: r, World: n, Secret: []byte("secret")},
				Channels: o.channels, Network: c.net, Listener: c.lns[r], Endpoints: eps, Logger: zerolog.Nop(),
				SharedMemory: o.shm, TolerateDeaths: o.tolerate, State: c.ranks[r].idle, AbortGrace: 250 * time.Millisecond,
				Link: transport.LinkConfig{Silence: time.Minute, Heartbeat: 5 * time.Second, Chunk: o.chunk},
			})
		}()
	}
	wg.Wait()
	t.Cleanup(c.close)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, m := range c.meshes {
		ex, err := New(m, c.tun.ChunkBytes)
		if err != nil {
			t.Fatal(err)
		}
		c.boxes[r] = &testMailbox{mesh: m}
		ex.SetMailbox(c.boxes[r])
		if o.fast && !m.AllFast() {
			t.Fatalf("rank %d has links without fastboxes over shared memory", r)
		}
		c.execs[r] = ex
	}
	return c
}

func (c *cluster) close() {
	var wg sync.WaitGroup
	for _, m := range c.meshes {
		if m != nil {
			wg.Add(1)
			go func() { defer wg.Done(); m.Close() }()
		}
	}
	wg.Wait()
}

// idle is MeshConfig.State: the rank's counters of group g, unless a call
// is running (the executor answers then).
func (s *rankState) idle(g uint32) (wire.State, bool) {
	if !s.mu.TryLock() {
		return wire.State{}, false
	}
	defer s.mu.Unlock()
	return wire.State{Done: s.done[g], Desc: s.last[g]}, true
}

// run runs p for call on rank r as the engine would: under the rank's
// lock, with its counters, never on a failed mesh, counting the call done
// if it succeeds.
func (c *cluster) run(ctx context.Context, r int, timeout time.Duration, p *plan.Program, call *Call) error {
	s := c.ranks[r]
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.meshes[r].Err(); err != nil {
		return err
	}
	call.Done = func(g uint32) uint64 { return s.done[g] }
	err := c.execs[r].Run(ctx, timeout, p, call)
	if err == nil {
		s.done[call.Desc.Group]++
		s.last[call.Desc.Group] = call.Desc
	}
	return err
}

// next is the Desc of group g's next call on rank r.
func (c *cluster) next(r int, d wire.Desc) wire.Desc {
	s := c.ranks[r]
	s.mu.Lock()
	defer s.mu.Unlock()
	d.Call = s.done[d.Group] + 1
	return d
}

// each runs f for every rank at once and returns their errors by rank.
func (c *cluster) each(ranks []int, f func(r int) error) []error {
	errs := make([]error, c.n)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r) }()
	}
	wg.Wait()
	return errs
}

// all lists every rank.
func (c *cluster) all() []int {
	out := make([]int, c.n)
	for r := range out {
		out[r] = r
	}
	return out
}

// program is the decision point's program of sp for rank r (the
// collective's own algorithm), validated, on the fastbox path where the
// cluster has fastboxes and it fits.
func (c *cluster) program(sp algo.Spec, r int) *plan.Program {
	c.t.Helper()
	sp.Rank, sp.World = r, c.n
	pl, err := algo.NewPlanner(algo.Config{Tunables: c.tun}, algo.Facts{World: c.n, Fast: c.fast, FastboxBytes: transport.FastboxPayload})
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := pl.Program(sp, algo.Choice{})
	if err != nil {
		c.t.Fatalf("rank %d: %v", r, err)
	}
	return p
}

// path puts a hand-built program of float32 elements on the path the
// decision point would give it: the fastbox path where the cluster has
// fastboxes and the program fits them.
func (c *cluster) path(p *plan.Program) *plan.Program {
	p.Fast = c.fast && !p.General && !p.HasEager() && p.LargestMessage()*4 <= transport.FastboxPayload
	return p
}

// transportError returns err as a *transport.Error, failing the test if
// it is not one.
func transportError(t *testing.T, r int, err error) *transport.Error {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("rank %d: got %v (%T), want a *transport.Error", r, err, err)
	}
	return te
}

// testMailbox is the executor's Mailbox over a mesh's inbox: the engine's
// mailbox without its second class and concurrent takers (a test's
// Collect ops run one at a time on each rank).
type testMailbox struct {
	mesh *transport.Mesh
	mu   sync.Mutex
	held []transport.Eager
}

func (b *testMailbox) takeHeld(from int, want, mask uint32) (transport.Eager, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, m := range b.held {
		if m.From == from && m.Tag&mask == want&mask {
			b.held = append(b.held[:i], b.held[i+1:]...)
			return m, true
		}
	}
	return transport.Eager{}, false
}

func (b *testMailbox) park(m transport.Eager) {
	b.mu.Lock()
	b.held = append(b.held, m)
	b.mu.Unlock()
}

// Take waits for a matching message until ctx ends or the mesh fails.
func (b *testMailbox) Take(ctx context.Context, from int, want, mask uint32) (transport.Eager, error) {
	for {
		if m, ok := b.takeHeld(from, want, mask); ok {
			return m, nil
		}
		select {
		case m := <-b.mesh.Inbox():
			b.park(m)
		case <-b.mesh.Failed():
			return transport.Eager{}, b.mesh.Err()
		case <-ctx.Done():
			return transport.Eager{}, ctx.Err()
		}
	}
}

// TryTake parks what has arrived and takes a matching message, if any.
func (b *testMailbox) TryTake(from int, want, mask uint32) (transport.Eager, bool) {
	for {
		select {
		case m := <-b.mesh.Inbox():
			b.park(m)
			continue
		default:
		}
		return b.takeHeld(from, want, mask)
	}
}

// Release returns the message's buffer to the mesh.
func (b *testMailbox) Release(m transport.Eager) { b.mesh.Release(m) }

// await parks messages until k are held (a test's way to know that posts
// have arrived before a collect runs).
func (b *testMailbox) await(t *testing.T, k int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		b.mu.Lock()
		have := len(b.held)
		b.mu.Unlock()
		if have >= k {
			return
		}
		select {
		case m := <-b.mesh.Inbox():
			b.park(m)
		case <-ctx.Done():
			t.Fatalf("only %d of %d eager messages arrived", have, k)
		}
	}
}
