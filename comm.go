package ringtail

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/assemble"
	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/topology"
)

// Comm is a communicator: one rank's membership in a job's mesh. Its
// collectives must be called in the same order on every rank (every call
// carries its number, so a rank that calls something else is caught and
// named); a Comm runs one call at a time (calls from several goroutines
// are serialised). After any failure it stays failed: create a new one
// (a new generation).
type Comm struct {
	cfg    Config
	e      *engine.Engine
	rec    *obs.Recorder // nil: observability off (observability.go)
	detail bool          // calls carry their call sites (Config.Debug "detail")
	sites  engine.Sites
}

// New joins the job: it starts the rendezvous coordinator if this is rank
// 0 (unless ExternalCoordinator), registers this rank's endpoint, and
// connects to every other rank. It returns when the mesh is complete, or
// with an error when ctx or ConnectTimeout ends first.
func New(ctx context.Context, cfg Config) (*Comm, error) { return newOn(ctx, cfg, nil) }

// newOn is New over network (nil: the transports cfg chooses; tests place
// ranks on hosts with one).
func newOn(ctx context.Context, cfg Config, network transport.Network) (*Comm, error) {
	ic := (*envcfg.Comm)(&cfg) // Open fills the fields the debugging variables set
	e, rec, err := assemble.Open(ctx, ic, network)
	if err != nil {
		return nil, public(err)
	}
	return &Comm{cfg: cfg, e: e, rec: rec, detail: ic.Detail()}, nil
}

// NewLocal joins n ranks inside this process over the real transports (one
// Comm per rank; shared memory between them), for benchmarks, simulations
// and tests that drive every rank from goroutines. Rank 0 hosts the
// rendezvous on a loopback port that was free a moment ago. Each rank's
// configuration is DefaultConfig(rank, n) with that port, then configure
// (may be nil) — set the secret, job id and timeouts there. If any rank
// fails to join, every Comm is closed and the first failure is returned,
// naming its rank.
func NewLocal(ctx context.Context, n int, configure func(*Config)) ([]*Comm, error) {
	return engine.NewLocal(n, func() ([]*Comm, []error, error) { return joinLocal(ctx, n, configure, nil) }, (*Comm).Close)
}

// joinLocal has n ranks join at once, with rank 0 hosting the rendezvous
// on a loopback port that was free a moment ago, each over network(rank)
// when network is not nil, and returns each rank's Comm or error (tests
// that look at every rank's failure, or place ranks on hosts, use it).
func joinLocal(ctx context.Context, n int, configure func(*Config), network func(rank int) transport.Network) ([]*Comm, []error, error) {
	return engine.JoinLocal(n, func(r, port int) (*Comm, error) {
		cfg := DefaultConfig(r, n)
		cfg.MasterPort = port
		if configure != nil {
			configure(&cfg)
		}
		var on transport.Network
		if network != nil {
			on = network(r)
		}
		return newOn(ctx, cfg, on)
	})
}

// Rank returns this rank.
func (c *Comm) Rank() int { return c.cfg.Rank }

// Size returns the world size.
func (c *Comm) Size() int { return c.cfg.WorldSize }

// Config returns the configuration the communicator runs with.
func (c *Comm) Config() Config { return c.cfg }

// Dead lists the ranks known to have died or closed (only a communicator
// with TolerateDeaths keeps running after a death).
func (c *Comm) Dead() []int { return c.e.Dead() }

// Left lists the ranks of Dead that closed their communicator cleanly: they
// left the job rather than failing (a rank that finished its work and
// closed, while this one still runs).
func (c *Comm) Left() []int { return c.e.Left() }

// Close leaves the job: peers are told this rank closed, and every socket
// and goroutine of the communicator is released. Safe to call twice.
func (c *Comm) Close() error {
	err := c.e.Close()
	if c.rec != nil {
		err = errors.Join(err, c.rec.Close())
	}
	return err
}

func checkBuffer(name string, b Buffer) error {
	if !b.DType.Valid() {
		return fmt.Errorf("%s: invalid element type %v", name, b.DType)
	}
	if len(b.Bytes)%b.DType.Size() != 0 {
		return fmt.Errorf("%s: %d bytes is not a whole number of %v elements", name, len(b.Bytes), b.DType)
	}
	return nil
}

// run executes a validated call; a call that failed validation (errs)
// aborts the communicator so that every rank hears why.
func (c *Comm) run(ctx context.Context, cl *engine.Call, errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return public(c.e.Invalid(cl, err))
	}
	if c.detail {
		c.sites.Mark(ctx, cl)
	}
	return public(c.e.Run(ctx, cl))
}

func spec(coll wire.Collective, b Buffer) algo.Spec {
	return algo.Spec{Collective: coll, Count: b.Len(), ElemSize: b.DType.Size()}
}

func opErr(op Op) error {
	if !op.Valid() {
		return fmt.Errorf("invalid reduction op %v", op)
	}
	return nil
}

