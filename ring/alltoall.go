package ring

import (
	"fmt"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// AllToAll builds the pairwise-exchange all-to-all for s.Rank. Input holds
// the blocks this rank sends, back to back in rank order: sendCounts[r]
// elements for rank r. Data receives the blocks of every rank, back to back
// in rank order: recvCounts[r] elements from rank r. The rank's own block is
// copied locally (sendCounts[s.Rank] must equal recvCounts[s.Rank]).
//
// At step k (1 ≤ k < n) the rank at ring position p sends its block for the
// rank at position p+k and receives the block of the rank at position p−k,
// so every rank sends and receives exactly one message per step and no
// rank is sent to by two ranks at once (no incast).
//
// A block of more than splitAbove elements is cut into s.Channels segments,
// one per channel, the channels running their exchanges in parallel; a
// smaller block travels whole on channel 0. Both ends of a pair decide from
// the same count, so they agree on the cut as long as the counts agree
// (which the caller checks).
func AllToAll(s Spec, sendCounts, recvCounts []int, splitAbove int) (*plan.Program, error) {
	pos, err := s.validate()
	if err != nil {
		return nil, err
	}
	n := len(s.Order)
	if s.world() != n {
		return nil, fmt.Errorf("ring: all-to-all needs every rank of the world in the order")
	}
	if len(sendCounts) != n || len(recvCounts) != n {
		return nil, fmt.Errorf("ring: all-to-all of %d ranks with %d send and %d receive counts", n, len(sendCounts), len(recvCounts))
	}
	sendOff, sendLen, err := offsets(sendCounts, "send")
	if err != nil {
		return nil, err
	}
	recvOff, recvLen, err := offsets(recvCounts, "receive")
	if err != nil {
		return nil, err
	}
	if sendCounts[s.Rank] != recvCounts[s.Rank] {
		return nil, fmt.Errorf("ring: all-to-all rank %d sends itself %d elements but expects %d", s.Rank, sendCounts[s.Rank], recvCounts[s.Rank])
	}
	p := &plan.Program{Algorithm: "pairwise", Rank: s.Rank, World: n, DataLen: recvLen, InputLen: sendLen}
	segments := func(count int) int {
		if count > splitAbove {
			return s.Channels
		}
		return 1
	}
	chans := make([]plan.Channel, s.Channels)
	if own := sendCounts[s.Rank]; own > 0 {
		chans[0].Steps = append(chans[0].Steps, plan.Step{Ops: []plan.Op{
			{Kind: plan.Copy, Buf: plan.Data, Off: recvOff[s.Rank], Src: plan.Input, SrcOff: sendOff[s.Rank], Len: own},
		}})
	}
	for k := 1; k < n; k++ {
		to, from := s.Order[mod(pos+k, n)], s.Order[mod(pos-k, n)]
		sn, rn := segments(sendCounts[to]), segments(recvCounts[from])
		for c := range s.Channels {
			var st plan.Step
			if c < sn {
				o, l := plan.Segment(sendCounts[to], sn, c)
				st.Ops = append(st.Ops, plan.Op{Kind: plan.Send, Peer: to, Buf: plan.Input, Off: sendOff[to] + o, Len: l})
			}
			if c < rn {
				o, l := plan.Segment(recvCounts[from], rn, c)
				st.Ops = append(st.Ops, plan.Op{Kind: plan.Recv, Peer: from, Buf: plan.Data, Off: recvOff[from] + o, Len: l})
			}
			if len(st.Ops) > 0 {
				chans[c].Steps = append(chans[c].Steps, st)
			}
		}
	}
	// A channel carries segments only where the channels below it do, so
	// the empty ones are a suffix: drop them (channel indices, which pick
	// the links, are unchanged).
	for len(chans) > 0 && len(chans[len(chans)-1].Steps) == 0 {
		chans = chans[:len(chans)-1]
	}
	p.Channels = chans
	return p, nil
}

// offsets returns where each rank's block starts in a buffer of blocks
// laid out in rank order, and the buffer's length.
func offsets(counts []int, what string) ([]int, int, error) {
	off := make([]int, len(counts))
	total := 0
	for r, c := range counts {
		if c < 0 {
			return nil, 0, fmt.Errorf("ring: all-to-all %s count %d for rank %d", what, c, r)
		}
		off[r] = total
		total += c
		if total < 0 {
			return nil, 0, fmt.Errorf("ring: all-to-all %s counts overflow", what)
		}
	}
	return off, total, nil
}
