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

// Call is one collective call's buffers and arithmetic.
type Call struct {
	Desc  transport.Desc
	DType reduce.DType
	Op    reduce.Op
	Data  []byte
	Input []byte
	// Done reports how many calls of a group this rank has completed, for
	// the stall rules (transport.Stall); nil counts none.
	Done func(group uint32) uint64
	// Deadline ends the waits of Collect ops without Must (zero: only the
	// operation timeout); Collected is set to the number of messages the
	// call's Collect ops folded.
	Deadline  time.Time
	Collected int
}

// Executor runs programs for one rank. It is not safe for concurrent use:
// the communicator runs one collective at a time. Its buffers (completion
// channel, scratch, bookkeeping) are reused from call to call.
type Executor struct {
	fast       map[fastKey]*fastProg // programs compiled for fastboxes (nil: not eligible)
	lastFast   fastKey               // the previous call's key and program, checked before the map
	lastProg   *fastProg
	check      *time.Timer // paces checkFastboxes
	deadline   *time.Timer // the running call's operation timeout
	strikes    int         // consecutive checks that saw a stray fastbox message
	lastFrames uint64      // the link's frame count at the first strike
	mesh       *transport.Mesh
	mailbox    Mailbox
	timeout    time.Duration // the running call's operation timeout
	chunk      int
	compl      chan transport.Result
	scratch    []byte
	step       []int    // per channel: current step
	left       []int    // per channel: network ops of the current step not yet done
	done       [][]bool // per channel: which ops of the current step are done

	// The running call, for the stall rules (see stall.go).
	prog     *plan.Program
	coll     wire.Collective // its collective, which a timeout names
	fp       *fastProg
	fastPos  int // runFast: index of the op running
	callDone func(group uint32) uint64
	stall    transport.Stall

	// waitHook hears of a call's long waits (the flight recorder; nil:
	// none); began is when the running general-path call began, read
	// only when there is a hook.
	waitHook func(peer int, since, now time.Time)
	began    time.Time

	// guard is the running general-path call's (transport.Guard): its
	// sends and receives touch the caller's buffers only inside it.
	guard transport.Guard

	// Tracing (trace.go); tr is nil when off.
	tr      Tracer
	trPhase plan.Phase // channel 0's current phase
	trHeard bool       // a receive of the call completed
}

// New returns an executor that sends in frames of at most chunk bytes.
func New(mesh *transport.Mesh, chunk int) (*Executor, error) {
	if chunk <= 0 {
		return nil, fmt.Errorf("exec: chunk %d", chunk)
	}
	e := &Executor{mesh: mesh, chunk: chunk, compl: make(chan transport.Result, 256), fast: map[fastKey]*fastProg{}}
	e.stall = transport.Stall{Done: e.groupDone, Expects: e.expects}
	return e, nil
}

const tagBits = 16 // a result's tag is channel<<tagBits | op index

// Run executes p for call within timeout (zero: no limit beyond ctx). The
// program must have been validated and built for this rank and these
// buffer lengths (in elements of call.DType). The timeout is a duration,
// not a deadline, so a small call that never waits never reads the clock.
func (e *Executor) Run(ctx context.Context, timeout time.Duration, p *plan.Program, call *Call) error {
	e.prog, e.callDone, e.timeout, e.coll = p, call.Done, timeout, call.Desc.Collective
	call.Collected = 0
	fp, err := e.fastProgram(p, call)
	if err != nil {
		return err
	}
	if fp != nil {
		e.fp = fp
		err := e.runFast(ctx, timeout, fp, p, call)
		e.fp = nil
		return err // synchronous: nothing of the call is left with the links
	}
	err = e.runGeneral(ctx, timeout, p, call)
	if err != nil && e.mesh != nil {
		// Sends and receives of the call may still be queued or under
		// way: take the call's buffers back from the failed mesh's links
		// (no frame is copied into or out of them once Release returns)
		// before the caller gets them.
		e.mesh.TakeBack(&e.guard)
	}
	return err
}

