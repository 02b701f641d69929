package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// mailbox keeps the eager messages this rank received and has not yet
// taken, so that a caller can wait for one sender (and tag) while others
// arrive in any order.
type mailbox struct {
	mesh *transport.Mesh
	mu   sync.Mutex
	held []transport.Eager // received, not yet taken, in arrival order
}

func newMailbox(m *transport.Mesh) mailbox { return mailbox{mesh: m} }

// Post sends buf to peer as an eager message tagged tag: the peer buffers
// it on arrival without having to be ready. It returns once the data is
// handed to the transport.
func (e *Engine) Post(ctx context.Context, peer int, buf []byte, dt reduce.DType, tag uint32) error {
	if e.mesh == nil {
		return ErrClosed
	}
	if peer < 0 || peer >= e.s.World || peer == e.s.Rank {
		return fmt.Errorf("ringtail: eager message to %d: not another rank of 0..%d", peer, e.s.World-1)
	}
	ctx, cancel := context.WithTimeout(ctx, e.s.OpTimeout)
	defer cancel()
	done := make(chan transport.Result, 1)
	d := wire.Desc{Collective: wire.Eager, DType: uint8(dt), Tag: tag, Count: uint64(len(buf) / dt.Size())}
	link := e.mesh.Link(peer, 0)
	if err := link.Send(transport.SendReq{Desc: d, Buf: buf, Chunk: e.s.Tunables.ChunkBytes, Done: done}, ctx.Done()); err != nil {
		if transport.IsCanceled(err) {
			return e.timeoutOn(peer, ctx.Err())
		}
		return err
	}
	for {
		select {
		case <-done:
			return nil
		case <-e.mesh.Failed():
			return e.mesh.Err()
		case <-e.mesh.Deaths():
			if de := e.mesh.DeadErr(peer); de != nil {
				return de // the peer died mid-send (tolerated: the communicator lives on)
			}
		case <-ctx.Done():
			return e.timeoutOn(peer, ctx.Err())
		}
	}
}

func (e *Engine) timeoutOn(peer int, err error) error {
	me := e.s.Rank
	te := &transport.Error{Kind: transport.KindTimeout, Rank: peer, Reporter: me, Local: me, Err: err,
		Detail: fmt.Sprintf("rank %d was sending to rank %d", me, peer)}
	if errors.Is(err, context.Canceled) {
		te.Kind = transport.KindCanceled
	}
	e.mesh.Fail(te)
	return te
}

// Take returns the earliest-arrived eager message not yet taken whose
// sender is in from and for which want (if not nil) holds. When ctx ends
// first it returns ctx's error, unwrapped, and the communicator stays
// usable: a deadline here is a policy (wait at most t_w), not a failure.
func (e *Engine) Take(ctx context.Context, from []int, want func(from int, tag uint32) bool) (transport.Eager, error) {
	if e.mesh == nil {
		return transport.Eager{}, ErrClosed
	}
	match := func(m *transport.Eager) bool {
		in := false
		for _, f := range from {
			in = in || f == m.From
		}
		return in && (want == nil || want(m.From, m.Tag))
	}
	b := &e.box
	b.mu.Lock()
	for i := range b.held {
		if match(&b.held[i]) {
			m := b.held[i]
			b.held = append(b.held[:i], b.held[i+1:]...)
			b.mu.Unlock()
			return m, nil
		}
	}
	b.mu.Unlock()
	for {
		select {
		case m := <-e.mesh.Inbox():
			if match(&m) {
				return m, nil
			}
			b.mu.Lock()
			b.held = append(b.held, m)
			b.mu.Unlock()
		case <-e.mesh.Failed():
			return transport.Eager{}, e.mesh.Err()
		case <-ctx.Done():
			return transport.Eager{}, ctx.Err()
		}
	}
}

// Release returns an eager message's memory for reuse.
func (e *Engine) Release(m transport.Eager) {
	if e.mesh != nil {
		e.mesh.Release(m)
	}
}

// mailboxOf adapts the engine's mailbox to the executor's Collect ops.
type mailboxOf struct{ e *Engine }

func tagMatch(want, mask uint32) func(int, uint32) bool {
	return func(_ int, t uint32) bool { return t&mask == want&mask }
}

// Take waits for a message from one rank; a death of that rank (tolerated
// meshes) ends the wait with the death's error.
func (m mailboxOf) Take(ctx context.Context, from int, want, mask uint32) (transport.Eager, error) {
	e := m.e
	if de := e.mesh.DeadErr(from); de != nil {
		return transport.Eager{}, de
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deaths := e.mesh.Deaths()
	go func() { // a death ends the wait (the watcher ends with the wait)
		select {
		case <-deaths:
			if e.mesh.DeadErr(from) != nil {
				cancel()
			}
		case <-ctx.Done():
		}
	}()
	msg, err := e.Take(ctx, []int{from}, tagMatch(want, mask))
	if err != nil {
		if de := e.mesh.DeadErr(from); de != nil {
			return transport.Eager{}, de
		}
	}
	return msg, err
}

// TryTake returns a matching message that has already arrived.
func (m mailboxOf) TryTake(from int, want, mask uint32) (transport.Eager, bool) {
	return m.e.TryTake(from, tagMatch(want, mask))
}

// Release returns a message's memory.
func (m mailboxOf) Release(msg transport.Eager) { m.e.Release(msg) }

// TryTake returns an already-arrived message from rank from for which want
// holds, without waiting.
func (e *Engine) TryTake(from int, want func(int, uint32) bool) (transport.Eager, bool) {
	if e.mesh == nil {
		return transport.Eager{}, false
	}
	b := &e.box
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		select {
		case m := <-e.mesh.Inbox():
			b.held = append(b.held, m)
			continue
		default:
		}
		break
	}
	for i := range b.held {
		if m := b.held[i]; m.From == from && want(m.From, m.Tag) {
			b.held = append(b.held[:i], b.held[i+1:]...)
			return m, true
		}
	}
	return transport.Eager{}, false
}
