package tree

import (
	"fmt"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// position finds rank in order, which must hold distinct ranks of a
// world of the given size.
func position(order []int, world, rank int) (int, error) {
	n := len(order)
	if n == 0 {
		return 0, fmt.Errorf("tree: empty order")
	}
	if world < n {
		return 0, fmt.Errorf("tree: %d ranks in a world of %d", n, world)
	}
	seen := make([]bool, world)
	pos := -1
	for i, r := range order {
		if r < 0 || r >= world || seen[r] {
			return 0, fmt.Errorf("tree: order %v is not a set of distinct ranks in 0..%d", order, world-1)
		}
		seen[r] = true
		if r == rank {
			pos = i
		}
	}
	if pos < 0 {
		return 0, fmt.Errorf("tree: rank %d not in order %v", rank, order)
	}
	return pos, nil
}

// AllReduce builds recursive doubling over the ranks in order (some or all
// of a world of the given size): with p the
// largest power of two ≤ n, the n−p extra ranks first fold into a partner,
// the p ranks exchange whole buffers log2(p) times (received into Scratch,
// folded in at the next step), and the partners hand the result back.
// log2(n)+2 latencies instead of the ring's 2(n−1): the algorithm for small
// messages. With count 0 it is a barrier.
func AllReduce(order []int, world, rank, count int, avg bool) (*plan.Program, error) {
	pos, err := position(order, world, rank)
	if err != nil {
		return nil, err
	}
	n := len(order)
	prog := &plan.Program{Algorithm: "recursive-doubling", Rank: rank, World: world, DataLen: count, ScratchLen: count}
	if n == 1 {
		return prog, nil
	}
	p := 1
	for p*2 <= n {
		p *= 2
	}
	all := plan.Op{Buf: plan.Data, Len: count}
	var steps []plan.Step
	if pos >= p { // an extra rank: fold in, wait for the result
		partner := order[pos-p]
		send, recv := all, all
		send.Kind, send.Peer = plan.Send, partner
		recv.Kind, recv.Peer = plan.Recv, partner
		steps = append(steps, plan.Step{Ops: []plan.Op{send}}, plan.Step{Ops: []plan.Op{recv}})
	} else {
		if pos+p < n {
			fold := all
			fold.Kind, fold.Peer = plan.RecvReduce, order[pos+p]
			steps = append(steps, plan.Step{Ops: []plan.Op{fold}})
		}
		var pendingReduce bool
		for m := 1; m < p; m *= 2 {
			partner := order[pos^m]
			st := plan.Step{Phase: plan.PhaseExchange}
			if pendingReduce {
				st.Ops = append(st.Ops, plan.Op{Kind: plan.Reduce, Buf: plan.Data, Src: plan.Scratch, Len: count})
			}
			st.Ops = append(st.Ops,
				plan.Op{Kind: plan.Send, Peer: partner, Buf: plan.Data, Len: count},
				plan.Op{Kind: plan.Recv, Peer: partner, Buf: plan.Scratch, Len: count})
			steps = append(steps, st)
			pendingReduce = true
		}
		final := plan.Step{}
		if pendingReduce {
			final.Ops = append(final.Ops, plan.Op{Kind: plan.Reduce, Buf: plan.Data, Src: plan.Scratch, Len: count})
		}
		if avg {
			final.Ops = append(final.Ops, plan.Op{Kind: plan.Scale, Buf: plan.Data, Len: count, Div: n})
		}
		if pos+p < n {
			final.Ops = append(final.Ops, plan.Op{Kind: plan.Send, Peer: order[pos+p], Buf: plan.Data, Len: count})
		}
		if len(final.Ops) > 0 {
			steps = append(steps, final)
		}
	}
	prog.Channels = []plan.Channel{{Steps: steps}}
	return prog, nil
}

// Broadcast builds a binomial-tree broadcast from root: in round i every
// rank that already has the data sends it to the rank 2^i further along
// order. ⌈log2 n⌉ latencies: the algorithm for small messages.
func Broadcast(order []int, world, rank, root, count int) (*plan.Program, error) {
	pos, err := position(order, world, rank)
	if err != nil {
		return nil, err
	}
	n := len(order)
	rootPos, err := position(order, world, root)
	if err != nil {
		return nil, fmt.Errorf("tree: broadcast root: %w", err)
	}
	prog := &plan.Program{Algorithm: "binomial", Rank: rank, World: world, DataLen: count}
	q := ((pos-rootPos)%n + n) % n
	var steps []plan.Step
	for m := 1; m < n; m *= 2 {
		var st plan.Step
		if q < m && q+m < n {
			st.Ops = append(st.Ops, plan.Op{Kind: plan.Send, Peer: order[(rootPos+q+m)%n], Buf: plan.Data, Len: count})
		} else if q >= m && q < 2*m {
			st.Ops = append(st.Ops, plan.Op{Kind: plan.Recv, Peer: order[(rootPos+q-m)%n], Buf: plan.Data, Len: count})
			if q == 1 {
				// The root's first child acknowledges with an empty
				// message carrying its descriptor (see below).
				st.Ops = append(st.Ops, plan.Op{Kind: plan.Send, Peer: order[rootPos], Buf: plan.Data})
			}
		}
		if len(st.Ops) > 0 {
			steps = append(steps, st)
		}
	}
	// The root only sends: it would return before any rank could tell it
	// that they disagree on who the root is. It takes its first child's
	// acknowledgement in its last step, so a rank that alone believes it
	// is the root fails instead of returning its own data as the
	// broadcast's result. One child is enough: every rank it sends to
	// disagrees with it then, and the first child either fails the
	// communicator (its abort reaches the root) or acknowledges with a
	// descriptor naming another root, which the root's receive rejects.
	if q == 0 && n > 1 {
		last := &steps[len(steps)-1]
		last.Ops = append(last.Ops, plan.Op{Kind: plan.Recv, Peer: order[(rootPos+1)%n], Buf: plan.Data})
	}
	prog.Channels = []plan.Channel{{Steps: steps}}
	return prog, nil
}
