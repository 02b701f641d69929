package transport

import (
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Stalls. Most disagreements between ranks show in the first data frame a
// rank receives: its Desc differs from the receive's (Link.check). Some
// never show that way, because nothing is sent that could show them: two
// ranks that each believe the other is the root of a broadcast both wait
// to receive; a rank that believes it is the root sends and returns, and
// its frames wait forever at a rank that thought otherwise. These rules
// catch them, off the data path:
//
//   - A rank that has waited long on a peer asks it what it is doing
//     (Link.Ask, a Query carrying the asker's Desc) and judges the answer
//     (JudgeState): a peer in the same call with other arguments, or one
//     that has already finished the call, disagrees with it.
//   - A link reader holding a data frame that no receive has claimed asks,
//     every heldCheck, whether one ever will (judgeHeld): not if this rank
//     has finished the frame's call. While a call runs, the executor judges
//     held frames against it when it waits long (JudgeHeld).
//
// A peer that is behind, or in the same call, is slow, not wrong: the asker
// keeps waiting, up to its operation timeout. The answer to a Query travels
// on the link the asker waits on, after every data frame the peer sent on
// it before answering, so "finished" never races with data in flight.

// Stall is what a long wait needs to judge whether the peer disagrees with
// this rank's call: Done(g) is how many calls of group g the rank has
// completed, Expects(peer, channel) whether the running call will still
// receive from peer on channel. Waiting, when not nil, is told once per
// wait that has lasted WaitReport, on whom and since when (the flight
// recorder). The executor owns it.
type Stall struct {
	Done    func(group uint32) uint64
	Expects func(peer, channel int) bool
	Waiting func(peer int, since, now time.Time)
}

// WaitReport is how long a wait lasts before Stall.Waiting hears of it.
const WaitReport = time.Millisecond

// QueryAfter is how long a wait lasts before it asks the peer what it is
// doing, and how often it asks again while the wait lasts.
const QueryAfter = 100 * time.Millisecond

// ask is a Query the executor must answer because a call was running when
// it came.
type ask struct {
	link *Link
	q    Desc
}

// Bell is signalled when the executor has something to look at: a Query to
// answer, an answer to a Query, a data frame held without a receive.
func (m *Mesh) Bell() <-chan struct{} { return m.bell }

func (m *Mesh) ring() {
	select {
	case m.bell <- struct{}{}:
	default:
	}
}

// answer handles a peer's Query: answered at once from the rank's state
// between calls, or left for the executor (AnswerAsks) while a call runs.
func (m *Mesh) answer(l *Link, q *Desc) {
	if m.cfg.State != nil {
		if st, ok := m.cfg.State(q.Group); ok {
			st.ForGroup, st.ForCall = q.Group, q.Call
			l.queue(wire.TypeState, st.Marshal())
			return
		}
	}
	m.asksMu.Lock()
	if len(m.asks) < 4*len(m.links) {
		m.asks = append(m.asks, ask{l, *q})
	}
	m.asksMu.Unlock()
	m.asked.Store(true)
	m.ring()
}

// Asked reports whether Queries wait for AnswerAsks (a cheap poll for
// executors spinning on a fastbox).
func (m *Mesh) Asked() bool { return m.asked.Load() }

// AnswerAsks answers the Queries that came while a call ran: the rank is in
// call cur, and done(g) is how many calls of group g it has completed.
func (m *Mesh) AnswerAsks(cur *Desc, done func(group uint32) uint64) {
	if !m.asked.Load() {
		return
	}
	m.asksMu.Lock()
	asks := m.asks
	m.asks = nil
	m.asked.Store(false)
	m.asksMu.Unlock()
	for _, a := range asks {
		st := wire.State{Active: true, Desc: *cur, Done: done(a.q.Group), ForGroup: a.q.Group, ForCall: a.q.Call}
		a.link.queue(wire.TypeState, st.Marshal())
	}
}

// JudgeState compares this rank's call mine with a peer's answer: it
// returns a non-empty reason when they disagree (and the Desc field in
// which, when one shows it), or "" when the peer is merely behind or
// still in the same call.
func JudgeState(mine *Desc, st *wire.State) (wire.Field, string) {
	if !st.Answers(mine) {
		return wire.FieldNone, "" // an answer about an earlier call
	}
	if st.Active && st.Desc.Group == mine.Group && st.Desc.Call == mine.Call {
		if f := mine.Diff(&st.Desc); f != wire.FieldNone {
			return f, "the same call with other arguments"
		}
		return wire.FieldNone, ""
	}
	if st.Done < mine.Call {
		return wire.FieldNone, "" // behind: slow, not wrong
	}
	if !st.Active && st.Done == mine.Call && st.Desc.Call == mine.Call {
		if f := mine.Diff(&st.Desc); f != wire.FieldNone {
			return f, "it finished that call, made with other arguments"
		}
	}
	return wire.FieldCall, fmt.Sprintf("it has finished call #%d without sending what this rank waits for", mine.Call)
}

// StallError is the mismatch a rank reports when JudgeState finds that
// peer disagrees with its call mine.
func (l *Link) StallError(mine *Desc, st *wire.State, f wire.Field, why string) *Error {
	e := l.mismatch(&st.Desc, mine, f, why)
	if !st.Active {
		e.Detail = fmt.Sprintf("rank %d has completed %d calls of this group (the last: %s), rank %d waits in %s: %s",
			l.peer, st.Done, l.describe(&st.Desc), l.mesh.id.Rank, l.describe(mine), why)
		if f != wire.FieldNone && f != wire.FieldCall {
			e.Detail += fmt.Sprintf(": they disagree on the %v", f)
		}
	}
	return e
}

// judgeHeld is the reader's check of a data frame held without a receive,
// while this rank is between calls: if it has finished the frame's call,
// no receive will ever take the frame.
func (m *Mesh) judgeHeld(l *Link, d *Desc) *Error {
	if m.cfg.State == nil {
		return nil
	}
	st, ok := m.cfg.State(d.Group)
	if !ok {
		m.ring() // a call is running: the executor judges it when it waits (JudgeHeld)
		return nil
	}
	return l.heldVerdict(d, &st)
}

// heldVerdict judges a held frame d against this rank's state st.
func (l *Link) heldVerdict(d *Desc, st *wire.State) *Error {
	if d.Call > st.Done {
		return nil // a call this rank has not reached yet
	}
	me := l.mesh.id.Rank
	if st.Desc.Call == d.Call {
		if f := d.Diff(&st.Desc); f != wire.FieldNone {
			return l.mismatch(d, &st.Desc, f, "")
		}
	}
	return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: me, Local: me,
		Detail: fmt.Sprintf("rank %d sent its part of %s to rank %d, which finished that call without receiving from it (it has completed %d calls of the group): they disagree on who exchanges with whom",
			l.peer, l.describe(d), me, st.Done)}
}

