package exec

import (
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// CallInfo is what a Tracer learns of a call when it begins. It is passed
// by value: nothing of it escapes to the heap.
type CallInfo struct {
	// Desc is the call's descriptor (collective, group, call number).
	Desc transport.Desc
	// Algorithm is the program's algorithm ("ring", "recursive-doubling").
	Algorithm string
	// Bytes is the call's size as nccl-tests counts it: the in-place
	// buffer, AllGather's output, ReduceScatter's input.
	Bytes int
	// Ranks is the number of ranks taking part.
	Ranks int
}

// Tracer observes the calls of one rank (metrics, a timeline). Begin and
// End bracket every call (the engine calls them); Arrived and Phase come
// from the executor in between. Calls are serialised, so a Tracer sees one
// call at a time. A nil Tracer is the default: tracing off costs one nil
// check per call and per step change, and none of the methods may
// allocate on a call's path when on.
type Tracer interface {
	// Begin is called as a call starts.
	Begin(c CallInfo)
	// Arrived is called when the first data from a peer completes: the
	// time before it is time spent waiting for peers (on the fastbox path,
	// when the op after the first receive starts).
	Arrived()
	// Phase is called when channel 0 starts a step of another phase than
	// the step before (the ring's reduce-scatter, then its allgather).
	Phase(ph plan.Phase)
	// End is called when the call ends, with its error (nil on success).
	End(err error)
}

// SetTracer installs t (nil: none). Call it between calls.
func (e *Executor) SetTracer(t Tracer) {
	e.tr, e.trPhase = t, plan.PhaseNone
}

// traceStep reports a phase change when channel c starts st.
func (e *Executor) traceStep(c int, st *plan.Step) {
	if c == 0 && st.Phase != e.trPhase {
		e.trPhase = st.Phase
		e.tr.Phase(st.Phase)
	}
}

// traceCompletion reports the first completed receive of a call.
func (e *Executor) traceCompletion(p *plan.Program, c, i int) {
	if e.trHeard {
		return
	}
	if k := p.Channels[c].Steps[e.step[c]].Ops[i].Kind; k == plan.Recv || k == plan.RecvReduce {
		e.trHeard = true
		e.tr.Arrived()
	}
}

// traceFast reports, on the fastbox path, the phase of op o (before it
// runs) and the first receive (as it starts: the previous ops are done).
func (e *Executor) traceFast(o *fastOp) {
	if o.channel == 0 && o.phase != e.trPhase {
		e.trPhase = o.phase
		e.tr.Phase(o.phase)
	}
	if !e.trHeard && e.fastPos > 0 {
		if prev := &e.fp.ops[e.fastPos-1]; prev.kind == plan.Recv || prev.kind == plan.RecvReduce {
			e.trHeard = true
			e.tr.Arrived()
		}
	}
}

// traceReset prepares the per-call tracing state.
func (e *Executor) traceReset() {
	e.trPhase, e.trHeard = plan.PhaseNone, false
}