// runGeneral runs p through the transport's queues, waiting on
// completions (Run's path for programs that do not fit fastboxes; kept
// apart so that the fast path's return does not pay for this one's defer).
func (e *Executor) runGeneral(ctx context.Context, timeout time.Duration, p *plan.Program, call *Call) error {
	var expired <-chan time.Time
	if timeout > 0 {
		if e.deadline == nil {
			e.deadline = time.NewTimer(timeout)
		} else {
			e.deadline.Reset(timeout)
		}
		defer e.deadline.Stop()
		expired = e.deadline.C
	}
	es := call.DType.Size()
	if len(call.Data) != p.DataLen*es || len(call.Input) != p.InputLen*es {
		return fmt.Errorf("exec: buffers of %d/%d bytes for a program of %d/%d %v elements", len(call.Data), len(call.Input), p.DataLen, p.InputLen, call.DType)
	}
	if need := p.ScratchLen * es; cap(e.scratch) < need {
		e.scratch = make([]byte, need)
	}
	scratch := e.scratch[:p.ScratchLen*es]
	nch := len(p.Channels)
	maxOps := 0
	for _, ch := range p.Channels {
		for _, st := range ch.Steps {
			maxOps = max(maxOps, len(st.Ops))
		}
	}
	if maxOps >= 1<<tagBits {
		return fmt.Errorf("exec: step of %d operations", maxOps)
	}
	if need := nch * maxOps; cap(e.compl) < need {
		e.compl = make(chan transport.Result, need)
	}
	for len(e.step) < nch {
		e.step, e.left, e.done = append(e.step, 0), append(e.left, 0), append(e.done, nil)
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
	// start runs the local ops of channel c's current step and posts its
	// network ops; it returns false when the channel has finished.
	var start func(c int) (bool, error)
	start = func(c int) (bool, error) {
		for e.step[c] < len(p.Channels[c].Steps) {
			st := &p.Channels[c].Steps[e.step[c]]
			if e.tr != nil {
				e.traceStep(c, st)
			}
			if cap(e.done[c]) < len(st.Ops) {
				e.done[c] = make([]bool, len(st.Ops))
			}
			e.done[c] = e.done[c][:len(st.Ops)]
			clear(e.done[c])
			e.left[c] = 0
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
				case plan.Collect:
					// A receive that ends at a deadline: it runs where it
					// stands, before the step's sends (collects come first
					// in the programs that have them).
					var k int
					k, err = e.collect(ctx, o, call, region(o.Buf, o.Off, o.Len))
					call.Collected += k
					e.done[c][i] = err == nil
				default:
					e.left[c]++
				}
				if err != nil {
					return false, err
				}
			}
			for i := range st.Ops {
				o := &st.Ops[i]
				if o.Kind.Local() || o.Kind == plan.Collect {
					continue
				}
				tag := c<<tagBits | i
				link := e.mesh.Link(o.Peer, c)
				var err error
				switch o.Kind {
				case plan.Post:
					err = e.post(ctx, c, tag, o, call, region(o.Buf, o.Off, o.Len))
				case plan.Send:
					err = link.Send(transport.SendReq{Desc: call.Desc, Buf: region(o.Buf, o.Off, o.Len), Chunk: e.chunk, Tag: tag, Done: e.compl,
						Guard: &e.guard}, ctx.Done())
				case plan.Recv, plan.RecvReduce:
					err = link.Recv(transport.RecvReq{Desc: call.Desc, Buf: region(o.Buf, o.Off, o.Len), Reduce: o.Kind == plan.RecvReduce,
						DType: call.DType, Op: call.Op, Tag: tag, Done: e.compl, Guard: &e.guard}, ctx.Done())
				}
				if transport.IsCanceled(err) {
					err = ctx.Err()
				}
				if err != nil {
					return false, err
				}
			}
			if e.left[c] > 0 {
				return true, nil
			}
			e.step[c]++
		}
		return false, nil
	}
	e.strikes = 0
	if e.check == nil {
		e.check = time.NewTimer(fastboxCheck)
	} else {
		e.check.Reset(fastboxCheck)
	}
	defer e.check.Stop()
	if e.tr != nil {
		e.traceReset()
	}
	if e.waitHook != nil {
		e.began = time.Now()
	}
	e.guard.Reset()
	deaths := e.deaths()
	var st stallWatch
	running := 0
	for c := 0; c < nch; c++ {
		e.step[c] = 0
		more, err := start(c)
		if err != nil {
			return e.fail(p, err)
		}
		if more {
			running++
		}
	}
	// complete records one finished send or receive and starts the
	// channel's next step when it was the step's last.
	complete := func(r transport.Result) error {
		c, i := r.Tag>>tagBits, r.Tag&(1<<tagBits-1)
		if e.tr != nil {
			e.traceCompletion(p, c, i)
		}
		e.done[c][i] = true
		if e.left[c]--; e.left[c] > 0 {
			return nil
		}
		// The step is complete. A fold that also divides (Avg) was only
		// folded by the link's reader: the division runs now, once the
		// step's sends are out too. Inside the reader, or as soon as the
		// fold is in, it competes with the send the peer is waiting for
		// (2 ranks, 16 MiB Avg: 3.5–4.2 against 4.3–5.4 GB/s).
		for _, o := range p.Channels[c].Steps[e.step[c]].Ops {
			if o.Kind == plan.RecvReduce && o.Div > 0 {
				if err := reduce.Scale(region(o.Buf, o.Off, o.Len), call.DType, o.Div); err != nil {
					return e.fail(p, err)
				}
			}
		}
		e.step[c]++
		more, err := start(c)
		if err != nil {
			return e.fail(p, err)
		}
		if !more {
			running--
		}
		return nil
	}
	for running > 0 {
		select {
		case now := <-e.check.C:
			if err := e.checkFastboxes(p, call); err != nil {
				return err
			}
			if err := e.watchStall(&st, now, p, call); err != nil {
				return err
			}
			e.check.Reset(fastboxCheck)
		case <-e.bell():
			// The awaited peer's answer is read first, then the
			// completions queued by then are handled, then the answer is
			// judged: the peer's data precedes its answer on the link and
			// the link's reader queues the data's completion before it
			// stores the answer, so every completion that came before
			// the answer is handled before it is judged — also when the
			// answer lands while the completions are being drained (read
			// after the drain, it could be judged against a receive whose
			// completion is still queued).
			ans := e.takeAnswer(&st)
			for drained := false; !drained; {
				select {
				case r := <-e.compl:
					if err := complete(r); err != nil {
						return err
					}
				default:
					drained = true
				}
			}
			if running == 0 {
				break
			}
			if err := e.answerStall(&st, ans, call); err != nil {
				return err
			}
		case r := <-e.compl:
			if err := complete(r); err != nil {
				return err
			}
		case <-e.failed():
			return e.mesh.Err()
		case <-deaths:
			if err := e.involvesDead(p); err != nil {
				return err
			}
			deaths = e.deaths()
		case <-ctx.Done():
			return e.fail(p, ctx.Err())
		case <-expired:
			return e.fail(p, context.DeadlineExceeded)
		}
	}
	return nil
}