// JudgeHeld checks the data frames held without a receive on every link
// against the call this rank is running (cur): a frame of a call this rank
// has finished, or of this call with other arguments, or of this call from
// a peer this call will not receive from again (expects), is a mismatch.
// done(g) is how many calls of group g the rank has completed.
func (m *Mesh) JudgeHeld(cur *Desc, done func(group uint32) uint64, expects func(peer, channel int) bool) *Error {
	for _, row := range m.links {
		for _, l := range row {
			if l == nil {
				continue
			}
			d, ok := l.Held()
			if !ok {
				continue
			}
			if d.Group != cur.Group {
				if e := l.heldVerdict(&d, &wire.State{Done: done(d.Group)}); e != nil {
					return e
				}
				continue
			}
			switch {
			case d.Call < cur.Call:
				return l.heldVerdict(&d, &wire.State{Done: cur.Call - 1})
			case d.Call == cur.Call:
				if f := d.Diff(cur); f != wire.FieldNone {
					return l.mismatch(&d, cur, f, "")
				}
				if !expects(l.peer, l.channel) {
					me := m.id.Rank
					return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: me, Local: me,
						Detail: fmt.Sprintf("rank %d sent rank %d a message in %s, which rank %d's part of the call does not receive: they disagree on who exchanges with whom",
							l.peer, me, l.describe(cur), me)}
				}
			}
		}
	}
	return nil
}
