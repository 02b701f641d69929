package cost

import "time"

// LeaderFold is the time of a coded step's communication once its payloads
// are ready (gradcode/coded: the leader folds): the leader receives
// arrivals payloads of payload bytes, one after another over its own link
// (a leader takes them in turn), then sends the decoded sum of result bytes
// to every other member in turn. members lists the ranks (the leader
// among them). It is 0 for one member, and prices a link of unknown
// bandwidth by its latency alone.
func (n *Net) LeaderFold(leader int, members []int, arrivals, payload, result int) time.Duration {
	if len(members) <= 1 {
		return 0
	}
	if n.uniform() {
		l := n.Link(-1, -1)
		return time.Duration(arrivals)*l.Send(payload) + time.Duration(len(members)-1)*l.Send(result)
	}
	var in, out time.Duration
	for _, r := range members {
		if r == leader {
			continue
		}
		in = max(in, n.Link(r, leader).Send(payload))
		out += n.Link(leader, r).Send(result)
	}
	return time.Duration(arrivals)*in + out
}
