package topology

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// Op is what a Step does.
type Op int

const (
	// Send sends the rank's whole buffer, as it stood at the end of the
	// previous round, to Peer.
	Send Op = iota + 1
	// Recv receives Peer's buffer and either reduces it into the local
	// buffer (Reduce) or overwrites the local buffer with it.
	Recv
)

// String returns "send" or "recv".
func (o Op) String() string {
	switch o {
	case Send:
		return "send"
	case Recv:
		return "recv"
	default:
		return fmt.Sprintf("Op(%d)", int(o))
	}
}

// Step is one communication of one rank in a Schedule.
type Step struct {
	// Round numbers from 0. Every step of a round may run concurrently; a
	// round starts once the rank's steps of the previous round are done.
	Round int
	// Op is Send or Recv.
	Op Op
	// Peer is the other rank's ID.
	Peer int
	// Reduce, on a Recv, combines the incoming buffer with the local one
	// (sum, for gradients); otherwise the incoming buffer replaces it.
	Reduce bool
}

// Schedule is a latency-optimal collective for small messages: whole
// buffers, no chunking. It is plain data for the program builders to
// convert into executor programs.
//
// Every Send in round r from a to b has exactly one matching Recv in round
// r at b from a, and vice versa.
type Schedule struct {
	// Rounds is the number of rounds; every Step.Round is below it.
	Rounds int
	// Ranks are the members in the order given to the constructor.
	Ranks []int
	// Steps[i] are Ranks[i]'s steps, by round, sends before receives
	// within a round.
	Steps [][]Step
}

// For returns rank's steps, and false if rank is not a member.
func (s Schedule) For(rank int) ([]Step, bool) {
	i := slices.Index(s.Ranks, rank)
	if i < 0 {
		return nil, false
	}
	return s.Steps[i], true
}

// newSchedule checks members and returns an empty schedule over them.
func newSchedule(members []int) (Schedule, error) {
	if len(members) == 0 {
		return Schedule{}, fmt.Errorf("%w: no members", ErrInvalidInput)
	}
	if err := checkIDs("member", members, nil); err != nil {
		return Schedule{}, err
	}
	return Schedule{Ranks: slices.Clone(members), Steps: make([][]Step, len(members))}, nil
}

// add records a transfer from position a to position b in round r.
func (s *Schedule) add(r, a, b int, reduce bool) {
	s.Steps[a] = append(s.Steps[a], Step{Round: r, Op: Send, Peer: s.Ranks[b]})
	s.Steps[b] = append(s.Steps[b], Step{Round: r, Op: Recv, Peer: s.Ranks[a], Reduce: reduce})
}

// finish sorts every rank's steps by round, sends first.
func (s *Schedule) finish() {
	for _, steps := range s.Steps {
		slices.SortStableFunc(steps, func(a, b Step) int {
			return cmp.Or(cmp.Compare(a.Round, b.Round), cmp.Compare(a.Op, b.Op))
		})
	}
}

