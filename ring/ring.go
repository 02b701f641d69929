package ring

import (
	"fmt"
	"slices"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// Spec says which rank to build for and how to split the work.
type Spec struct {
	// Order is the ring: each participating rank once, in ring order. With
	// World zero it must be a permutation of 0..len(Order)−1; otherwise any
	// subset of 0..World−1 (a ring among some ranks of the communicator).
	Order []int
	// World is the communicator size when the ring is a subset of it.
	World int
	// Rank is the rank to build the program for.
	Rank int
	// Channels splits the buffer into that many independent rings (>= 1).
	Channels int
}

func (s Spec) world() int {
	if s.World > 0 {
		return s.World
	}
	return len(s.Order)
}

func (s Spec) validate() (pos int, err error) {
	n := len(s.Order)
	if n == 0 {
		return 0, fmt.Errorf("ring: empty order")
	}
	if s.Channels < 1 {
		return 0, fmt.Errorf("ring: %d channels", s.Channels)
	}
	w := s.world()
	seen := make([]bool, w)
	pos = -1
	for i, r := range s.Order {
		if r < 0 || r >= w || seen[r] {
			return 0, fmt.Errorf("ring: order %v is not a set of distinct ranks in 0..%d", s.Order, w-1)
		}
		seen[r] = true
		if r == s.Rank {
			pos = i
		}
	}
	if pos < 0 {
		return 0, fmt.Errorf("ring: rank %d not in order %v", s.Rank, s.Order)
	}
	return pos, nil
}

func mod(a, n int) int { return ((a % n) + n) % n }

// AllReduce builds the in-place ring allreduce of count elements. With avg,
// each segment's owner divides it by the world size in its last fold of
// it, before the allgather.
func AllReduce(s Spec, count int, avg bool) (*plan.Program, error) {
	return allReduce(s, count, max(count, 1), avg)
}

// AllReducePieces builds the ring allreduce of count elements as ring
// allreduces of consecutive pieces of at most piece elements, one after the
// other: each piece's reduce-scatter and allgather finish before the next
// piece starts. Where ranks exchange through shared memory, every step of
// the plain ring streams a 1/n share of the whole buffer through main
// memory (2(n−1) passes); a piece small enough for the CPUs' caches is
// read from memory once and written once, and its steps run in cache. The
// sum of each element is folded in the same ring order as in AllReduce of
// the piece alone. Count at most piece is AllReduce's program.
func AllReducePieces(s Spec, count, piece int, avg bool) (*plan.Program, error) {
	if piece < 1 {
		return nil, fmt.Errorf("ring: pieces of %d elements", piece)
	}
	return allReduce(s, count, piece, avg)
}

func allReduce(s Spec, count, piece int, avg bool) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, fmt.Errorf("ring: count %d", count)
	}
	n := len(s.Order)
	p := &plan.Program{Algorithm: "ring", Rank: s.Rank, World: s.world(), DataLen: count}
	if piece < count {
		p.Algorithm = "ring-pieces"
	}
	if n == 1 {
		return p, nil
	}
	p.Channels = make([]plan.Channel, s.Channels)
	div := 0
	if avg {
		div = n // the owner's last fold of its segment also divides
	}
	for off := 0; off == 0 || off < count; off += piece {
		pieceLen := min(piece, count-off)
		for c := range p.Channels {
			cOff, cLen := plan.Segment(pieceLen, s.Channels, c)
			ch := &p.Channels[c]
			ch.Steps = appendRing(ch.Steps, s.Order, pos, off+cOff, cLen, div, true, true)
		}
	}
	return p, nil
}

