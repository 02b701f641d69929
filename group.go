package ringtail

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/ring"
	"github.com/ringtail-ml/ringtail/tree"
)

// The calls in this file let some ranks work without the others: a ring
// among a subset (the ranks left in the ring while stragglers are evicted),
// point-to-point Send and Recv (a parent handing results to its children),
// and eager contributions that a receiver collects as they arrive, up to a
// deadline (a parent waiting t_w for its children; a coded allreduce taking
// the first n−s results).

// AllReduceAmong is AllReduce over the ranks in members only (in ring order);
// only those ranks may call it, with the same members.
func (c *Comm) AllReduceAmong(ctx context.Context, buf Buffer, op Op, members []int) error {
	cl := call{kind: kindAllReduce, data: buf, op: op, count: buf.Len()}
	var argErr error
	key, err := groupKey(members, c.cfg.WorldSize, c.cfg.Rank)
	if err != nil {
		argErr = err
	} else if !op.Valid() {
		argErr = fmt.Errorf("invalid reduction op %v", op)
	}
	cl.root = int(hashMembers(key))
	if err := c.precheck(cl, c.check("AllReduceAmong", buf), argErr); err != nil {
		return err
	}
	n, avg := buf.Len(), op == Avg
	small := len(buf.Bytes) <= c.cfg.SmallBytes
	order := append([]int(nil), members...)
	return c.run(ctx, cl, func() (*plan.Program, error) {
		if small {
			return tree.AllReduce(order, c.cfg.WorldSize, c.cfg.Rank, n, avg)
		}
		return ring.AllReduce(ring.Spec{Order: order, World: c.cfg.WorldSize, Rank: c.cfg.Rank, Channels: c.cfg.Channels}, n, avg)
	}, progKey{kind: kindAllReduce, count: n, avg: avg, small: small, group: key})
}

func groupKey(members []int, world, me int) (string, error) {
	if len(members) == 0 {
		return "", errors.New("empty member list")
	}
	seen := make(map[int]bool, len(members))
	in := false
	var b strings.Builder
	for i, r := range members {
		if r < 0 || r >= world || seen[r] {
			return "", fmt.Errorf("members %v are not distinct ranks in 0..%d", members, world-1)
		}
		seen[r] = true
		in = in || r == me
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r))
	}
	if !in {
		return "", fmt.Errorf("rank %d is not among members %v", me, members)
	}
	return b.String(), nil
}

func hashMembers(key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32() & 0x7fffffff
}

// Send sends buf to rank peer, which must call Recv with a buffer of the
// same length and type.
func (c *Comm) Send(ctx context.Context, peer int, buf Buffer) error {
	return c.p2p(ctx, peer, buf, plan.Send)
}

// Recv receives into buf what rank peer sends with Send.
func (c *Comm) Recv(ctx context.Context, peer int, buf Buffer) error {
	return c.p2p(ctx, peer, buf, plan.Recv)
}

func (c *Comm) p2p(ctx context.Context, peer int, buf Buffer, kind plan.OpKind) error {
	cl := call{kind: kindP2P, data: buf, count: buf.Len()}
	var peerErr error
	if peer < 0 || peer >= c.cfg.WorldSize || peer == c.cfg.Rank {
		peerErr = fmt.Errorf("peer %d is not another rank of 0..%d", peer, c.cfg.WorldSize-1)
	}
	if err := c.precheck(cl, c.check("Send/Recv", buf), peerErr); err != nil {
		return err
	}
	n := buf.Len()
	return c.run(ctx, cl, func() (*plan.Program, error) {
		return &plan.Program{Algorithm: "p2p", Rank: c.cfg.Rank, World: c.cfg.WorldSize, DataLen: n,
			Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: kind, Peer: peer, Buf: plan.Data, Len: n}}}}}}}, nil
	}, progKey{kind: kindP2P, count: n, root: peer, small: kind == plan.Send})
}

