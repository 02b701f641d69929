package ring

import (
	"fmt"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// AllReduceLate builds the in-place allreduce for a ring in which one
// member, late, is predicted to reach the call after the others (the exact
// mode of StragglAR, arXiv 2505.23523): the result is the exact reduction
// on every rank, with identical bits everywhere, and no contribution is
// stale.
//
// The m = n−1 early ranks form the ring s.Order without late (starting at
// the rank after late) and reduce-scatter among themselves while late is
// still computing: afterwards early position p holds S_p, the early ranks'
// reduction of its segment R(p). The completion then folds late's data in
// and distributes the result. Each segment is cut into k chunks (k rounds)
// of at most chunk elements; unit (p, c) is chunk c of R(p). On a global
// clock of slots, each slot moving one unit over any link:
//
//	slot c·m+p       late → early p: late's unit (p, c); p folds it: F = S op L
//	slot c·m+p+1     early p → late: F (p, c) (divided by n first for Avg)
//	slot c·m+p+2h    early p+h−1 → early p+h: F (p, c), h = 1..m−1
//
// Every rank sends at most one unit and receives at most one unit per
// slot (the ring hop of (p, c) over link j→j+1 lands on slot j+1+h mod m,
// never on slot j+1 mod m, when j+1 hears from late), so every link is
// busy in every slot of the steady state. Each final unit is computed once,
// by its owner, and then only copied, so every rank ends with the same
// bits. A rank's steps are its slots in order, so the schedule is free of
// deadlock even when a send completes only once its receiver takes it.
//
// Cost in the link model (one full-duplex link of bandwidth B per rank, G
// bytes of data): the early reduce-scatter takes (m−1)/m·G/B before late
// arrives; after late arrives, late finishes after k·m+1 slots and the
// early ranks after k·m+2m−2 slots of G/(k·m·B) each, that is
// G/B·(1 + (2m−2)/(k·m)) (world 2: G/B·(1 + 1/k)), against 2(n−1)/n·G/B
// for the plain ring. late must send and receive G bytes, so G/B is the
// least any completion can take.
//
// The reduce-scatter moves the same units as the completion, so every
// rank's largest message is the same and all ranks agree on whether the
// call fits the executor's fastboxes. Channels split the buffer into
// independent parts as in AllReduce. With avg the owner divides each unit
// by n once, before it leaves.
func AllReduceLate(s Spec, late, count, chunk int, avg bool) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	if chunk < 1 {
		return nil, fmt.Errorf("ring: chunk of %d elements", chunk)
	}
	if count < 0 {
		return nil, fmt.Errorf("ring: count %d", count)
	}
	n := len(s.Order)
	latePos := -1
	for i, r := range s.Order {
		if r == late {
			latePos = i
		}
	}
	if latePos < 0 {
		return nil, fmt.Errorf("ring: late rank %d is not in the ring %v", late, s.Order)
	}
	p := &plan.Program{Algorithm: "ring-late", Rank: s.Rank, World: s.world(), DataLen: count}
	if n == 1 {
		return p, nil
	}
	m := n - 1
	early := make([]int, m) // the ring without late, from the rank after it
	for i := range early {
		early[i] = s.Order[mod(latePos+1+i, n)]
	}
	me := mod(pos-latePos-1, n) // my early position; m when I am late
	for c := 0; c < s.Channels; c++ {
		cOff, cLen := plan.Segment(count, s.Channels, c)
		l := lateChannel{m: m, off: cOff, len: cLen, rounds: max(1, ceilDiv(ceilDiv(cLen, m), chunk)), n: n, avg: avg}
		var ch plan.Channel
		if me < m {
			ch.Steps = l.reduceScatter(early, me)
		}
		ch.Steps = append(ch.Steps, l.completion(early, me, late)...)
		p.Channels = append(p.Channels, ch)
	}
	return p, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// lateChannel is one channel's part of AllReduceLate: len elements at off,
// split among m early ranks, each segment in rounds chunks.
type lateChannel struct {
	m, n     int
	off, len int
	rounds   int
	avg      bool
}

// seg is the reduce-scatter's segment k (mod m).
func (l *lateChannel) seg(k int) (int, int) {
	o, n := plan.Segment(l.len, l.m, mod(k, l.m))
	return l.off + o, n
}

// chunk is chunk c of the reduce-scatter's segment k.
func (l *lateChannel) chunk(k, c int) (int, int) {
	so, sl := l.seg(k)
	o, n := plan.Segment(sl, l.rounds, c)
	return so + o, n
}

// unit is chunk c of R(p), the segment early position p owns after the
// reduce-scatter (segment p+1).
func (l *lateChannel) unit(p, c int) (int, int) { return l.chunk(p+1, c) }

// reduceScatter is early position e's ring reduce-scatter among the early
// ranks: afterwards it holds R(e) reduced over them. It moves the
// completion's units, one per step, so that every rank's largest message
// is the same (the executor picks the fastbox path by the largest message,
// and both ends of a link must pick the same).
func (l *lateChannel) reduceScatter(early []int, e int) []plan.Step {
	m := l.m
	right, left := early[mod(e+1, m)], early[mod(e-1, m)]
	var steps []plan.Step
	for st := 0; st < m-1; st++ {
		for c := 0; c < l.rounds; c++ {
			so, sl := l.chunk(e-st, c)
			ro, rl := l.chunk(e-st-1, c)
			steps = append(steps, plan.Step{Ops: []plan.Op{
				{Kind: plan.Send, Peer: right, Buf: plan.Data, Off: so, Len: sl},
				{Kind: plan.RecvReduce, Peer: left, Buf: plan.Data, Off: ro, Len: rl},
			}})
		}
	}
	return steps
}

// completion is the completion's steps for early position me (m: the late
// rank), one per slot in which it has something to do.
func (l *lateChannel) completion(early []int, me, late int) []plan.Step {
	m, k := l.m, l.rounds
	slots := make([]plan.Step, k*m+2*m)
	at := func(slot int, o plan.Op) { slots[slot].Ops = append(slots[slot].Ops, o) }
	for c := 0; c < k; c++ {
		for p := 0; p < m; p++ {
			off, n := l.unit(p, c)
			base := c*m + p
			switch {
			case me == m: // late: send my unit, take the finished one back
				at(base, plan.Op{Kind: plan.Send, Peer: early[p], Buf: plan.Data, Off: off, Len: n})
				at(base+1, plan.Op{Kind: plan.Recv, Peer: early[p], Buf: plan.Data, Off: off, Len: n})
			case me == p: // owner: fold late's unit in, finish it, return it
				at(base, plan.Op{Kind: plan.RecvReduce, Peer: late, Buf: plan.Data, Off: off, Len: n})
				if l.avg {
					at(base+1, plan.Op{Kind: plan.Scale, Buf: plan.Data, Off: off, Len: n, Div: l.n})
				}
				at(base+1, plan.Op{Kind: plan.Send, Peer: late, Buf: plan.Data, Off: off, Len: n})
			}
			if me == m {
				continue
			}
			// The ring: hop h moves (p, c) from position p+h−1 to p+h.
			if h := mod(me-p, m) + 1; h <= m-1 {
				at(base+2*h, plan.Op{Kind: plan.Send, Peer: early[mod(me+1, m)], Buf: plan.Data, Off: off, Len: n})
			}
			if h := mod(me-p, m); h >= 1 {
				at(base+2*h, plan.Op{Kind: plan.Recv, Peer: early[mod(me-1, m)], Buf: plan.Data, Off: off, Len: n})
			}
		}
	}
	steps := slots[:0]
	for _, st := range slots {
		if len(st.Ops) > 0 {
			steps = append(steps, st)
		}
	}
	return steps
}
