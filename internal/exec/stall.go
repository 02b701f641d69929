package exec

import (
	"time"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The stall rules (transport/stall.go) on the general path: a call that
// has waited transport.QueryAfter asks the peer it waits on what it is
// doing, judges the answer, and judges the frames its links hold without a
// receive; Queries that came while the call runs are answered here. None
// of this runs on a call that does not wait.

// stallWatch is one call's stall bookkeeping.
type stallWatch struct {
	start   time.Time       // first check tick of the call
	asked   time.Time       // last Query sent
	link    *transport.Link // the link asked
	channel int             // its channel
	answers uint64          // its answers when asked
}

// bell is the mesh's signal that a Query or an answer came (nil without
// a mesh).
func (e *Executor) bell() <-chan struct{} {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Bell()
}

// groupDone is transport.Stall.Done for the running call.
func (e *Executor) groupDone(group uint32) uint64 {
	if e.callDone == nil {
		return 0
	}
	return e.callDone(group)
}

// expects is transport.Stall.Expects: whether the running call will still
// receive from peer on channel.
func (e *Executor) expects(peer, channel int) bool {
	isRecv := func(k plan.OpKind) bool { return k == plan.Recv || k == plan.RecvReduce }
	if fp := e.fp; fp != nil {
		for _, o := range fp.ops[e.fastPos:] {
			if isRecv(o.kind) && o.peer == peer && o.channel == channel {
				return true
			}
		}
		return false
	}
	p := e.prog
	if p == nil || channel >= len(p.Channels) {
		return false
	}
	ch := p.Channels[channel]
	for s := e.step[channel]; s < len(ch.Steps); s++ {
		for i, o := range ch.Steps[s].Ops {
			if s == e.step[channel] && i < len(e.done[channel]) && e.done[channel][i] {
				continue
			}
			if isRecv(o.Kind) && o.Peer == peer {
				return true
			}
		}
	}
	return false
}

// watchStall runs on the check tick: after QueryAfter of waiting it asks the
// awaited peer what it is doing (again every QueryAfter) and judges held
// frames.
func (e *Executor) watchStall(st *stallWatch, now time.Time, p *plan.Program, call *Call) error {
	if st.start.IsZero() {
		st.start = now
		if e.waitHook != nil {
			if peer, _ := e.awaited(p); peer != transport.NoRank {
				e.waitHook(peer, e.began, now)
			}
		}
		return nil
	}
	if now.Sub(st.start) < transport.QueryAfter || now.Sub(st.asked) < transport.QueryAfter {
		return nil
	}
	peer, channel := e.awaited(p)
	if peer == transport.NoRank {
		return nil
	}
	st.asked = now
	st.link, st.channel = e.mesh.Link(peer, channel), channel
	st.answers = st.link.Answers()
	st.link.Ask(&call.Desc)
	if err := e.mesh.JudgeHeld(&call.Desc, e.stall.Done, e.stall.Expects); err != nil {
		e.mesh.Fail(err)
		return e.mesh.Err()
	}
	return nil
}

// takeAnswer returns the awaited peer's newest answer to a Query, if one
// came since the last was taken (nil otherwise).
func (e *Executor) takeAnswer(st *stallWatch) *wire.State {
	if st.link == nil || st.link.Answers() <= st.answers {
		return nil
	}
	ans, n := st.link.Answer()
	st.answers = n
	return &ans
}

// answerStall runs when the mesh rings: it answers Queries and judges ans,
// the awaited peer's answer taken (takeAnswer) before the caller handled
// the completions queued by then. A peer's data precedes its answer on the
// link, and the link's reader queues the data's completion before it
// stores the answer, so an answer that the peer has finished the call is
// judged only if this rank still waits for it there after every
// completion that preceded the answer.
func (e *Executor) answerStall(st *stallWatch, ans *wire.State, call *Call) error {
	e.mesh.AnswerAsks(&call.Desc, e.stall.Done)
	if ans == nil {
		return nil
	}
	if f, why := transport.JudgeState(&call.Desc, ans); why != "" && e.expects(st.link.Peer(), st.channel) {
		e.mesh.Fail(st.link.StallError(&call.Desc, ans, f, why))
		return e.mesh.Err()
	}
	return nil
}

// awaited returns the peer and channel of the first unfinished receive of
// the current steps (else send), or NoRank.
func (e *Executor) awaited(p *plan.Program) (peer, channel int) {
	peer, channel = transport.NoRank, 0
	for c := range p.Channels {
		if e.step[c] >= len(p.Channels[c].Steps) {
			continue
		}
		for i, o := range p.Channels[c].Steps[e.step[c]].Ops {
			if i < len(e.done[c]) && e.done[c][i] || o.Kind.Local() {
				continue
			}
			if o.Kind.Writes() {
				return o.Peer, c
			}
			if peer == transport.NoRank {
				peer, channel = o.Peer, c
			}
		}
	}
	return peer, channel
}
