package ring

import (
	"fmt"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// AllReduceTwoLevel builds the in-place allreduce of count elements for
// ranks grouped by host (hosts[h] is host h's ranks in the order of its
// local ring; every host has the same number L of them) in three phases:
//
//  1. a ring reduce-scatter among the ranks of each host (shared memory),
//     after which the rank at local position j holds its host's
//     reduction of shard j+1 (of L, by plan.Segment);
//  2. a ring allreduce of each shard across the hosts, among the ranks
//     that hold it (position j of every host, in host order): L rings at
//     once, each moving 1/L of the buffer, so every host's link carries
//     2(H−1)/H of the buffer each way where a flat ring carries 2(n−1)/n;
//  3. a ring allgather among the ranks of each host.
//
// Reduction order: shard s of channel c is folded first within each host
// in ring order (as AllReduce's reduce-scatter among the host's ranks),
// then the hosts' partial results in the ring order of phase 2; each
// final shard is computed once, by its owner in phase 2, and only copied
// afterwards, so every rank ends with the same bits. With avg the owner
// divides by the world (H·L) in its last fold. Channels split the buffer
// as in AllReduce. world is the communicator's size; ranks outside hosts
// take no part.
func AllReduceTwoLevel(hosts [][]int, world, rank, channels, count int, avg bool) (*plan.Program, error) {
	h, j, err := placeTwoLevel(hosts, world, rank)
	if err != nil {
		return nil, err
	}
	if channels < 1 {
		return nil, fmt.Errorf("ring: %d channels", channels)
	}
	if count < 0 {
		return nil, fmt.Errorf("ring: count %d", count)
	}
	nh, L := len(hosts), len(hosts[0])
	p := &plan.Program{Algorithm: "two-level", Rank: rank, World: world, DataLen: count}
	if nh*L == 1 {
		return p, nil
	}
	cross := make([]int, nh) // the ranks that share my shard, one per host
	for g := range hosts {
		cross[g] = hosts[g][j]
	}
	div := 0
	if avg {
		div = nh * L
	}
	local, inter := 0, 0 // where the division happens: the last phase with folds
	if nh > 1 {
		inter = div
	} else {
		local = div
	}
	p.Channels = make([]plan.Channel, channels)
	for c := range p.Channels {
		cOff, cLen := plan.Segment(count, channels, c)
		shardOff, shardLen := plan.Segment(cLen, L, mod(j+1, L))
		ch := &p.Channels[c]
		ch.Steps = appendRing(ch.Steps, hosts[h], j, cOff, cLen, local, true, false)
		ch.Steps = appendRing(ch.Steps, cross, h, cOff+shardOff, shardLen, inter, true, true)
		ch.Steps = appendRing(ch.Steps, hosts[h], j, cOff, cLen, 0, false, true)
	}
	return p, nil
}

// placeTwoLevel checks hosts (distinct ranks of the world, every host of
// the same size) and returns rank's host and local position.
func placeTwoLevel(hosts [][]int, world, rank int) (host, local int, err error) {
	if len(hosts) == 0 || len(hosts[0]) == 0 {
		return 0, 0, fmt.Errorf("ring: two-level allreduce over no hosts")
	}
	seen := make([]bool, world)
	host = -1
	for g, ranks := range hosts {
		if len(ranks) != len(hosts[0]) {
			return 0, 0, fmt.Errorf("ring: two-level allreduce over hosts of %d and %d ranks", len(hosts[0]), len(ranks))
		}
		for i, r := range ranks {
			if r < 0 || r >= world || seen[r] {
				return 0, 0, fmt.Errorf("ring: hosts %v are not sets of distinct ranks in 0..%d", hosts, world-1)
			}
			seen[r] = true
			if r == rank {
				host, local = g, i
			}
		}
	}
	if host < 0 {
		return 0, 0, fmt.Errorf("ring: rank %d is on none of the hosts %v", rank, hosts)
	}
	return host, local, nil
}
