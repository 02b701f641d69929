package cost

import "time"

// TwoLevel is the time of ring.AllReduceTwoLevel of bytes bytes over
// hosts (hosts[h] is host h's ranks, every host with L of them): a ring
// reduce-scatter and allgather among each host's ranks (L−1 messages of
// bytes/L each, over the slowest link within a host), and between them L
// rings across the hosts at once, each of 2(H−1) messages of
// bytes/(L·H), the L flows out of a host sharing its link.
func (n *Net) TwoLevel(hosts [][]int, bytes int) time.Duration {
	nh := len(hosts)
	if nh == 0 || len(hosts[0]) == 0 {
		return 0
	}
	L := len(hosts[0])
	var local time.Duration
	for _, ranks := range hosts {
		if L > 1 {
			local = max(local, n.Slowest(ranks).Send(bytes/L))
		}
	}
	var cross time.Duration
	if nh > 1 {
		msg := bytes / L / nh
		for j := 0; j < L; j++ {
			for h := range hosts {
				a, b := hosts[h][j], hosts[(h+1)%nh][j]
				l := n.Link(a, b)
				if !l.Known() {
					continue
				}
				l.BytesPerSec /= float64(L)
				cross = max(cross, l.Send(msg))
			}
		}
	}
	return time.Duration(2*(L-1))*local + time.Duration(2*(nh-1))*cross
}

// Offload is the time of ring.AllReduceOffload of bytes bytes around
// order with slow's share offloaded, in rounds rounds: rounds + 2 macro
// rounds of 2(m−1) steps (m = k−1 fast ranks), each step as long as the
// slowest of its parts — the slow rank's piece of its upload and of its
// download (bytes/(rounds·2(m−1)) each way over its links), and the fast
// ring's message (bytes/(k·rounds), twice that on the link that carries
// the two segments starting at the slow rank's right neighbour). 0 when
// the program does not apply (fewer than 3 ranks, slow not among them).
func (n *Net) Offload(order []int, slow, bytes, rounds int) time.Duration {
	k := len(order)
	q := -1
	for i, r := range order {
		if r == slow {
			q = i
		}
	}
	if k < 3 || q < 0 || rounds < 1 {
		return 0
	}
	m := k - 1
	per := 2 * (m - 1)
	r, l := order[(q+1)%k], order[(q+k-1)%k]
	piece := bytes / (rounds * per)
	step := max(n.Link(slow, r).Send(piece), n.Link(slow, l).Send(piece), n.Link(r, slow).Send(piece))
	fast := make([]int, 0, m)
	for d := 1; d < k; d++ {
		fast = append(fast, order[(q+d)%k])
	}
	unit := bytes / (k * rounds)
	for i, a := range fast {
		step = max(step, n.Link(a, fast[(i+1)%m]).Send(2*unit))
	}
	return time.Duration((rounds+2)*per) * step
}

// OffloadRounds returns the round count, among powers of two up to
// maxRounds, at which Offload prices lowest, and that price: more rounds
// shorten the pipeline's fill and drain (2 of rounds + 2 macro rounds),
// fewer pay fewer messages' latency.
func (n *Net) OffloadRounds(order []int, slow, bytes, maxRounds int) (int, time.Duration) {
	best, at := time.Duration(0), 0
	for rounds := 1; rounds <= max(1, maxRounds); rounds *= 2 {
		if t := n.Offload(order, slow, bytes, rounds); t > 0 && (at == 0 || t < best) {
			best, at = t, rounds
		}
	}
	return at, best
}
