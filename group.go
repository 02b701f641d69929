package ringtail

import (
	"context"
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The calls in this file let some ranks work without the others: a ring
// among a subset (the ranks left in the ring while stragglers are evicted),
// point-to-point Send and Recv (a parent handing results to its children),
// and eager contributions that a receiver collects as they arrive, up to a
// deadline (a parent waiting t_w for its children; a coded allreduce taking
// the first n−s results).

// AllReduceAmong is AllReduce over the ranks in members only (in ring order);
// only those ranks may call it, with the same members. Each member list is
// a group with its own call numbers.
func (c *Comm) AllReduceAmong(ctx context.Context, buf Buffer, op Op, members []int) error {
	cl := engine.Call{Spec: spec(wire.AllReduce, buf), DType: buf.DType, Op: op, Data: buf.Bytes}
	cl.Spec.Avg = op == Avg
	cl.Spec.Members = members
	var argErr error
	if _, err := engine.MembersKey(members, c.cfg.WorldSize, c.cfg.Rank); err != nil {
		argErr = err
	}
	return c.run(ctx, &cl, checkBuffer("AllReduceAmong", buf), argErr, opErr(op))
}

// Send sends buf to rank peer, which must call Recv with a buffer of the
// same length and type.
func (c *Comm) Send(ctx context.Context, peer int, buf Buffer) error {
	return c.p2p(ctx, peer, buf, true)
}

// Recv receives into buf what rank peer sends with Send.
func (c *Comm) Recv(ctx context.Context, peer int, buf Buffer) error {
	return c.p2p(ctx, peer, buf, false)
}

func (c *Comm) p2p(ctx context.Context, peer int, buf Buffer, send bool) error {
	cl := engine.Call{Spec: spec(wire.PointToPoint, buf), DType: buf.DType, Data: buf.Bytes}
	cl.Spec.Peer, cl.Spec.Send = peer, send
	var peerErr error
	if peer < 0 || peer >= c.cfg.WorldSize || peer == c.cfg.Rank {
		peerErr = fmt.Errorf("peer %d is not another rank of 0..%d", peer, c.cfg.WorldSize-1)
	}
	return c.run(ctx, &cl, checkBuffer("Send/Recv", buf), peerErr)
}

// Contribution is a message a peer sent with Contribute, buffered whole on
// arrival. Release it when done so its memory is reused.
type Contribution struct {
	From    int
	Tag     uint32
	Data    Buffer
	Arrived time.Time

	raw  transport.Eager
	e    *engine.Engine
	done bool
}

// Release returns the contribution's memory to the communicator.
func (ct *Contribution) Release() {
	if ct.e != nil && !ct.done {
		ct.e.Release(ct.raw)
		ct.done = true
	}
}

// FoldInto adds the contribution to dst element-wise (op Sum) with the
// executor's reduction kernels; dst must have its element type and length.
func (ct *Contribution) FoldInto(dst Buffer) error {
	if dst.DType != ct.Data.DType || len(dst.Bytes) != len(ct.Data.Bytes) {
		return fmt.Errorf("ringtail: contribution of rank %d (tag %#x) has %d × %v, the buffer %d × %v",
			ct.From, ct.Tag, ct.Data.Len(), ct.Data.DType, dst.Len(), dst.DType)
	}
	return reduce.Apply(dst.Bytes, ct.Data.Bytes, dst.DType, Sum)
}

// MaxContributionTag is the largest tag of a contribution. Contributions
// and the messages of a Mailbox share the links but not their tags: bit 31
// of an eager message's tag says which of the two it is (see
// internal/engine.Class), so neither ever takes the other's messages.
const MaxContributionTag = engine.MaxTag

// Contribute sends buf to rank peer as an eager message tagged with tag
// (at most MaxContributionTag): the peer buffers it on arrival without
// having to be ready, and picks it up with NextContribution. It returns
// once the data is handed to the transport (for shared memory and sockets:
// in the peer's buffers). Bad arguments return an error and leave the
// communicator usable.
func (c *Comm) Contribute(ctx context.Context, peer int, buf Buffer, tag uint32) error {
	if err := checkBuffer("Contribute", buf); err != nil {
		return err
	}
	if tag > MaxContributionTag {
		return fmt.Errorf("ringtail: Contribute: tag %#x above MaxContributionTag %#x", tag, MaxContributionTag)
	}
	return public(c.e.Post(ctx, peer, buf.Bytes, buf.DType, engine.Contributions, tag))
}

// Posting is a contribution on its way (ContributeAsync).
type Posting struct{ p *engine.Posting }

// Done reports whether the contribution has been handed to the transport:
// its buffer may be reused.
func (p *Posting) Done() bool { return p.p.Done() }

// Wait waits until the contribution is handed to the transport (or the
// peer dies, the communicator fails, or ctx ends).
func (p *Posting) Wait(ctx context.Context) error { return public(p.p.Wait(ctx)) }

// ContributeAsync is Contribute without the wait: buf is queued for peer
// behind the link's other messages and must not change until the Posting
// is Done. A parent hands fresh parameters to a child on a slow link this
// way without stalling its own step.
func (c *Comm) ContributeAsync(ctx context.Context, peer int, buf Buffer, tag uint32) (*Posting, error) {
	return c.contributeAsync(ctx, "ContributeAsync", peer, buf, tag, PostOptions{})
}

// PostOptions change how a contribution travels (ContributeAsyncWith).
type PostOptions struct {
	// Compress sends the contribution s2-compressed
	// (github.com/klauspost/compress/s2), frame by frame, each frame only
	// where compression makes it smaller. The receiving link decodes it
	// on arrival, so NextContribution, TakeContribution and an
	// AllReduceTree's fold see the plain data, bit for bit. It pays on a
	// slow link for data that compresses (sparse gradients), and costs
	// CPU time on both sides otherwise: decide with measurements (the
	// straggler driver does, with straggler.Compression).
	Compress bool
}

// PostStats is what a compressed contribution cost (Posting.Stats).
type PostStats struct {
	// Bytes is the contribution's size; WireBytes the payload bytes that
	// went on the wire (frame headers not counted).
	Bytes, WireBytes int64
	// Frames and Compressed count its frames and those sent compressed.
	Frames, Compressed int
	// Encode is the sender's time spent compressing.
	Encode time.Duration
}

// ContributeAsyncWith is ContributeAsync with options (PostOptions).
func (c *Comm) ContributeAsyncWith(ctx context.Context, peer int, buf Buffer, tag uint32, opts PostOptions) (*Posting, error) {
	return c.contributeAsync(ctx, "ContributeAsyncWith", peer, buf, tag, opts)
}

func (c *Comm) contributeAsync(ctx context.Context, name string, peer int, buf Buffer, tag uint32, opts PostOptions) (*Posting, error) {
	if err := checkBuffer(name, buf); err != nil {
		return nil, err
	}
	if tag > MaxContributionTag {
		return nil, fmt.Errorf("ringtail: %s: tag %#x above MaxContributionTag %#x", name, tag, MaxContributionTag)
	}
	p, err := c.e.PostAsyncWith(ctx, peer, buf.Bytes, buf.DType, engine.Contributions, tag, engine.PostOptions{Compress: opts.Compress})
	if err != nil {
		return nil, public(err)
	}
	return &Posting{p}, nil
}

// Stats returns what a contribution posted with PostOptions.Compress cost
// on the wire, once it is Done; false before, or without compression.
func (p *Posting) Stats() (PostStats, bool) {
	st, ok := p.p.Stats()
	if !ok {
		return PostStats{}, false
	}
	return PostStats{Bytes: st.Plain, WireBytes: st.Wire, Frames: st.Frames, Compressed: st.Compressed, Encode: st.Encode}, true
}

// NextContribution returns the earliest-arrived contribution not yet taken
// from any rank in from. When ctx ends first it returns ctx's error, and the
// communicator stays usable: a deadline here is a policy (wait at most t_w),
// not a failure. Contributions from other ranks are kept for later calls,
// and a Mailbox's messages are never returned. Several NextContribution and
// TakeContribution calls (and a Mailbox) may wait at once; each
// contribution goes to one of them.
func (c *Comm) NextContribution(ctx context.Context, from []int) (*Contribution, error) {
	return c.take(ctx, from, nil)
}

// TakeContribution returns the contribution from rank from with the given
// tag, waiting for it like NextContribution.
func (c *Comm) TakeContribution(ctx context.Context, from int, tag uint32) (*Contribution, error) {
	if tag > MaxContributionTag {
		return nil, fmt.Errorf("ringtail: TakeContribution: tag %#x above MaxContributionTag %#x", tag, MaxContributionTag)
	}
	return c.take(ctx, []int{from}, func(_ int, t uint32) bool { return t == tag })
}

// TryContribution returns, without waiting, the earliest-arrived
// contribution from rank from whose tag matches tag under mask
// (t&mask == tag&mask), if one has arrived.
func (c *Comm) TryContribution(from int, tag, mask uint32) (*Contribution, bool) {
	m, ok := c.e.TryTake(from, func(_ int, t uint32) bool { return t&mask == tag&mask })
	if !ok {
		return nil, false
	}
	return c.wrap(m), true
}

// TakeContributionMatching is TakeContribution for any tag that matches
// tag under mask.
func (c *Comm) TakeContributionMatching(ctx context.Context, from int, tag, mask uint32) (*Contribution, error) {
	return c.take(ctx, []int{from}, func(_ int, t uint32) bool { return t&mask == tag&mask })
}

// NextContributionMatching is NextContribution for the contributions
// whose tag matches tag under mask (t&mask == tag&mask): the earliest
// arrived from any rank in from. Others stay for later calls.
func (c *Comm) NextContributionMatching(ctx context.Context, from []int, tag, mask uint32) (*Contribution, error) {
	return c.take(ctx, from, func(_ int, t uint32) bool { return t&mask == tag&mask })
}

// wrap makes an eager message taken from the engine a Contribution.
func (c *Comm) wrap(m transport.Eager) *Contribution {
	return &Contribution{From: m.From, Tag: m.Tag, Data: Buffer{Bytes: m.Data, DType: DType(m.DType)}, Arrived: m.Arrived, raw: m, e: c.e}
}

func (c *Comm) take(ctx context.Context, from []int, want func(int, uint32) bool) (*Contribution, error) {
	m, err := c.e.Take(ctx, engine.Contributions, from, want)
	if err != nil {
		return nil, public(err)
	}
	return c.wrap(m), nil
}