// appendRing appends to steps the ring allreduce of the elements
// [off, off+length) of Data around order, for the rank at position pos:
// its reduce-scatter (rs) and its allgather (ag) steps. In the
// reduce-scatter the owner's last fold of its segment divides by div (0:
// none). After the reduce-scatter position pos owns segment pos+1 (of
// len(order) segments of the range, by plan.Segment).
func appendRing(steps []plan.Step, order []int, pos, off, length, div int, rs, ag bool) []plan.Step {
	n := len(order)
	if n == 1 {
		return steps
	}
	right, left := order[mod(pos+1, n)], order[mod(pos-1, n)]
	seg := func(k int) (int, int) {
		o, l := plan.Segment(length, n, mod(k, n))
		return off + o, l
	}
	for st := 0; rs && st < n-1; st++ { // reduce-scatter
		so, sl := seg(pos - st)
		ro, rl := seg(pos - st - 1)
		d := 0
		if st == n-2 {
			d = div
		}
		steps = append(steps, plan.Step{Phase: plan.PhaseReduceScatter, Ops: []plan.Op{
			{Kind: plan.Send, Peer: right, Buf: plan.Data, Off: so, Len: sl},
			{Kind: plan.RecvReduce, Peer: left, Buf: plan.Data, Off: ro, Len: rl, Div: d},
		}})
	}
	for st := 0; ag && st < n-1; st++ { // allgather
		so, sl := seg(pos + 1 - st)
		ro, rl := seg(pos - st)
		steps = append(steps, plan.Step{Phase: plan.PhaseAllGather, Ops: []plan.Op{
			{Kind: plan.Send, Peer: right, Buf: plan.Data, Off: so, Len: sl},
			{Kind: plan.Recv, Peer: left, Buf: plan.Data, Off: ro, Len: rl},
		}})
	}
	return steps
}

// ReduceScatter builds the ring reduce-scatter: Input holds n blocks of
// count elements (block r belongs to rank r); on return Data (count
// elements) holds the reduction of every rank's block for this rank.
// Input is never written: segments are copied into Scratch just before
// their first reduction.
func ReduceScatter(s Spec, count int, avg bool) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	if s.world() != len(s.Order) {
		return nil, fmt.Errorf("ring: reduce-scatter needs every rank of the world in the ring")
	}
	n := len(s.Order)
	p := &plan.Program{Algorithm: "ring", Rank: s.Rank, World: s.world(), DataLen: count, InputLen: n * count, ScratchLen: n * count}
	if n == 1 {
		p.Channels = []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Copy, Buf: plan.Data, Src: plan.Input, Len: count}}}}}}
		return p, nil
	}
	right, left := s.Order[mod(pos+1, n)], s.Order[mod(pos-1, n)]
	// Segment j (by ring position) is the block of the rank at position j−1,
	// so that position p ends owning its own block (segment p+1).
	block := func(j int) int { return s.Order[mod(j-1, n)] }
	for c := 0; c < s.Channels; c++ {
		cOff, cLen := plan.Segment(count, s.Channels, c)
		var ch plan.Channel
		for st := 0; st < n-1; st++ {
			sj, rj := pos-st, pos-st-1
			sOff := block(sj)*count + cOff
			rOff := block(rj)*count + cOff
			sendBuf := plan.Scratch
			if st == 0 {
				sendBuf = plan.Input
			}
			last := st == n-2
			dst, dOff := plan.Scratch, rOff
			if last {
				dst, dOff = plan.Data, cOff
			}
			div := 0
			if last && avg {
				div = n
			}
			ops := []plan.Op{
				{Kind: plan.Copy, Buf: dst, Off: dOff, Src: plan.Input, SrcOff: rOff, Len: cLen},
				{Kind: plan.Send, Peer: right, Buf: sendBuf, Off: sOff, Len: cLen},
				{Kind: plan.RecvReduce, Peer: left, Buf: dst, Off: dOff, Len: cLen, Div: div},
			}
			ch.Steps = append(ch.Steps, plan.Step{Phase: plan.PhaseReduceScatter, Ops: ops})
		}
		p.Channels = append(p.Channels, ch)
	}
	return p, nil
}

