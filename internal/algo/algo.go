package algo

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/ringtail-ml/ringtail/internal/cost"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/ring"
	"github.com/ringtail-ml/ringtail/tree"
)

// Tunables are the communicator settings that choose algorithms.
type Tunables struct {
	// SmallBytes is the size at or below which latency-optimal algorithms
	// (recursive doubling, binomial tree) replace the ring.
	SmallBytes int
	// Channels is the number of parallel rings.
	Channels int
	// ChunkBytes is the pipelining unit of a chained broadcast.
	ChunkBytes int
	// PieceBytes is the piece of an AllReduce in pieces (KindPieces,
	// ring.AllReducePieces): consecutive pieces of at most PieceBytes,
	// each finished before the next starts, so that a piece's steps run
	// in the CPUs' caches. It pays where ranks exchange through shared
	// memory at memory speed; the Planner chooses pieces only there.
	PieceBytes int
	// Order is the world's ring (a permutation of the ranks; nil: rank
	// order). Collectives over every rank follow it, and so do the
	// members of an allreduce among some ranks, whose results do not
	// depend on where each member sits.
	Order []int
	// Hosts groups the ranks by host for a two-level allreduce
	// (KindTwoLevel): hosts in ring order, each host's ranks in ring
	// order (nil: not known).
	Hosts [][]int
	// CPUGroups groups the ranks of one host by the CPU they are bound to
	// for the small-message allreduce (KindCPUGroups): groups in ring
	// order, each led by its first rank (nil: not known, or no CPU runs
	// two ranks).
	CPUGroups [][]int
}

// Spec is one rank's call, as far as the algorithm depends on it.
type Spec struct {
	Collective wire.Collective
	// Rank is the rank the program is for; World the communicator's size.
	Rank, World int
	// Members are the ranks taking part, in ring order (nil: every rank
	// in rank order).
	Members []int
	// Count is the element count of the call (AllGather: of each rank's
	// input; ReduceScatter: of each rank's output).
	Count int
	// ElemSize is the element size in bytes.
	ElemSize int
	// Avg divides the reduction by the number of members.
	Avg bool
	// Root is the root rank of a Broadcast, the late rank of an
	// AllReduceLate (the variant of an AllToAll, see wire.AllToAllEven);
	// Peer the other end of a point-to-point call, Send says which end
	// this rank is.
	Root, Peer int
	Send       bool
	// SendCounts and RecvCounts are the elements an AllToAll sends to and
	// receives from each rank, in rank order (nil: Count each, an even
	// exchange).
	SendCounts, RecvCounts []int
	// Children are this rank's evicted children in an AllReduceTree: their
	// eager contributions matching Tag under TagMask are folded in before
	// the members reduce.
	Children     []Child
	Tag, TagMask uint32
}

// Child is an evicted rank whose contributions a parent collects: until
// the call's deadline, or, with Must, until one comes.
type Child struct {
	Rank int
	Must bool
}

// Bytes is the call's size in bytes as the small-message threshold sees it.
func (s Spec) Bytes() int { return s.Count * s.ElemSize }

// Small reports whether the call takes the latency-optimal algorithm.
func (s Spec) Small(t Tunables) bool { return s.Bytes() <= t.SmallBytes }

// lateChunk is the unit, in elements, of s's AllReduceLate completion
// (cost.LateUnit of a segment: one of Channels × (n−1)).
func lateChunk(s Spec, t Tunables) int {
	n := s.World
	if s.Members != nil {
		n = len(s.Members)
	}
	parts := max(1, t.Channels) * max(1, n-1)
	seg := (s.Count + parts - 1) / parts
	return cost.LateUnit(seg, s.ElemSize, t.ChunkBytes)
}

// ErrUnsupported is wrapped when no algorithm exists for a collective.
var ErrUnsupported = errors.New("algo: unsupported collective")

// Choose builds rank s.Rank's program for the call with the collective's
// own algorithm (Build with KindDefault).
func Choose(s Spec, t Tunables) (*plan.Program, error) { return Build(s, t, Choice{}) }