// AllReduce reduces buf element-wise across all ranks, in place: on return
// every rank holds identical bits. Messages up to SmallBytes use recursive
// doubling; larger ones the pipelined ring (reduce-scatter + allgather).
func (c *Comm) AllReduce(ctx context.Context, buf Buffer, op Op) error {
	// Field by field: the compiler builds a composite literal of an
	// addressed variable in a temporary and copies it, and the copy's wide
	// loads of the literal's narrow stores stall on every small call.
	var cl engine.Call
	cl.Spec.Collective, cl.Spec.Count, cl.Spec.ElemSize, cl.Spec.Avg = wire.AllReduce, buf.Len(), buf.DType.Size(), op == Avg
	cl.DType, cl.Op, cl.Data = buf.DType, op, buf.Bytes
	if !op.Valid() || !buf.DType.Valid() || len(buf.Bytes)%buf.DType.Size() != 0 || c.detail {
		return c.run(ctx, &cl, checkBuffer("AllReduce", buf), opErr(op))
	}
	return public(c.e.Run(ctx, &cl))
}

// Broadcast copies root's buf to every rank's buf.
func (c *Comm) Broadcast(ctx context.Context, buf Buffer, root int) error {
	cl := engine.Call{Spec: spec(wire.Broadcast, buf), DType: buf.DType, Data: buf.Bytes}
	cl.Spec.Root = root
	var rootErr error
	if root < 0 || root >= c.cfg.WorldSize {
		rootErr = fmt.Errorf("root %d outside 0..%d", root, c.cfg.WorldSize-1)
	}
	return c.run(ctx, &cl, checkBuffer("Broadcast", buf), rootErr)
}

// AllGather concatenates every rank's send buffer, in rank order, into
// recv on every rank; recv must hold WorldSize times send's elements.
func (c *Comm) AllGather(ctx context.Context, send, recv Buffer) error {
	cl := engine.Call{Spec: spec(wire.AllGather, send), DType: send.DType, Data: recv.Bytes, Input: send.Bytes}
	var shapeErr error
	if send.DType != recv.DType {
		shapeErr = fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
	} else if recv.Len() != send.Len()*c.cfg.WorldSize {
		shapeErr = fmt.Errorf("recv has %d elements, want %d × %d", recv.Len(), c.cfg.WorldSize, send.Len())
	}
	return c.run(ctx, &cl, checkBuffer("AllGather send", send), checkBuffer("AllGather recv", recv), shapeErr)
}

// ReduceScatter reduces send (WorldSize blocks of recv's length) across
// ranks and leaves block r of the result in rank r's recv. send is not
// modified.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv Buffer, op Op) error {
	cl := engine.Call{Spec: spec(wire.ReduceScatter, recv), DType: recv.DType, Op: op, Data: recv.Bytes, Input: send.Bytes}
	cl.Spec.Avg = op == Avg
	var shapeErr error
	if send.DType != recv.DType {
		shapeErr = fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
	} else if send.Len() != recv.Len()*c.cfg.WorldSize {
		shapeErr = fmt.Errorf("send has %d elements, want %d × %d", send.Len(), c.cfg.WorldSize, recv.Len())
	}
	return c.run(ctx, &cl, checkBuffer("ReduceScatter send", send), checkBuffer("ReduceScatter recv", recv), shapeErr, opErr(op))
}

// AllReduceLate is AllReduce for a step in which rank late is predicted to
// reach the call after the others (the exact mode of StragglAR, arXiv
// 2505.23523): the other ranks reduce-scatter among themselves while late
// is still computing, and when it arrives a short completion folds its
// data in and hands the finished segments to every rank. The result is
// the exact reduction, with identical bits on every rank, as with
// AllReduce; only the order of the additions differs from AllReduce's, so
// the two calls may round differently.
//
// Every rank must pass the same late rank (a rank that names another is
// caught as a mismatch). After late arrives the call takes about G/B (G the
// buffer's bytes, B a rank's link bandwidth) instead of the ring's
// 2(n−1)/n·G/B; if late is not in fact the last to arrive, the call is
// still correct but slower than AllReduce.
func (c *Comm) AllReduceLate(ctx context.Context, buf Buffer, op Op, late int) error {
	cl := engine.Call{Spec: spec(wire.AllReduceLate, buf), DType: buf.DType, Op: op, Data: buf.Bytes}
	cl.Spec.Avg = op == Avg
	cl.Spec.Root = late
	var lateErr error
	if late < 0 || late >= c.cfg.WorldSize {
		lateErr = fmt.Errorf("late rank %d outside 0..%d", late, c.cfg.WorldSize-1)
	}
	return c.run(ctx, &cl, checkBuffer("AllReduceLate", buf), opErr(op), lateErr)
}