// SetWaitHook installs h, told of every wait of a call that lasts
// transport.WaitReport (the general path tells at its first check tick),
// with the peer waited on. Call it between calls.
func (e *Executor) SetWaitHook(h func(peer int, since, now time.Time)) {
	e.waitHook, e.stall.Waiting = h, h
}

// deaths signals the next peer death (tolerant meshes); nil without a mesh.
func (e *Executor) deaths() <-chan struct{} {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Deaths()
}

// involvesDead fails the mesh if p exchanges data with a dead peer: the
// collective cannot finish, and its links may no longer agree.
func (e *Executor) involvesDead(p *plan.Program) error {
	for _, ch := range p.Channels {
		for _, st := range ch.Steps {
			for _, o := range st.Ops {
				if o.Kind.Local() {
					continue
				}
				if de := e.mesh.DeadErr(o.Peer); de != nil {
					e.mesh.Fail(de)
					return e.mesh.Err()
				}
			}
		}
	}
	return nil
}

// failed is the mesh's failure signal; a single-rank executor has no mesh
// and never fails this way.
func (e *Executor) failed() <-chan struct{} {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Failed()
}

// fail turns err into a *transport.Error blaming the rank this rank was
// waiting on (the first unfinished receive, else send), fails the mesh so
// every peer hears of it, and returns the error.
func (e *Executor) fail(p *plan.Program, err error) error {
	if e.mesh == nil {
		return err
	}
	var te *transport.Error
	if errors.As(err, &te) {
		e.mesh.Fail(te) // a collective broke half-way: its links may no longer agree
		return e.mesh.Err()
	}
	if me := e.mesh.Err(); me != nil {
		return me
	}
	me := e.mesh.Rank()
	out := &transport.Error{Kind: transport.KindLocal, Rank: transport.NoRank, Reporter: me, Local: me, Err: err}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		out.Kind = transport.KindTimeout
	case errors.Is(err, context.Canceled):
		out.Kind = transport.KindCanceled
	}
	if out.Kind == transport.KindTimeout || out.Kind == transport.KindCanceled {
		out.Rank = e.waitingOn(p)
		if out.Rank != transport.NoRank {
			out.Detail = "in " + e.coll.String() // rendered "... in Barrier waiting on rank 2"
		}
	}
	e.mesh.Fail(out)
	return out
}

func (e *Executor) waitingOn(p *plan.Program) int {
	peer, _ := e.awaited(p)
	return peer
}
