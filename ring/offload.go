package ring

import (
	"fmt"
	"slices"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// AllReduceOffload builds the in-place allreduce of count elements around
// the ring s.Order in which one member, slow, sits behind a slow link: it
// owns no share of the work. It sends its data once, to its ring
// neighbours, and receives the result once, while the other m = n−1
// ranks run the ring among themselves. Every rank ends with the bits
// AllReduce(s, count, avg) gives, whatever the link speeds: the program
// keeps the ring's reduction order.
//
// Why the bits are the ring's: in AllReduce segment k of a channel's part
// starts at ring position k and every position folds its own data in as
// own op incoming (package doc). Here the slow rank's part of each fold is
// done by a neighbour that holds a copy of its data, in the same order:
// its right neighbour r computes x_r op (x_slow op P) for every segment
// that passes the slow rank (receiving P into the copy of x_slow, then
// folding that into its own), and x_r op x_slow for the segment that
// starts at the slow rank; its left neighbour l finishes the segment the
// slow rank owns in the ring with (x_l op P) op x_slow, which is
// x_slow op (x_l op P) because every operator is commutative bit for bit
// (IEEE 754 addition, multiplication, min and max; the 16-bit types fold
// in float32 and round once). The m fast ranks pass the segments around
// their own ring (the slow rank's two neighbours joined), the two
// segments that start at r travelling together, and the ring's owners
// keep the same segments (l owns the slow rank's as well). Avg divides
// once, at the owner's last fold, as in AllReduce.
//
// Pipelining: every segment is cut into rounds parts; round i is the ring
// over the i-th parts of all segments. While the fast ranks run round i,
// the slow rank sends its data for round i+1 and receives the result of
// round i−1, both spread evenly over the round's 2(m−1) steps; the
// slow rank's traffic (count elements each way over its link, the least
// any allreduce can move there) then overlaps the rest, and the call
// takes about (rounds+2)/rounds of that transfer where the ring takes
// 2(n−1)/n of it at the slow link's speed (cost.Net.Offload prices it).
//
// The ring needs n ≥ 3 (at n = 2 the ring's slow link already carries the
// buffer once each way). Channels split the buffer as in AllReduce.
func AllReduceOffload(s Spec, slow, count, rounds int, avg bool) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	n := len(s.Order)
	switch {
	case n < 3:
		return nil, fmt.Errorf("ring: offloading a rank needs a ring of 3 or more, not %d", n)
	case rounds < 1:
		return nil, fmt.Errorf("ring: %d rounds", rounds)
	case count < 0:
		return nil, fmt.Errorf("ring: count %d", count)
	}
	q := slices.Index(s.Order, slow)
	if q < 0 {
		return nil, fmt.Errorf("ring: slow rank %d is not in the ring %v", slow, s.Order)
	}
	o := offload{order: s.Order, n: n, m: n - 1, q: q, rounds: rounds, avg: avg}
	p := &plan.Program{Algorithm: "ring-offload", Rank: s.Rank, World: s.world(), DataLen: count}
	if pos != q && (pos == o.ringPos(0) || pos == o.ringPos(o.m-1)) {
		p.ScratchLen = count // the neighbours keep a copy of the slow rank's data
	}
	p.Channels = make([]plan.Channel, s.Channels)
	for c := range p.Channels {
		o.cOff, o.cLen = plan.Segment(count, s.Channels, c)
		p.Channels[c].Steps = o.steps(pos)
	}
	return p, nil
}

// offload is the geometry of one channel of AllReduceOffload.
type offload struct {
	order      []int
	n, m, q    int // ring size, fast ranks, the slow rank's position
	rounds     int
	avg        bool
	cOff, cLen int // the channel's part of the buffer
}

// ringPos is the ring position of fast position f (0: the slow rank's
// right neighbour r, m−1: its left neighbour l).
func (o *offload) ringPos(f int) int { return mod(o.q+1+f, o.n) }

// region is a part of the buffer, in elements.
type region struct{ off, len int }