// AllToAll sends block r of send to rank r and receives rank r's block for
// this rank into block r of recv: send and recv hold WorldSize blocks of
// send.Len()/WorldSize elements each, in rank order. Every rank must call
// it with the same element type and block size. send and recv must not
// overlap.
//
// It runs the pairwise exchange of ring.AllToAll: WorldSize−1 steps, each
// rank sending one block and receiving one per step.
func (c *Comm) AllToAll(ctx context.Context, send, recv Buffer) error {
	w := c.cfg.WorldSize
	block := send.Len() / w
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllToAll, Count: block, ElemSize: send.DType.Size(), Root: int(wire.AllToAllEven)},
		DType: send.DType, Data: recv.Bytes, Input: send.Bytes}
	var shapeErr error
	switch {
	case send.DType != recv.DType:
		shapeErr = fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
	case send.Len()%w != 0:
		shapeErr = fmt.Errorf("send has %d elements, not a multiple of the world size %d", send.Len(), w)
	case recv.Len() != send.Len():
		shapeErr = fmt.Errorf("recv has %d elements, send %d: they must be equal", recv.Len(), send.Len())
	case engine.Overlaps(send.Bytes, recv.Bytes):
		shapeErr = fmt.Errorf("send and recv overlap")
	}
	return c.run(ctx, &cl, checkBuffer("AllToAll send", send), checkBuffer("AllToAll recv", recv), shapeErr)
}

// AllToAllV is AllToAll with blocks of any size: send holds sendCounts[r]
// elements for rank r and recv receives recvCounts[r] elements from rank
// r, each back to back in rank order. What rank a sends to rank b must be
// what b expects from a: the ranks first exchange their counts (one small
// all-to-all), and any disagreement fails the communicator on every rank
// with an error naming the two ranks and both counts, before any data
// moves. send and recv must not overlap.
func (c *Comm) AllToAllV(ctx context.Context, send Buffer, sendCounts []int, recv Buffer, recvCounts []int) error {
	w, me := c.cfg.WorldSize, c.cfg.Rank
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllToAll, ElemSize: send.DType.Size(), Root: int(wire.AllToAllUneven),
		SendCounts: sendCounts, RecvCounts: recvCounts}, DType: send.DType, Data: recv.Bytes, Input: send.Bytes}
	shapeErr := engine.CheckCounts(w, me, send.DType, recv.DType, send.Len(), recv.Len(), sendCounts, recvCounts)
	if shapeErr == nil && engine.Overlaps(send.Bytes, recv.Bytes) {
		shapeErr = fmt.Errorf("send and recv overlap")
	}
	if err := errors.Join(checkBuffer("AllToAllV send", send), checkBuffer("AllToAllV recv", recv), shapeErr); err != nil {
		return c.run(ctx, &cl, err)
	}
	return engine.AgreeOnCounts(ctx, c.run, w, me, &cl)
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	cl := engine.Call{Spec: algo.Spec{Collective: wire.Barrier, ElemSize: 1}, DType: Uint8, Op: Sum, Data: []byte{}}
	return c.run(ctx, &cl)
}

// ProbeConfig sizes a link probe.
type ProbeConfig struct {
	// Small is the latency probe's size in bytes (default 8).
	Small int
	// Large is the bandwidth probe's size in bytes (default 1 MiB).
	Large int
	// Repeats is how many times each pair exchanges each probe (default 3);
	// the median is kept.
	Repeats int
}

// Probe measures latency and bandwidth between every pair of ranks, at
// start or on demand (a collective: every rank calls it). Pairs meet in a
// round-robin tournament, so each round every rank is busy with exactly one
// partner: the lower rank sends a small probe that is echoed (latency is
// half the round trip), then a large one that is acknowledged. Each rank
// measures the pairs it leads; one Max-allreduce shares the measurements so
// every rank returns the same estimates (topology.EstimateLinks), which
// parent choice (topology.AssignParents) and ring order use.
func (c *Comm) Probe(ctx context.Context, cfg ProbeConfig) (topology.LinkEstimates, error) {
	p := engine.ProbeSizes{Small: cfg.Small, Large: cfg.Large, Repeats: cfg.Repeats}
	if err := p.Defaults(); err != nil {
		return topology.LinkEstimates{}, err
	}
	return engine.Probe(ctx, c.run, c.Size(), c.Rank(), p)
}

// DumpPlan returns, as text, the program cfg.Rank would run for an
// AllReduce of count elements of dt with op (ringtail bench --dump-plan):
// the algorithm every call of that shape takes first, on the path it
// takes. The ranks are placed on hosts of cfg.LocalWorldSize ranks each
// (block placement); bandwidth, when not nil, is the links' measured
// bandwidth in bytes per second between ranks of different hosts, as the
// communicator's probe would find it.
func DumpPlan(cfg Config, count int, dt DType, op Op, bandwidth topology.Matrix) (string, error) {
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllReduce, Count: count, ElemSize: dt.Size(), Avg: op == Avg}, DType: dt, Op: op}
	return assemble.Program((*envcfg.Comm)(&cfg), &cl, bandwidth)
}

// Sleep waits for d or until ctx ends, whichever is first; a helper for
// jobs padding compute without a goroutine leak.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
