package ringtail

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/ring"
)

// kindAllToAll is the frame kind of AllToAll and AllToAllV. It sits apart
// from the kinds in comm.go so that both lists can grow; Root tells the
// three uses apart (a rank calling one while a peer calls another is a
// mismatch): an even exchange, the count exchange of AllToAllV, and
// AllToAllV's data.
const (
	kindAllToAll uint8 = 0x10

	allToAllEven   = 0
	allToAllCounts = 1
	allToAllUneven = 2
)

// AllToAll sends block r of send to rank r and receives rank r's block for
// this rank into block r of recv: send and recv hold WorldSize blocks of
// send.Len()/WorldSize elements each, in rank order. Every rank must call
// it with the same element type and block size. send and recv must not
// overlap.
//
// It runs the pairwise exchange of ring.AllToAll: WorldSize−1 steps, each
// rank sending one block and receiving one per step.
func (c *Comm) AllToAll(ctx context.Context, send, recv Buffer) error {
	w := c.cfg.WorldSize
	block := send.Len() / w
	cl := call{kind: kindAllToAll, data: recv, input: send, root: allToAllEven, count: block}
	var shapeErr error
	switch {
	case send.DType != recv.DType:
		shapeErr = fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
	case send.Len()%w != 0:
		shapeErr = fmt.Errorf("send has %d elements, not a multiple of the world size %d", send.Len(), w)
	case recv.Len() != send.Len():
		shapeErr = fmt.Errorf("recv has %d elements, send %d: they must be equal", recv.Len(), send.Len())
	case overlaps(send.Bytes, recv.Bytes):
		shapeErr = fmt.Errorf("send and recv overlap")
	}
	if err := c.precheck(cl, c.check("AllToAll send", send), c.check("AllToAll recv", recv), shapeErr); err != nil {
		return err
	}
	counts := make([]int, w)
	for r := range counts {
		counts[r] = block
	}
	return c.allToAll(ctx, cl, counts, counts, progKey{kind: kindAllToAll, count: block, esize: send.DType.Size()})
}

// AllToAllV is AllToAll with blocks of any size: send holds sendCounts[r]
// elements for rank r and recv receives recvCounts[r] elements from rank
// r, each back to back in rank order. What rank a sends to rank b must be
// what b expects from a: the ranks first exchange their counts (one small
// all-to-all), and any disagreement fails the communicator on every rank
// with an error naming the two ranks and both counts, before any data
// moves. send and recv must not overlap.
func (c *Comm) AllToAllV(ctx context.Context, send Buffer, sendCounts []int, recv Buffer, recvCounts []int) error {
	w, me := c.cfg.WorldSize, c.cfg.Rank
	cl := call{kind: kindAllToAll, data: recv, input: send, root: allToAllUneven}
	shapeErr := checkCounts(w, me, send, sendCounts, recv, recvCounts)
	if shapeErr == nil && overlaps(send.Bytes, recv.Bytes) {
		shapeErr = fmt.Errorf("send and recv overlap")
	}
	if err := c.precheck(cl, c.check("AllToAllV send", send), c.check("AllToAllV recv", recv), shapeErr); err != nil {
		return err
	}
	if w > 1 {
		if err := c.agreeOnCounts(ctx, sendCounts, recvCounts); err != nil {
			return err
		}
	}
	var key strings.Builder
	for i, v := range append(append([]int(nil), sendCounts...), recvCounts...) {
		if i > 0 {
			key.WriteByte(',')
		}
		key.WriteString(strconv.Itoa(v))
	}
	return c.allToAll(ctx, cl, sendCounts, recvCounts, progKey{kind: kindAllToAll, root: allToAllUneven, esize: send.DType.Size(), group: key.String()})
}

// checkCounts validates AllToAllV's arguments on this rank.
func checkCounts(w, me int, send Buffer, sendCounts []int, recv Buffer, recvCounts []int) error {
	if send.DType != recv.DType {
		return fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
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
	if st != send.Len() || rt != recv.Len() {
		return fmt.Errorf("counts add up to %d to send and %d to receive, buffers hold %d and %d elements", st, rt, send.Len(), recv.Len())
	}
	if sendCounts[me] != recvCounts[me] {
		return fmt.Errorf("rank %d sends itself %d elements but expects %d", me, sendCounts[me], recvCounts[me])
	}
	return nil
}

// agreeOnCounts tells every peer what this rank will send it and expects
// from it, and checks the peers' side of each pair against this rank's.
// A disagreement is reported by both ranks of the pair and fails the
// communicator, so every rank returns at once.
func (c *Comm) agreeOnCounts(ctx context.Context, sendCounts, recvCounts []int) error {
	w, me := c.cfg.WorldSize, c.cfg.Rank
	out := make([]int64, 2*w) // per peer: what I send you, what I expect from you
	for r := range w {
		out[2*r], out[2*r+1] = int64(sendCounts[r]), int64(recvCounts[r])
	}
	in := make([]int64, 2*w)
	cl := call{kind: kindAllToAll, data: Int64s(in), input: Int64s(out), root: allToAllCounts, count: 2}
	two := make([]int, w)
	for r := range two {
		two[r] = 2
	}
	if err := c.allToAll(ctx, cl, two, two, progKey{kind: kindAllToAll, root: allToAllCounts, count: 2, esize: 8}); err != nil {
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
		return nil
	}
	d := cl
	d.root, d.count = allToAllUneven, 0
	return c.precheck(d, fmt.Errorf("AllToAllV split sizes disagree: %s", strings.Join(bad, "; ")))
}

// allToAll runs the pairwise program for the given counts (validated).
func (c *Comm) allToAll(ctx context.Context, cl call, sendCounts, recvCounts []int, key progKey) error {
	splitAbove := max(1, c.cfg.SmallBytes/max(1, cl.data.DType.Size()))
	return c.run(ctx, cl, func() (*plan.Program, error) {
		return ring.AllToAll(ring.Spec{Order: c.order, Rank: c.cfg.Rank, Channels: c.cfg.Channels}, sendCounts, recvCounts, splitAbove)
	}, key)
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