// AllGather builds the ring allgather: Input holds count elements; on
// return Data holds n blocks of count, block r from rank r.
func AllGather(s Spec, count int) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	if s.world() != len(s.Order) {
		return nil, fmt.Errorf("ring: allgather needs every rank of the world in the ring")
	}
	n := len(s.Order)
	p := &plan.Program{Algorithm: "ring", Rank: s.Rank, World: s.world(), DataLen: n * count, InputLen: count}
	for c := 0; c < s.Channels; c++ {
		cOff, cLen := plan.Segment(count, s.Channels, c)
		var ch plan.Channel
		first := plan.Step{Ops: []plan.Op{{Kind: plan.Copy, Buf: plan.Data, Off: s.Rank*count + cOff, Src: plan.Input, SrcOff: cOff, Len: cLen}}}
		if n == 1 {
			ch.Steps = append(ch.Steps, first)
		}
		right, left := s.Order[mod(pos+1, n)], s.Order[mod(pos-1, n)]
		for st := 0; st < n-1; st++ {
			sb, rb := s.Order[mod(pos-st, n)], s.Order[mod(pos-st-1, n)]
			step := plan.Step{Phase: plan.PhaseAllGather}
			if st == 0 {
				step.Ops = append(step.Ops, first.Ops...)
			}
			step.Ops = append(step.Ops,
				plan.Op{Kind: plan.Send, Peer: right, Buf: plan.Data, Off: sb*count + cOff, Len: cLen},
				plan.Op{Kind: plan.Recv, Peer: left, Buf: plan.Data, Off: rb*count + cOff, Len: cLen})
			ch.Steps = append(ch.Steps, step)
		}
		p.Channels = append(p.Channels, ch)
	}
	return p, nil
}

// Broadcast builds a pipelined chain broadcast from root along the ring:
// the buffer travels in chunks of chunk elements, each hop forwarding chunk
// i while receiving chunk i+1, so the time is about (chunks + n − 2) chunk
// transfers instead of (n − 1) whole-buffer transfers.
func Broadcast(s Spec, root, count, chunk int) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	n := len(s.Order)
	rootPos := slices.Index(s.Order, root)
	if rootPos < 0 {
		return nil, fmt.Errorf("ring: broadcast root %d is not in the ring %v", root, s.Order)
	}
	if chunk < 1 {
		return nil, fmt.Errorf("ring: chunk of %d elements", chunk)
	}
	p := &plan.Program{Algorithm: "chain", Rank: s.Rank, World: s.world(), DataLen: count}
	if n == 1 {
		return p, nil
	}
	q := mod(pos-rootPos, n) // distance from the root along the chain
	next, prev := s.Order[mod(pos+1, n)], s.Order[mod(pos-1, n)]
	k := max(1, (count+chunk-1)/chunk)
	chunkAt := func(i int) (int, int) { return plan.Segment(count, k, i) }
	var ch plan.Channel
	for t := 0; t < k+n-2; t++ {
		st := plan.Step{Phase: plan.PhaseBroadcast}
		if i := t - q + 1; q >= 1 && i >= 0 && i < k {
			o, l := chunkAt(i)
			st.Ops = append(st.Ops, plan.Op{Kind: plan.Recv, Peer: prev, Buf: plan.Data, Off: o, Len: l})
		}
		if i := t - q; q <= n-2 && i >= 0 && i < k {
			o, l := chunkAt(i)
			st.Ops = append(st.Ops, plan.Op{Kind: plan.Send, Peer: next, Buf: plan.Data, Off: o, Len: l})
		}
		if len(st.Ops) > 0 {
			ch.Steps = append(ch.Steps, st)
		}
	}
	// The root only sends: it would return before any rank could tell it
	// that they disagree on who the root is. Its receiver sends it an
	// empty acknowledgement (carrying its descriptor, root included) in
	// the step that receives the last chunk, and the root takes it in the
	// step that sends that chunk, so a rank that alone believes it is the
	// root fails with the others' mismatch instead of returning its own
	// data as the broadcast's result.
	switch q {
	case 0:
		last := &ch.Steps[k-1]
		last.Ops = append(last.Ops, plan.Op{Kind: plan.Recv, Peer: next, Buf: plan.Data})
	case 1:
		last := &ch.Steps[k-1]
		last.Ops = append(last.Ops, plan.Op{Kind: plan.Send, Peer: prev, Buf: plan.Data})
	}
	p.Channels = []plan.Channel{ch}
	return p, nil
}