// Contribution is a message a peer sent with Contribute, buffered whole on
// arrival. Release it when done so its memory is reused.
type Contribution struct {
	From    int
	Tag     uint32
	Data    Buffer
	Arrived time.Time

	raw  transport.Contribution
	mesh *transport.Mesh
}

// Release returns the contribution's memory to the communicator.
func (ct *Contribution) Release() {
	if ct.mesh != nil {
		ct.mesh.Release(ct.raw)
		ct.mesh = nil
	}
}

// Contribute sends buf to rank peer as an eager message tagged with tag:
// the peer buffers it on arrival without having to be ready, and picks it
// up with NextContribution. It returns once the data is handed to the
// transport (for shared memory and sockets: in the peer's buffers).
func (c *Comm) Contribute(ctx context.Context, peer int, buf Buffer, tag uint32) error {
	if err := c.check("Contribute", buf); err != nil {
		return err
	}
	if peer < 0 || peer >= c.cfg.WorldSize || peer == c.cfg.Rank {
		return fmt.Errorf("ringtail: Contribute to %d: not another rank of 0..%d", peer, c.cfg.WorldSize-1)
	}
	if c.mesh == nil {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	done := make(chan transport.Result, 1)
	desc := transport.Desc{Kind: transport.KindContribution, DType: uint8(buf.DType), Root: tag, Count: uint64(buf.Len())}
	link := c.mesh.Link(peer, 0)
	if err := link.Send(transport.SendReq{Desc: desc, Buf: buf.Bytes, Chunk: c.cfg.ChunkBytes, Done: done}, ctx.Done()); err != nil {
		if transport.IsCanceled(err) {
			return c.timeoutOn(peer, ctx.Err())
		}
		return err
	}
	for {
		select {
		case <-done:
			return nil
		case <-c.mesh.Failed():
			return c.mesh.Err()
		case <-c.mesh.Deaths():
			if e := c.mesh.DeadErr(peer); e != nil {
				return e // the peer died mid-send (tolerated: the communicator lives on)
			}
		case <-ctx.Done():
			return c.timeoutOn(peer, ctx.Err())
		}
	}
}

func (c *Comm) timeoutOn(peer int, err error) error {
	e := &Error{Kind: KindTimeout, Rank: peer, Reporter: c.cfg.Rank, Local: c.cfg.Rank, Err: err,
		Detail: fmt.Sprintf("rank %d was sending to rank %d", c.cfg.Rank, peer)}
	if errors.Is(err, context.Canceled) {
		e.Kind = KindCanceled
	}
	c.mesh.Fail(e)
	return e
}

// NextContribution returns the earliest-arrived contribution not yet taken
// from any rank in from. When ctx ends first it returns ctx's error, and the
// communicator stays usable: a deadline here is a policy (wait at most t_w),
// not a failure. Contributions from other ranks are kept for later calls.
func (c *Comm) NextContribution(ctx context.Context, from []int) (*Contribution, error) {
	if c.mesh == nil {
		return nil, ErrClosed
	}
	want := func(r int) bool {
		for _, f := range from {
			if f == r {
				return true
			}
		}
		return false
	}
	c.stashMu.Lock()
	for i, ct := range c.stash {
		if want(ct.From) {
			c.stash = append(c.stash[:i], c.stash[i+1:]...)
			c.stashMu.Unlock()
			return c.wrap(ct), nil
		}
	}
	c.stashMu.Unlock()
	for {
		select {
		case ct := <-c.mesh.Inbox():
			if want(ct.From) {
				return c.wrap(ct), nil
			}
			c.stashMu.Lock()
			c.stash = append(c.stash, ct)
			c.stashMu.Unlock()
		case <-c.mesh.Failed():
			return nil, c.mesh.Err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Comm) wrap(ct transport.Contribution) *Contribution {
	return &Contribution{From: ct.From, Tag: ct.Tag, Data: Buffer{Bytes: ct.Data, DType: DType(ct.DType)}, Arrived: ct.Arrived, raw: ct, mesh: c.mesh}
}
