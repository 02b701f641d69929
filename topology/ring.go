package topology

import (
	"cmp"
	"math"
	"slices"
)

// MaxOptimisedHosts is the largest number of hosts for which RingOrder
// searches all host orders ((h-1)! of them: 5040 at 8 hosts). With more
// hosts it keeps the stable order.
const MaxOptimisedHosts = 8

// RingScore rates a ring by its links between different hosts; links inside
// a host are the same in every host order and do not count. A pipelined
// ring allreduce moves at the pace of its slowest link, so the bottleneck
// decides; the sum of inverse bandwidths breaks ties.
type RingScore struct {
	// Bottleneck is the smallest inter-host link bandwidth in the ring,
	// +Inf if the ring never leaves a host. Unmeasured links count as 0.
	Bottleneck float64
	// InvSum is the sum over inter-host links of 1/bandwidth (+Inf if any
	// is unmeasured).
	InvSum float64
}

// Better reports whether s is strictly better than o: a higher bottleneck,
// or the same bottleneck and a smaller InvSum.
func (s RingScore) Better(o RingScore) bool {
	if s.Bottleneck != o.Bottleneck {
		return s.Bottleneck > o.Bottleneck
	}
	return s.InvSum < o.InvSum
}

// scoreLinks scores inter-host link bandwidths given in ring order.
func scoreLinks(links []float64) RingScore {
	s := RingScore{Bottleneck: math.Inf(1)}
	for _, b := range links {
		s.Bottleneck = min(s.Bottleneck, b)
		s.InvSum += 1 / b
	}
	return s
}

// hostGroup is one host's ranks, ascending.
type hostGroup struct {
	host  string
	ranks []int
}

// groupByHost returns one group per host, ranks ascending within a group,
// groups ordered by their smallest rank ID. A rank ID listed twice keeps
// the lexicographically smallest host, so the result does not depend on the
// order of ranks.
func groupByHost(ranks []Rank) []hostGroup {
	sorted := slices.Clone(ranks)
	slices.SortFunc(sorted, func(a, b Rank) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Host, b.Host))
	})
	sorted = slices.CompactFunc(sorted, func(a, b Rank) bool { return a.ID == b.ID })
	index := make(map[string]int)
	var groups []hostGroup
	for _, r := range sorted {
		i, ok := index[r.Host]
		if !ok {
			i = len(groups)
			index[r.Host] = i
			groups = append(groups, hostGroup{host: r.Host})
		}
		groups[i].ranks = append(groups[i].ranks, r.ID)
	}
	return groups
}

// RingOrder returns the rank IDs in ring order. Ranks on the same host are
// adjacent and ascending; the ring starts with the smallest rank ID.
//
// Hosts come in a stable order (by their smallest rank ID). When bw is
// non-empty and there are at most MaxOptimisedHosts hosts, every host order
// is tried and the one with the best RingScore kept; among equals the
// earliest in the stable order wins. The result is exactly the best of all
// host-contiguous rings, and does not depend on the order of ranks.
//
// RingOrder never fails: a rank ID outside bw has unmeasured links and a
// repeated ID is used once.
func RingOrder(ranks []Rank, bw Matrix) []int {
	groups := groupByHost(ranks)
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	if bw.N() > 0 && len(groups) >= 3 && len(groups) <= MaxOptimisedHosts {
		order = bestHostOrder(groups, bw)
	}
	ring := make([]int, 0, len(ranks))
	for _, g := range order {
		ring = append(ring, groups[g].ranks...)
	}
	return ring
}

// bestHostOrder tries every order of groups[1:] after groups[0], in
// lexicographic order, and returns the first with the best score.
func bestHostOrder(groups []hostGroup, bw Matrix) []int {
	h := len(groups)
	perm := make([]int, h)
	for i := range perm {
		perm[i] = i
	}
	links := make([]float64, h)
	score := func(p []int) RingScore {
		for k := range p {
			from := groups[p[k]].ranks
			to := groups[p[(k+1)%h]].ranks
			links[k] = bw.At(from[len(from)-1], to[0])
		}
		return scoreLinks(links)
	}
	best, bestScore := slices.Clone(perm), score(perm)
	for nextPermutation(perm[1:]) {
		if s := score(perm); s.Better(bestScore) {
			best, bestScore = slices.Clone(perm), s
		}
	}
	return best
}

// nextPermutation rearranges p into the next permutation in lexicographic
// order and reports whether there was one.
func nextPermutation(p []int) bool {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(p) - 1
	for p[j] <= p[i] {
		j--
	}
	p[i], p[j] = p[j], p[i]
	slices.Reverse(p[i+1:])
	return true
}
