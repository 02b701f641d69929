package tree

import (
	"fmt"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// AllReduceGroups builds the allreduce of count elements for ranks grouped
// by the CPU they run on (groups[g] is group g's ranks, its leader first;
// every rank of the world in one group): each member sends its data to its
// group's leader, which folds them in (leader op m1 op m2 …, in group
// order), the leaders run recursive doubling among themselves, and each
// leader sends the result to its members. Where several ranks share a CPU,
// the exchanges of recursive doubling among all ranks each wait for every
// rank of the CPU to be scheduled; here a member is scheduled twice (to
// post, to read) and only the leaders meet across CPUs: the algorithm for
// small messages on an oversubscribed host. Every rank ends with the
// leaders' bits (recursive doubling gives the leaders identical ones).
// With avg the leaders divide by the number of ranks before sending.
func AllReduceGroups(groups [][]int, world, rank, count int, avg bool) (*plan.Program, error) {
	g, pos, n, err := placeInGroups(groups, world, rank)
	if err != nil {
		return nil, err
	}
	prog := &plan.Program{Algorithm: "cpu-groups", Rank: rank, World: world, DataLen: count}
	all := plan.Op{Buf: plan.Data, Len: count}
	leader := groups[g][0]
	if pos > 0 { // a member: post, then read
		send, recv := all, all
		send.Kind, send.Peer = plan.Send, leader
		recv.Kind, recv.Peer = plan.Recv, leader
		prog.Channels = []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{send}}, {Ops: []plan.Op{recv}}}}}
		return prog, nil
	}
	var steps []plan.Step
	for _, m := range groups[g][1:] {
		fold := all
		fold.Kind, fold.Peer = plan.RecvReduce, m
		steps = append(steps, plan.Step{Ops: []plan.Op{fold}})
	}
	leaders := make([]int, len(groups))
	for i, grp := range groups {
		leaders[i] = grp[0]
	}
	among, err := AllReduce(leaders, world, rank, count, false)
	if err != nil {
		return nil, err
	}
	prog.ScratchLen = among.ScratchLen
	if len(among.Channels) > 0 {
		steps = append(steps, among.Channels[0].Steps...)
	}
	last := plan.Step{}
	if avg {
		last.Ops = append(last.Ops, plan.Op{Kind: plan.Scale, Buf: plan.Data, Len: count, Div: n})
	}
	for _, m := range groups[g][1:] {
		send := all
		send.Kind, send.Peer = plan.Send, m
		last.Ops = append(last.Ops, send)
	}
	if len(last.Ops) > 0 {
		steps = append(steps, last)
	}
	prog.Channels = []plan.Channel{{Steps: steps}}
	return prog, nil
}

// placeInGroups checks groups (distinct ranks of the world, none empty)
// and returns rank's group, its position in it, and the number of ranks.
func placeInGroups(groups [][]int, world, rank int) (group, pos, n int, err error) {
	seen := make([]bool, world)
	group = -1
	for g, ranks := range groups {
		if len(ranks) == 0 {
			return 0, 0, 0, fmt.Errorf("tree: empty group %d of %v", g, groups)
		}
		for i, r := range ranks {
			if r < 0 || r >= world || seen[r] {
				return 0, 0, 0, fmt.Errorf("tree: groups %v are not sets of distinct ranks in 0..%d", groups, world-1)
			}
			seen[r] = true
			n++
			if r == rank {
				group, pos = g, i
			}
		}
	}
	if group < 0 {
		return 0, 0, 0, fmt.Errorf("tree: rank %d is in none of the groups %v", rank, groups)
	}
	return group, pos, n, nil
}
