package straggler

import (
	"fmt"
	"time"
)

// ReassignStep is one step of in-step reassignment for SimulateReassign:
// every rank's Reassigner stepped in virtual time.
type ReassignStep struct {
	// Config, Step and Shares are the Reassigners'.
	Config ReassignConfig
	Step   int
	Shares []int
	// Expect is the step's expected compute time (NewReassigner's expect).
	Expect time.Duration
	// Begin is when each rank begins computing (a late start: a per-step
	// delay); its messages are handled from time 0 on, as a driver does
	// beside the compute.
	Begin []time.Duration
	// UnitTime is how long rank takes to compute unit (of Units) begun at.
	UnitTime func(rank int, unit Unit, at time.Duration) time.Duration
	// Latency is each message's time between two ranks (the cost model's
	// Link.Send of a small message).
	Latency time.Duration
	// Trace, when set, receives each decision in a stable text form.
	Trace func(at time.Duration, line string)
}

// ReassignOutcome is what SimulateReassign found.
type ReassignOutcome struct {
	// End is when the last rank's step was over (before the reduction).
	End time.Duration
	// Done is when each rank's step was over.
	Done []time.Duration
	// Computed are the units each rank computed.
	Computed [][]int
	// Moved is how many units were granted to helpers; Messages how many
	// messages were sent.
	Moved, Messages int
}

type stepEvent struct {
	at   time.Duration
	seq  int
	rank int
	unit int // finish: the unit; -1: begin; -2: deliver msg
	msg  ReassignMsg
}

// eventHeap is a binary min-heap of events by (at, seq).
type eventHeap []stepEvent

func (h eventHeap) less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}

func (h *eventHeap) push(e stepEvent) {
	*h = append(*h, e)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *eventHeap) pop() stepEvent {
	old := *h
	e := old[0]
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h.less(l, m) {
			m = l
		}
		if l+1 < n && h.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		(*h)[i], (*h)[m] = (*h)[m], (*h)[i]
		i = m
	}
	return e
}

// SimulateReassign runs one step of in-step reassignment in virtual time:
// each rank computes the units its Reassigner starts, one at a time, each
// taking UnitTime; every message arrives Latency after it is sent and is
// handled at once. It returns when every rank's step is over, or an error
// if a Reassigner refuses a message or the step cannot finish.
func SimulateReassign(st ReassignStep) (ReassignOutcome, error) {
	n := len(st.Shares)
	if len(st.Begin) != n || st.UnitTime == nil || st.Latency < 0 {
		return ReassignOutcome{}, fmt.Errorf("straggler: reassign step of %d ranks, %d begin times: %w", n, len(st.Begin), ErrInvalidConfig)
	}
	units, _ := ReassignUnits(st.Shares, st.Config.UnitSize)
	rs := make([]*Reassigner, n)
	out := ReassignOutcome{Done: make([]time.Duration, n), Computed: make([][]int, n)}
	var h eventHeap
	seq := 0
	add := func(e stepEvent) {
		e.seq = seq
		seq++
		h.push(e)
	}
	for r := range n {
		var err error
		if rs[r], err = NewReassigner(st.Config, r, st.Step, st.Shares, st.Expect); err != nil {
			return ReassignOutcome{}, err
		}
		add(stepEvent{at: st.Begin[r], rank: r, unit: -1})
	}
	begun := make([]bool, n)
	done := make([]bool, n)
	left := n
	flush := func(r int, now time.Duration) {
		if begun[r] {
			if u, ok := rs[r].Start(now); ok {
				if st.Trace != nil {
					st.Trace(now, fmt.Sprintf("%d starts unit %d (owner %d)", r, u, units[u].Owner))
				}
				add(stepEvent{at: now + st.UnitTime(r, units[u], now), rank: r, unit: u})
			}
		}
		for _, m := range rs[r].Ready() {
			out.Messages++
			if st.Trace != nil && m.Kind != MsgProgress {
				st.Trace(now, m.String())
			}
			add(stepEvent{at: now + st.Latency, rank: m.To, unit: -2, msg: m})
		}
		if !done[r] && rs[r].Done() {
			done[r], out.Done[r] = true, now
			out.End = max(out.End, now)
			left--
		}
	}
	for r := range n {
		flush(r, 0)
	}
	for left > 0 {
		if len(h) == 0 {
			return out, fmt.Errorf("straggler: reassign step %d stalled with %d ranks not done: %w", st.Step, left, ErrInvalidConfig)
		}
		e := h.pop()
		switch e.unit {
		case -1:
			begun[e.rank] = true
		case -2:
			if err := rs[e.rank].Receive(e.msg, e.at); err != nil {
				return out, err
			}
		default:
			if err := rs[e.rank].Finish(e.unit, e.at); err != nil {
				return out, err
			}
		}
		flush(e.rank, e.at)
	}
	for r, x := range rs {
		out.Computed[r] = x.Computed()
		out.Moved += x.Moved()
	}
	return out, nil
}