// Build builds rank s.Rank's program for the call as c says: an
// AllReduce's program of the kind chosen, any other call's (and an
// AllReduce's with KindDefault) its collective's own algorithm.
func Build(s Spec, t Tunables, c Choice) (*plan.Program, error) {
	if c.Channels > 0 {
		t.Channels = c.Channels
	}
	order := ringOrder(s, t)
	rs := ring.Spec{Order: order, World: s.World, Rank: s.Rank, Channels: t.Channels}
	switch s.Collective {
	case wire.AllReduce:
		switch c.Kind {
		case KindRing:
			return ring.AllReduce(rs, s.Count, s.Avg)
		case KindPieces:
			return ring.AllReducePieces(rs, s.Count, max(1, t.PieceBytes/max(1, s.ElemSize)), s.Avg)
		case KindTwoLevel:
			if s.Members != nil {
				return nil, fmt.Errorf("%w: a two-level allreduce among a subgroup", ErrUnsupported)
			}
			return ring.AllReduceTwoLevel(t.Hosts, s.World, s.Rank, t.Channels, s.Count, s.Avg)
		case KindOffload:
			return ring.AllReduceOffload(rs, c.Slow, s.Count, c.Rounds, s.Avg)
		case KindCPUGroups:
			if s.Members != nil {
				return nil, fmt.Errorf("%w: an allreduce grouped by CPU among a subgroup", ErrUnsupported)
			}
			return tree.AllReduceGroups(t.CPUGroups, s.World, s.Rank, s.Count, s.Avg)
		}
		if s.Small(t) {
			return tree.AllReduce(order, s.World, s.Rank, s.Count, s.Avg)
		}
		return ring.AllReduce(rs, s.Count, s.Avg)
	case wire.Barrier:
		return tree.AllReduce(order, s.World, s.Rank, 0, false)
	case wire.Broadcast:
		if s.Small(t) {
			return tree.Broadcast(order, s.World, s.Rank, s.Root, s.Count)
		}
		rs.Channels = 1
		return ring.Broadcast(rs, s.Root, s.Count, max(1, t.ChunkBytes/max(1, s.ElemSize)))
	case wire.AllGather:
		return ring.AllGather(rs, s.Count)
	case wire.ReduceScatter:
		return ring.ReduceScatter(rs, s.Count, s.Avg)
	case wire.AllReduceLate:
		if s.Root < 0 || s.Root >= s.World {
			return nil, fmt.Errorf("algo: late rank %d is not a rank of 0..%d", s.Root, s.World-1)
		}
		return ring.AllReduceLate(rs, s.Root, s.Count, lateChunk(s, t), s.Avg)
	case wire.PointToPoint:
		kind := plan.Recv
		if s.Send {
			kind = plan.Send
		}
		if s.Peer < 0 || s.Peer >= s.World || s.Peer == s.Rank {
			return nil, fmt.Errorf("algo: peer %d is not another rank of 0..%d", s.Peer, s.World-1)
		}
		p := &plan.Program{Algorithm: "p2p", Rank: s.Rank, World: s.World, DataLen: s.Count}
		for ch := range max(1, c.Channels) { // one stream, or the message split over c.Channels
			off, n := plan.Segment(s.Count, max(1, c.Channels), ch)
			p.Channels = append(p.Channels, plan.Channel{Steps: []plan.Step{{Ops: []plan.Op{{Kind: kind, Peer: s.Peer, Buf: plan.Data, Off: off, Len: n}}}}})
		}
		return p, nil
	case wire.AllReduceTree:
		return treeAllReduce(s, t)
	case wire.AllToAll:
		return allToAll(s, rs, t)
	}
	return nil, fmt.Errorf("%w %v", ErrUnsupported, s.Collective)
}

// ringOrder returns the ranks of s in the order its ring visits them.
func ringOrder(s Spec, t Tunables) []int {
	if s.Members == nil {
		if len(t.Order) == s.World {
			return t.Order
		}
		order := make([]int, s.World)
		for i := range order {
			order[i] = i
		}
		return order
	}
	reduction := s.Collective == wire.AllReduce || s.Collective == wire.AllReduceTree || s.Collective == wire.Barrier
	if !reduction || len(t.Order) != s.World {
		return s.Members
	}
	pos := make([]int, s.World)
	for i, r := range t.Order {
		if r >= 0 && r < s.World {
			pos[r] = i
		}
	}
	order := slices.Clone(s.Members)
	slices.SortStableFunc(order, func(a, b int) int {
		if a < 0 || a >= s.World || b < 0 || b >= s.World {
			return 0 // invalid members: the builder names them
		}
		return cmp.Compare(pos[a], pos[b])
	})
	return order
}

// treeAllReduce is the members' allreduce (the algorithm AllReduce would
// take among them, on one channel) preceded by a step in which this rank
// collects its children's contributions: the parent tree of STAR as one
// program. One channel, because the collect must finish before any part
// of the buffer moves on.
func treeAllReduce(s Spec, t Tunables) (*plan.Program, error) {
	inner := s
	inner.Collective, inner.Children = wire.AllReduce, nil
	t.Channels = 1
	p, err := Choose(inner, t)
	if err != nil {
		return nil, err
	}
	p.Algorithm = "collect+" + p.Algorithm
	p.General = true // every member takes the same path, parents or not
	if len(s.Children) == 0 {
		return p, nil
	}
	var collect []plan.Step // one step per child: they fold into the same buffer
	for _, c := range s.Children {
		if c.Rank < 0 || c.Rank >= s.World || c.Rank == s.Rank {
			return nil, fmt.Errorf("algo: child %d is not another rank of 0..%d", c.Rank, s.World-1)
		}
		collect = append(collect, plan.Step{Ops: []plan.Op{{Kind: plan.Collect, Peer: c.Rank, Buf: plan.Data, Len: s.Count,
			Tag: s.Tag, TagMask: s.TagMask, Must: c.Must}}})
	}
	if len(p.Channels) == 0 {
		p.Channels = []plan.Channel{{}}
	}
	p.Channels[0].Steps = append(collect, p.Channels[0].Steps...)
	return p, nil
}

// allToAll is the pairwise exchange among all ranks. A block above
// SmallBytes is split over the channels; a smaller one travels whole on
// channel 0.
func allToAll(s Spec, rs ring.Spec, t Tunables) (*plan.Program, error) {
	if s.Members != nil {
		return nil, fmt.Errorf("%w: AllToAll among a subgroup", ErrUnsupported)
	}
	send, recv := s.SendCounts, s.RecvCounts
	if send == nil && recv == nil {
		even := make([]int, s.World)
		for r := range even {
			even[r] = s.Count
		}
		send, recv = even, even
	}
	return ring.AllToAll(rs, send, recv, max(1, t.SmallBytes/max(1, s.ElemSize)))
}
