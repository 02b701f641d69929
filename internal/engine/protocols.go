package engine

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/topology"
)

// The protocols in this file are several calls in a row (a probe's
// tournament, AllToAllV's count agreement) or the checks that turn an
// argument into a call's Spec (a tree's edges). They run their calls
// through a Runner: the communicator's own path for a call, which checks
// call sites and gives errors their public type.

// Runner runs a call as the communicator does; a call with invalid
// reasons fails the communicator with them instead (Engine.Invalid).
type Runner func(ctx context.Context, cl *Call, invalid ...error) error

// ProbeSizes sizes a link probe (ringtail.ProbeConfig).
type ProbeSizes struct {
	Small, Large, Repeats int
}

// Defaults fills the sizes left zero and checks them.
func (p *ProbeSizes) Defaults() error {
	if p.Small == 0 {
		p.Small = 8
	}
	if p.Large == 0 {
		p.Large = 1 << 20
	}
	if p.Repeats == 0 {
		p.Repeats = 3
	}
	if p.Small < 0 || p.Large <= p.Small || p.Repeats < 1 || p.Large > 1<<30 {
		return fmt.Errorf("ringtail: probe sizes %d/%d bytes, %d repeats", p.Small, p.Large, p.Repeats)
	}
	return nil
}

// Probe measures latency and bandwidth between every pair of the n ranks
// (ringtail.Comm.Probe): pairs meet in a round-robin tournament, the lower
// rank of each pair times an echoed small probe and an acknowledged large
// one, and one Max-allreduce shares the medians so every rank returns the
// same estimates.
func Probe(ctx context.Context, run Runner, n, me int, p ProbeSizes) (topology.LinkEstimates, error) {
	// lat[i*n+j] and big[i*n+j]: median seconds for the pair (i, j), both orders.
	shared := make([]float64, 2*n*n)
	small := make([]byte, p.Small)
	large := make([]byte, p.Large)
	ack := make([]byte, 1)
	p2p := func(peer int, buf []byte, send bool) error {
		cl := Call{Spec: algo.Spec{Collective: wire.PointToPoint, Count: len(buf), ElemSize: 1, Peer: peer, Send: send},
			DType: reduce.Uint8, Data: buf}
		return run(ctx, &cl)
	}
	for _, partner := range topology.Tournament(n, me) {
		if partner < 0 {
			continue // a bye this round
		}
		var lats, bigs []float64
		for rep := 0; rep < p.Repeats; rep++ {
			if me < partner {
				t0 := time.Now()
				if err := p2p(partner, small, true); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := p2p(partner, small, false); err != nil {
					return topology.LinkEstimates{}, err
				}
				rtt := time.Since(t0).Seconds()
				t1 := time.Now()
				if err := p2p(partner, large, true); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := p2p(partner, ack, false); err != nil {
					return topology.LinkEstimates{}, err
				}
				lats = append(lats, rtt/2)
				bigs = append(bigs, time.Since(t1).Seconds()-rtt/2)
			} else {
				for _, step := range []struct {
					buf  []byte
					send bool
				}{{small, false}, {small, true}, {large, false}, {ack, true}} {
					if err := p2p(partner, step.buf, step.send); err != nil {
						return topology.LinkEstimates{}, err
					}
				}
			}
		}
		if me < partner {
			l, b := median(lats), median(bigs)
			for _, ij := range [][2]int{{me, partner}, {partner, me}} {
				shared[ij[0]*n+ij[1]] = l
				shared[n*n+ij[0]*n+ij[1]] = b
			}
		}
	}
	cl := Call{Spec: algo.Spec{Collective: wire.AllReduce, Count: len(shared), ElemSize: 8}, DType: reduce.Float64, Op: reduce.Max,
		Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(shared))), 8*len(shared))}
	if err := run(ctx, &cl); err != nil {
		return topology.LinkEstimates{}, err
	}
	var samples []topology.ProbeSample
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			samples = append(samples,
				topology.ProbeSample{From: i, To: j, Bytes: int64(p.Small), Duration: seconds(shared[i*n+j])},
				topology.ProbeSample{From: i, To: j, Bytes: int64(p.Large), Duration: seconds(shared[n*n+i*n+j])})
		}
	}
	return topology.EstimateLinks(n, samples)
}

