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

// fastOp is one operation of a program compiled for the fastbox path:
// byte offsets, and the peer's fastbox driver resolved once.
type fastOp struct {
	kind     plan.OpKind
	buf, src plan.Buf
	off, n   int // bytes
	srcOff   int // bytes
	div      int
	peer     int
	channel  int
	link     transport.FastLink
	fold     bool       // RecvReduce
	phase    plan.Phase // the step's, for a Tracer
}

// fastProg is a program compiled for runFast: its operations in the order
// they run (per channel and step: local ops, then sends, then receives).
type fastProg struct {
	ops     []fastOp
	scratch int // bytes
}

// fastProgram returns p compiled for the fastbox path, or nil when p runs
// on the general path (p.Fast, which the decision point set, says which:
// every rank of a call takes the same path). It fails when p cannot run
// there (a link without a fastbox, a message larger than one): the
// decision point was told otherwise. The compiled program is cached per
// program (programs are cached by the communicator) and element size.
func (e *Executor) fastProgram(p *plan.Program, call *Call) (*fastProg, error) {
	if !p.Fast {
		return nil, nil
	}
	if e.mesh == nil {
		return nil, fmt.Errorf("exec: a fastbox program without a mesh")
	}
	key := fastKey{p, call.DType.Size()}
	if key == e.lastFast {
		return e.lastProg, nil
	}
	fp, seen := e.fast[key]
	if !seen {
		var err error
		if fp, err = compileFast(e.mesh, p, key.esize); err != nil {
			return nil, err
		}
		if len(e.fast) > 1024 {
			clear(e.fast)
		}
		e.fast[key] = fp
	}
	e.lastFast, e.lastProg = key, fp
	return fp, nil
}

func compileFast(mesh *transport.Mesh, p *plan.Program, es int) (*fastProg, error) {
	fp := &fastProg{scratch: p.ScratchLen * es}
	for c, ch := range p.Channels {
		for _, st := range ch.Steps {
			for _, pass := range [...]func(plan.OpKind) bool{
				plan.OpKind.Local,
				func(k plan.OpKind) bool { return k == plan.Send },
				func(k plan.OpKind) bool { return k == plan.Recv || k == plan.RecvReduce },
			} {
				for _, o := range st.Ops {
					if !pass(o.Kind) {
						continue
					}
					op := fastOp{kind: o.Kind, buf: o.Buf, src: o.Src, off: o.Off * es, n: o.Len * es,
						srcOff: o.SrcOff * es, div: o.Div, peer: o.Peer, channel: c, fold: o.Kind == plan.RecvReduce, phase: st.Phase}
					if !o.Kind.Local() {
						f, has := mesh.Link(o.Peer, c).Fast()
						switch {
						case o.Kind.Eager():
							return nil, fmt.Errorf("exec: %s: eager op %v on the fastbox path", p.Algorithm, o)
						case !has:
							return nil, fmt.Errorf("exec: %s: the link to rank %d has no fastbox", p.Algorithm, o.Peer)
						case op.n > transport.FastboxPayload:
							return nil, fmt.Errorf("exec: %s: a message of %d bytes exceeds a fastbox (%d)", p.Algorithm, op.n, transport.FastboxPayload)
						}
						op.link = f
					}
					fp.ops = append(fp.ops, op)
				}
			}
		}
	}
	return fp, nil
}

// runFast runs a compiled program synchronously in the calling goroutine:
// within a step, local ops, then every send (a fastbox holds two messages,
// so a send only waits for the peer to have taken the one before the
// previous), then every receive. Programs never send a peer two messages
// in one step, so this cannot deadlock.
func (e *Executor) runFast(ctx context.Context, timeout time.Duration, fp *fastProg, p *plan.Program, call *Call) error {
	es := call.DType.Size()
	if len(call.Data) != p.DataLen*es || len(call.Input) != p.InputLen*es {
		return fmt.Errorf("exec: buffers of %d/%d bytes for a program of %d/%d %v elements", len(call.Data), len(call.Input), p.DataLen, p.InputLen, call.DType)
	}
	if cap(e.scratch) < fp.scratch {
		e.scratch = make([]byte, fp.scratch)
	}
	bufs := [3][]byte{plan.Data: call.Data, plan.Input: call.Input, plan.Scratch: e.scratch[:fp.scratch]}
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); timeout <= 0 || left < timeout {
			timeout = max(left, time.Nanosecond)
		}
	}
	cancel := ctx.Done()
	if e.tr != nil {
		e.traceReset()
	}
	for i := range fp.ops {
		e.fastPos = i
		o := &fp.ops[i]
		if e.tr != nil {
			e.traceFast(o)
		}
		dst := bufs[o.buf][o.off : o.off+o.n]
		var err error
		switch o.kind {
		case plan.Send:
			if err := o.link.Send(&call.Desc, dst, timeout, cancel, &e.stall); err != nil {
				return e.failFast(ctx, o.peer, err, true)
			}
			continue
		case plan.Recv, plan.RecvReduce:
			if err := o.link.Recv(&call.Desc, dst, o.fold, o.div, call.DType, call.Op, timeout, cancel, &e.stall); err != nil {
				return e.failFast(ctx, o.peer, err, true)
			}
			continue
		case plan.Copy:
			copy(dst, bufs[o.src][o.srcOff:o.srcOff+o.n])
		case plan.Reduce:
			err = reduce.Apply(dst, bufs[o.src][o.srcOff:o.srcOff+o.n], call.DType, call.Op)
		case plan.Scale:
			err = reduce.Scale(dst, call.DType, o.div)
		}
		if err != nil {
			return e.failFast(ctx, o.peer, err, false)
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
		out.Detail = "in " + e.coll.String() // rendered "... in AllReduce waiting on rank 2"
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
				Detail: fmt.Sprintf("rank %d made a small call (%v #%d, %d elements) where rank %d called %v #%d of %d elements",
					o.Peer, theirs.Collective, theirs.Call, theirs.Count, me, call.Desc.Collective, call.Desc.Call, call.Desc.Count)}
			e.mesh.Fail(err)
			return err
		}
	}
	return nil
}
