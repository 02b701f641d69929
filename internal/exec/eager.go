package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Mailbox holds the eager messages a rank has received and not yet taken
// (the engine's); Collect ops take from it.
type Mailbox interface {
	// Take waits until ctx ends for a message from rank from whose tag
	// matches want under mask; ctx's error comes back unwrapped.
	Take(ctx context.Context, from int, want, mask uint32) (transport.Eager, error)
	// TryTake returns a matching message that has already arrived.
	TryTake(from int, want, mask uint32) (transport.Eager, bool)
	// Release returns a message's memory once folded.
	Release(transport.Eager)
}

// SetMailbox gives the executor the mailbox its Collect ops take from.
func (e *Executor) SetMailbox(mb Mailbox) { e.mailbox = mb }

// post sends an eager message: the peer buffers it on arrival.
func (e *Executor) post(ctx context.Context, c, tag int, o *plan.Op, call *Call, data []byte) error {
	d := wire.Desc{Collective: wire.Eager, DType: uint8(call.DType), Tag: o.Tag, Count: uint64(o.Len)}
	return e.mesh.Link(o.Peer, 0).Send(transport.SendReq{Desc: d, Buf: data, Chunk: e.chunk, Tag: tag, Done: e.compl, Guard: &e.guard}, ctx.Done())
}

// collect runs a Collect op: it folds every matching message that has
// arrived, waiting for the first until the call's deadline (or, with
// Must, the operation's). A deadline that passes is not a failure.
func (e *Executor) collect(ctx context.Context, o *plan.Op, call *Call, dst []byte) (int, error) {
	if e.mailbox == nil {
		return 0, errors.New("exec: a Collect op needs a mailbox")
	}
	n := 0
	fold := func(m transport.Eager) error {
		defer e.mailbox.Release(m)
		if len(m.Data) != len(dst) || m.DType != call.DType {
			me := e.mesh.Rank()
			te := &transport.Error{Kind: transport.KindMismatch, Rank: o.Peer, Reporter: me, Local: me,
				Detail: fmt.Sprintf("rank %d posted %d bytes of %v (tag %#x) where rank %d collects %d bytes of %v",
					o.Peer, len(m.Data), m.DType, m.Tag, me, len(dst), call.DType)}
			e.mesh.Fail(te)
			return te
		}
		n++
		return reduce.Apply(dst, m.Data, call.DType, call.Op)
	}
	for {
		m, ok := e.mailbox.TryTake(o.Peer, o.Tag, o.TagMask)
		if !ok {
			break
		}
		if err := fold(m); err != nil {
			return n, err
		}
	}
	if n > 0 || !o.Must && call.Deadline.IsZero() {
		return n, nil // without a deadline, only what has already arrived
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if e.timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, e.timeout)
	}
	defer cancel()
	if !o.Must && !call.Deadline.IsZero() {
		var cancelDeadline context.CancelFunc
		wctx, cancelDeadline = context.WithDeadline(wctx, call.Deadline)
		defer cancelDeadline()
	}
	m, err := e.mailbox.Take(wctx, o.Peer, o.Tag, o.TagMask)
	switch {
	case err == nil:
		if err := fold(m); err != nil {
			return n, err
		}
		for { // and whatever came with it
			m, ok := e.mailbox.TryTake(o.Peer, o.Tag, o.TagMask)
			if !ok {
				break
			}
			if err := fold(m); err != nil {
				return n, err
			}
		}
		return n, nil
	case !o.Must && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !call.Deadline.IsZero() && !time.Now().Before(call.Deadline):
		return 0, nil // the policy's deadline: the child's gradient is owed
	}
	return n, err
}