func seconds(s float64) time.Duration {
	return max(time.Nanosecond, time.Duration(s*float64(time.Second)))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// CheckCounts validates AllToAllV's arguments on rank me of w: send and
// recv of element types sendDT and recvDT hold sendLen and recvLen
// elements.
func CheckCounts(w, me int, sendDT, recvDT reduce.DType, sendLen, recvLen int, sendCounts, recvCounts []int) error {
	if sendDT != recvDT {
		return fmt.Errorf("send is %v but recv is %v", sendDT, recvDT)
	}
	if len(sendCounts) != w || len(recvCounts) != w {
		return fmt.Errorf("%d send and %d receive counts for %d ranks", len(sendCounts), len(recvCounts), w)
	}
	total := func(counts []int, what string) (int, error) {
		t := 0
		for r, n := range counts {
			if n < 0 {
				return 0, fmt.Errorf("negative %s count %d for rank %d", what, n, r)
			}
			t += n
			if t < 0 {
				return 0, fmt.Errorf("%s counts overflow", what)
			}
		}
		return t, nil
	}
	st, err := total(sendCounts, "send")
	if err != nil {
		return err
	}
	rt, err := total(recvCounts, "receive")
	if err != nil {
		return err
	}
	if st != sendLen || rt != recvLen {
		return fmt.Errorf("counts add up to %d to send and %d to receive, buffers hold %d and %d elements", st, rt, sendLen, recvLen)
	}
	if sendCounts[me] != recvCounts[me] {
		return fmt.Errorf("rank %d sends itself %d elements but expects %d", me, sendCounts[me], recvCounts[me])
	}
	return nil
}

// AgreeOnCounts runs AllToAllV's data call after the count agreement: it
// tells every peer what this rank will send it and expects from it (an
// even AllToAll of two int64s per pair, before the data), and checks the
// peers' side of each pair against this rank's. A disagreement is
// reported by both ranks of the pair and fails the communicator, so every
// rank returns at once and no data moves.
func AgreeOnCounts(ctx context.Context, run Runner, w, me int, data *Call) error {
	if w == 1 {
		return run(ctx, data)
	}
	sendCounts, recvCounts := data.Spec.SendCounts, data.Spec.RecvCounts
	buf := make([]int64, 4*w) // out, then in; per peer: what I send you, what I expect from you
	out, in := buf[:2*w], buf[2*w:]
	for r := range w {
		out[2*r], out[2*r+1] = int64(sendCounts[r]), int64(recvCounts[r])
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 8*len(buf))
	cl := Call{Spec: algo.Spec{Collective: wire.AllToAll, Count: 2, ElemSize: 8, Root: int(wire.AllToAllCounts)},
		DType: reduce.Int64, Data: b[16*w:], Input: b[:16*w]}
	if err := run(ctx, &cl); err != nil {
		return err
	}
	var bad []string
	for r := range w {
		theySend, theyExpect := in[2*r], in[2*r+1]
		if r == me {
			continue
		}
		if theySend != int64(recvCounts[r]) {
			bad = append(bad, fmt.Sprintf("rank %d sends %d elements to rank %d, which expects %d", r, theySend, me, recvCounts[r]))
		}
		if theyExpect != int64(sendCounts[r]) {
			bad = append(bad, fmt.Sprintf("rank %d sends %d elements to rank %d, which expects %d", me, sendCounts[r], r, theyExpect))
		}
	}
	if len(bad) == 0 {
		return run(ctx, data)
	}
	return run(ctx, data, fmt.Errorf("AllToAllV split sizes disagree: %s", strings.Join(bad, "; ")))
}

// Overlaps reports whether a and b share memory.
func Overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// TreeEdge makes Child a child of Parent (ringtail.TreeEdge).
type TreeEdge struct {
	Child, Parent int
	Must          bool
}

// TreeSpec gives an AllReduceTree's spec, whose Members, Tag and TagMask
// are set, the children rank me folds and, in Root, a hash of every edge
// (so ranks that disagree on the tree are caught as a mismatch); it
// reports what is wrong with the w ranks' tree (the last invalid edge, else
// a tag no contribution can have, else the members).
func TreeSpec(s *algo.Spec, edges []TreeEdge, w, me int) error {
	var treeErr error
	if _, err := MembersKey(s.Members, w, me); err != nil {
		treeErr = err
	}
	if s.Tag&s.TagMask > MaxTag {
		treeErr = fmt.Errorf("tag %#x under mask %#x is above MaxContributionTag: no contribution can match", s.Tag, s.TagMask)
	}
	edges = slices.Clone(edges)
	slices.SortFunc(edges, func(a, b TreeEdge) int { return a.Child - b.Child })
	h := fnv.New32a()
	for i, e := range edges {
		switch {
		case e.Child < 0 || e.Child >= w || slices.Contains(s.Members, e.Child):
			treeErr = fmt.Errorf("child %d is not a rank outside the members", e.Child)
		case !slices.Contains(s.Members, e.Parent):
			treeErr = fmt.Errorf("parent %d of child %d is not a member", e.Parent, e.Child)
		case i > 0 && edges[i-1].Child == e.Child:
			treeErr = fmt.Errorf("child %d has two parents", e.Child)
		}
		h.Write([]byte(strconv.Itoa(e.Child) + ">" + strconv.Itoa(e.Parent) + ";"))
		if e.Parent == me {
			s.Children = append(s.Children, algo.Child{Rank: e.Child, Must: e.Must})
		}
	}
	s.Root = int(h.Sum32() & 0x7fffffff)
	return treeErr
}
