package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// fastKey caches eligibility per program and element size: one program
// serves every element type, and a wider type may no longer fit a fastbox.
type fastKey struct {
	p     *plan.Program
	esize int
}

// fastEligible reports whether p can run on fastboxes: every message fits
// one and every link it uses has one (shared memory). The answer is cached
// per program (programs are cached by the communicator).
func (e *Executor) fastEligible(p *plan.Program, call *Call) bool {
	if e.mesh == nil {
		return false
	}
	key := fastKey{p, call.DType.Size()}
	if ok, seen := e.fast[key]; seen {
		return ok
	}
	ok := true
	es := call.DType.Size()
	for c, ch := range p.Channels {
		for _, st := range ch.Steps {
			for _, o := range st.Ops {
				if o.Kind.Local() {
					continue
				}
				if o.Len*es > transport.FastboxPayload {
					ok = false
				} else if _, has := e.mesh.Link(o.Peer, c).Fast(); !has {
					ok = false
				}
			}
		}
	}
	if len(e.fast) > 1024 {
		clear(e.fast)
	}
	e.fast[key] = ok
	return ok
}

// runFast runs p synchronously in the calling goroutine: within a step,
// local ops, then every send (a fastbox holds one message, so a send only
// waits for the peer to have taken the previous one), then every receive.
// Programs never send a peer two messages in one step, so this cannot
// deadlock.
func (e *Executor) runFast(ctx context.Context, timeout time.Duration, p *plan.Program, call *Call) error {
	es := call.DType.Size()
	if need := p.ScratchLen * es; cap(e.scratch) < need {
		e.scratch = make([]byte, need)
	}
	scratch := e.scratch[:p.ScratchLen*es]
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); timeout <= 0 || left < timeout {
			timeout = max(left, time.Nanosecond)
		}
	}
	region := func(b plan.Buf, off, n int) []byte {
		switch b {
		case plan.Input:
			return call.Input[off*es : (off+n)*es]
		case plan.Scratch:
			return scratch[off*es : (off+n)*es]
		}
		return call.Data[off*es : (off+n)*es]
	}
	cancel := ctx.Done()
	for c := range p.Channels {
		for s := range p.Channels[c].Steps {
			st := &p.Channels[c].Steps[s]
			for i := range st.Ops {
				o := &st.Ops[i]
				var err error
				switch o.Kind {
				case plan.Copy:
					copy(region(o.Buf, o.Off, o.Len), region(o.Src, o.SrcOff, o.Len))
				case plan.Reduce:
					err = reduce.Apply(region(o.Buf, o.Off, o.Len), region(o.Src, o.SrcOff, o.Len), call.DType, call.Op)
				case plan.Scale:
					err = reduce.Scale(region(o.Buf, o.Off, o.Len), call.DType, o.Div)
				}
				if err != nil {
					return e.failFast(ctx, o.Peer, err, false)
				}
			}
			for i := range st.Ops {
				o := &st.Ops[i]
				if o.Kind != plan.Send {
					continue
				}
				f, _ := e.mesh.Link(o.Peer, c).Fast()
				if err := f.Send(&call.Desc, region(o.Buf, o.Off, o.Len), timeout, cancel); err != nil {
					return e.failFast(ctx, o.Peer, err, true)
				}
			}
			for i := range st.Ops {
				o := &st.Ops[i]
				if o.Kind != plan.Recv && o.Kind != plan.RecvReduce {
					continue
				}
				f, _ := e.mesh.Link(o.Peer, c).Fast()
				if err := f.Recv(&call.Desc, region(o.Buf, o.Off, o.Len), o.Kind == plan.RecvReduce, call.DType, call.Op, timeout, cancel); err != nil {
					return e.failFast(ctx, o.Peer, err, true)
				}
			}
		}
	}
	return nil
}

// failFast turns a fastbox failure into a *transport.Error naming peer and
// fails the mesh, as the general path does.
func (e *Executor) failFast(ctx context.Context, peer int, err error, waited bool) error {
	if te, ok := err.(*transport.Error); ok {
		return te
	}
	me := e.mesh.Rank()
	out := &transport.Error{Kind: transport.KindLocal, Rank: transport.NoRank, Reporter: me, Local: me, Err: err}
	switch {
	case transport.IsDeadline(err):
		out.Kind, out.Err = transport.KindTimeout, context.DeadlineExceeded
	case transport.IsCanceled(err) && errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.Kind, out.Err = transport.KindTimeout, ctx.Err()
	case transport.IsCanceled(err):
		out.Kind, out.Err = transport.KindCanceled, ctx.Err()
	}
	if waited && (out.Kind == transport.KindTimeout || out.Kind == transport.KindCanceled) {
		out.Rank = peer
		out.Detail = fmt.Sprintf("rank %d was waiting on rank %d", me, peer)
	}
	e.mesh.Fail(out)
	return out
}

// fastboxCheck is how often a ring-path wait looks for a peer that took the
// fastbox path for what should be the same call; fastboxStrikes is how many
// consecutive checks must see it, with no progress on the link, before it
// is called a mismatch.
const (
	fastboxCheck   = 20 * time.Millisecond
	fastboxStrikes = 5
)

// checkFastboxes fails the mesh with a mismatch if a peer this rank is
// waiting on has left a small-message call in its fastbox, nothing of the
// awaited message is left in the ring from it, and nothing arrived for
// fastboxStrikes checks: the peer made a smaller call, so it will never
// send what this rank waits for.
func (e *Executor) checkFastboxes(p *plan.Program, call *Call) error {
	if len(e.compl) > 0 {
		return nil // completions not yet processed: progress
	}
	for c := range p.Channels {
		if e.step[c] >= len(p.Channels[c].Steps) {
			continue
		}
		for i, o := range p.Channels[c].Steps[e.step[c]].Ops {
			if o.Kind != plan.Recv && o.Kind != plan.RecvReduce || e.done[c][i] {
				continue
			}
			theirs, frames, ok := e.mesh.Link(o.Peer, c).FastPending()
			if !ok {
				e.strikes = 0
				return nil
			}
			if e.strikes == 0 || frames != e.lastFrames {
				e.strikes, e.lastFrames = 1, frames
				return nil
			}
			if e.strikes++; e.strikes < fastboxStrikes {
				return nil
			}
			e.strikes = 0
			me := e.mesh.Rank()
			err := &transport.Error{Kind: transport.KindMismatch, Rank: o.Peer, Reporter: me, Local: me,
				Detail: fmt.Sprintf("rank %d made a small call (%d elements, kind %d) where rank %d called one of %d elements", o.Peer, theirs.Count, theirs.Kind, me, call.Desc.Count)}
			e.mesh.Fail(err)
			return err
		}
	}
	return nil
}