// unit is round i's part of the ring's segment k.
func (o *offload) unit(k, i int) region {
	so, sl := plan.Segment(o.cLen, o.n, mod(k, o.n))
	uo, ul := plan.Segment(sl, o.rounds, i)
	return region{o.cOff + so + uo, ul}
}

// slot lists the units of round i that start at fast position j of the
// fast ring: segment q+1+j, and for j = 0 the slow rank's segment q
// before it (both start at r).
func (o *offload) slot(j, i int) []region {
	if j == 0 {
		return []region{o.unit(o.q, i), o.unit(o.q+1, i)}
	}
	return []region{o.unit(o.q+1+j, i)}
}

// upload lists, in order, what the slow rank sends for round i: to r
// every unit but that of segment q+1, which goes to l (who finishes it).
func (o *offload) upload(i int) (to []int, parts []region) {
	r, l := o.order[o.ringPos(0)], o.order[o.ringPos(o.m-1)]
	for d := 0; d < o.n; d++ {
		k := mod(o.q-d, o.n) // q, then the order r folds them in
		if k == mod(o.q+1, o.n) {
			to, parts = append(to, l), append(parts, o.unit(k, i))
		} else {
			to, parts = append(to, r), append(parts, o.unit(k, i))
		}
	}
	return to, parts
}

// download lists what r sends the slow rank of round i: every unit.
func (o *offload) download(i int) (from []int, parts []region) {
	r := o.order[o.ringPos(0)]
	for k := 0; k < o.n; k++ {
		from, parts = append(from, r), append(parts, o.unit(k, i))
	}
	return from, parts
}

// spread cuts the parts (with their peers) into steps pieces of nearly
// equal size, in order, and returns piece t.
func spread(peers []int, parts []region, steps, t int) (outPeers []int, out []region) {
	total := 0
	for _, p := range parts {
		total += p.len
	}
	from, to := total*t/steps, total*(t+1)/steps
	at := 0
	for i, p := range parts {
		lo, hi := max(from, at), min(to, at+p.len)
		if lo < hi {
			outPeers, out = append(outPeers, peers[i]), append(out, region{p.off + lo - at, hi - lo})
		}
		at += p.len
	}
	return outPeers, out
}

// steps returns the steps of the rank at ring position pos: for every
// macro round R = −1 … rounds, the fast ranks' ring over round R's units
// (2(m−1) steps), with the slow rank's upload of round R+1 and download of
// round R−1 spread over the same steps.
func (o *offload) steps(pos int) []plan.Step {
	var steps []plan.Step
	per := 2 * (o.m - 1)
	f := mod(pos-o.q-1, o.n) // my fast position (m: the slow rank)
	var pending []plan.Op    // local folds deferred to the next step
	for R := -1; R <= o.rounds; R++ {
		for t := 0; t < per; t++ {
			st := plan.Step{}
			if R >= 0 && R < o.rounds && f < o.m {
				st.Phase = plan.PhaseReduceScatter
				if t >= o.m-1 {
					st.Phase = plan.PhaseAllGather
				}
				st.Ops = append(st.Ops, pending...)
				pending = pending[:0]
				var ops []plan.Op
				ops, pending = o.ringOps(f, R, t, pending)
				st.Ops = append(st.Ops, ops...)
			}
			if R+1 < o.rounds { // the slow rank's data for the next round: into its neighbours' scratch
				peers, parts := o.upload(R + 1)
				st.Ops = o.slowOps(st.Ops, pos, peers, parts, t, plan.Send, plan.Recv, plan.Scratch)
			}
			if R-1 >= 0 { // the result of the round before: from r into the slow rank's data
				peers, parts := o.download(R - 1)
				st.Ops = o.slowOps(st.Ops, pos, peers, parts, t, plan.Recv, plan.Send, plan.Data)
			}
			if len(st.Ops) > 0 {
				steps = append(steps, st)
			}
		}
	}
	return steps
}