// treeLevels returns ceil(log2 n).
func treeLevels(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// treePositions returns, for a binomial tree rooted at members[rootPos],
// the member position of relative index v.
func treePositions(n, rootPos int) func(v int) int {
	return func(v int) int { return (rootPos + v) % n }
}

// BinomialBroadcast returns the binomial-tree broadcast of root's buffer to
// all members in ceil(log2 n) rounds, the minimum: the number of ranks
// holding the data can at most double per round.
//
// Members are numbered from root in the order given (root is 0, the member
// after it 1, and so on, wrapping). In round r every holder v < 2^r sends to
// v + 2^r, so the members listed right after root are nearest the top of
// the tree: order members with OrderByLatency to put low-latency links
// high (STAR §IV-D2).
func BinomialBroadcast(members []int, root int) (Schedule, error) {
	s, rootPos, err := treeSchedule(members, root)
	if err != nil {
		return Schedule{}, fmt.Errorf("topology: binomial broadcast: %w", err)
	}
	n := len(members)
	pos := treePositions(n, rootPos)
	for r := 0; r < s.Rounds; r++ {
		for v := 0; v < 1<<r && v+1<<r < n; v++ {
			s.add(r, pos(v), pos(v+1<<r), false)
		}
	}
	s.finish()
	return s, nil
}

// BinomialReduce returns the reduction of all members' buffers into root in
// ceil(log2 n) rounds over the same tree as BinomialBroadcast, run
// backwards: a member sends its partial sum to its parent once all its
// children have sent theirs.
func BinomialReduce(members []int, root int) (Schedule, error) {
	s, rootPos, err := treeSchedule(members, root)
	if err != nil {
		return Schedule{}, fmt.Errorf("topology: binomial reduce: %w", err)
	}
	n := len(members)
	pos := treePositions(n, rootPos)
	for r := 0; r < s.Rounds; r++ {
		level := s.Rounds - 1 - r
		for v := 0; v < 1<<level && v+1<<level < n; v++ {
			s.add(r, pos(v+1<<level), pos(v), true)
		}
	}
	s.finish()
	return s, nil
}

// treeSchedule validates a tree's members and root.
func treeSchedule(members []int, root int) (Schedule, int, error) {
	s, err := newSchedule(members)
	if err != nil {
		return Schedule{}, 0, err
	}
	rootPos := slices.Index(members, root)
	if rootPos < 0 {
		return Schedule{}, 0, fmt.Errorf("%w: root %d is not a member", ErrInvalidInput, root)
	}
	s.Rounds = treeLevels(len(members))
	return s, rootPos, nil
}

// RecursiveDoubling returns an allreduce in which every member ends with
// the sum of all members' buffers, in log2(n) rounds of pairwise exchanges
// when n is a power of two. Otherwise, with p the largest power of two
// below n and e = n - p, it takes log2(p) + 2 rounds: in round 0 the first
// 2e members pair up and the even one of each pair hands its buffer to the
// odd one and sits out; the p remaining members exchange; in the last
// round each odd member returns the result to its even partner.
func RecursiveDoubling(members []int) (Schedule, error) {
	s, err := newSchedule(members)
	if err != nil {
		return Schedule{}, fmt.Errorf("topology: recursive doubling: %w", err)
	}
	n := len(members)
	p := 1 << (bits.Len(uint(n)) - 1)
	extra := n - p
	// core[k] is the member position playing index k of the p-member core.
	core := make([]int, p)
	for k := range core {
		if k < extra {
			core[k] = 2*k + 1
		} else {
			core[k] = k + extra
		}
	}
	round := 0
	if extra > 0 {
		for k := 0; k < extra; k++ {
			s.add(round, 2*k, 2*k+1, true)
		}
		round++
	}
	for mask := 1; mask < p; mask <<= 1 {
		for k := 0; k < p; k++ {
			s.add(round, core[k], core[k^mask], true)
		}
		round++
	}
	if extra > 0 {
		for k := 0; k < extra; k++ {
			s.add(round, 2*k+1, 2*k, false)
		}
		round++
	}
	s.Rounds = round
	s.finish()
	return s, nil
}

// OrderByLatency returns root followed by the other members by increasing
// latency from root (lat[root][m]; unmeasured links last), ties by rank
// ID. Feeding the result to BinomialBroadcast or BinomialReduce puts
// low-latency members in the upper layers of the tree and high-latency ones
// at the leaves (STAR §IV-D2). Members equal to root are dropped.
func OrderByLatency(root int, members []int, lat Matrix) []int {
	rest := make([]int, 0, len(members))
	for _, m := range members {
		if m != root {
			rest = append(rest, m)
		}
	}
	key := func(m int) (bool, float64) {
		l := lat.At(root, m)
		return l <= 0, l
	}
	slices.SortFunc(rest, func(a, b int) int {
		ua, la := key(a)
		ub, lb := key(b)
		if ua != ub {
			if ua {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(la, lb), cmp.Compare(a, b))
	})
	rest = slices.Compact(rest)
	return append([]int{root}, rest...)
}