// slowOps appends the rank at ring position pos's part of piece t (of a
// macro round's 2(m−1)) of the slow rank's traffic with the fast ranks
// peers (parts, in order): the slow rank's op is slowKind (Send for its
// upload, Recv for its download) on its data, a fast rank's the other
// kind, fastKind, on fastBuf, with the slow rank.
func (o *offload) slowOps(ops []plan.Op, pos int, peers []int, parts []region, t int, slowKind, fastKind plan.OpKind, fastBuf plan.Buf) []plan.Op {
	peers, parts = spread(peers, parts, 2*(o.m-1), t)
	for i, p := range parts {
		switch {
		case pos == o.q:
			ops = append(ops, plan.Op{Kind: slowKind, Peer: peers[i], Buf: plan.Data, Off: p.off, Len: p.len})
		case peers[i] == o.order[pos]:
			ops = append(ops, plan.Op{Kind: fastKind, Peer: o.order[o.q], Buf: fastBuf, Off: p.off, Len: p.len})
		}
	}
	return ops
}

// ringOps returns fast position f's ring operations of step t of round
// R (t < m−1: the reduce-scatter, then the allgather), and appends to
// pending the local folds its receives leave for the next step.
func (o *offload) ringOps(f, R, t int, pending []plan.Op) ([]plan.Op, []plan.Op) {
	m := o.m
	right, left := o.order[o.ringPos(mod(f+1, m))], o.order[o.ringPos(mod(f-1, m))]
	div := 0
	if o.avg {
		div = o.n
	}
	var ops []plan.Op
	send := func(j int) {
		for _, u := range o.slot(j, R) {
			ops = append(ops, plan.Op{Kind: plan.Send, Peer: right, Buf: plan.Data, Off: u.off, Len: u.len})
		}
	}
	if t < m-1 { // reduce-scatter
		last := t == m-2
		if f == 0 && t == 0 { // r starts the slow rank's segment: x_r op x_slow
			u := o.unit(o.q, R)
			ops = append(ops, plan.Op{Kind: plan.Reduce, Buf: plan.Data, Off: u.off, Src: plan.Scratch, SrcOff: u.off, Len: u.len})
		}
		send(mod(f-t, m))
		j := mod(f-t-1, m)
		for x, u := range o.slot(j, R) {
			switch {
			case f == 0: // every segment r receives passed the slow rank: x_slow op P, then x_r op that
				ops = append(ops, plan.Op{Kind: plan.RecvReduce, Peer: left, Buf: plan.Scratch, Off: u.off, Len: u.len})
				pending = append(pending, plan.Op{Kind: plan.Reduce, Buf: plan.Data, Off: u.off, Src: plan.Scratch, SrcOff: u.off, Len: u.len})
				if last && div > 0 {
					pending = append(pending, plan.Op{Kind: plan.Scale, Buf: plan.Data, Off: u.off, Len: u.len, Div: div})
				}
			case j == 0 && x == 1 && last: // l finishes the slow rank's own segment: (x_l op P) op x_slow
				ops = append(ops, plan.Op{Kind: plan.RecvReduce, Peer: left, Buf: plan.Data, Off: u.off, Len: u.len})
				pending = append(pending, plan.Op{Kind: plan.Reduce, Buf: plan.Data, Off: u.off, Src: plan.Scratch, SrcOff: u.off, Len: u.len})
				if div > 0 {
					pending = append(pending, plan.Op{Kind: plan.Scale, Buf: plan.Data, Off: u.off, Len: u.len, Div: div})
				}
			default:
				d := 0
				if last {
					d = div
				}
				ops = append(ops, plan.Op{Kind: plan.RecvReduce, Peer: left, Buf: plan.Data, Off: u.off, Len: u.len, Div: d})
			}
		}
		return ops, pending
	}
	t -= m - 1 // allgather
	send(mod(f+1-t, m))
	for _, u := range o.slot(mod(f-t, m), R) {
		ops = append(ops, plan.Op{Kind: plan.Recv, Peer: left, Buf: plan.Data, Off: u.off, Len: u.len})
	}
	return ops, pending
}
