package ringtail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/wire"
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
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllToAll, Count: block, ElemSize: send.DType.Size(), Root: int(wire.AllToAllEven)},
		DType: send.DType, Data: recv.Bytes, Input: send.Bytes}
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
	return c.run(ctx, &cl, checkBuffer("AllToAll send", send), checkBuffer("AllToAll recv", recv), shapeErr)
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
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllToAll, ElemSize: send.DType.Size(), Root: int(wire.AllToAllUneven),
		SendCounts: sendCounts, RecvCounts: recvCounts}, DType: send.DType, Data: recv.Bytes, Input: send.Bytes}
	shapeErr := checkCounts(w, me, send, sendCounts, recv, recvCounts)
	if shapeErr == nil && overlaps(send.Bytes, recv.Bytes) {
		shapeErr = fmt.Errorf("send and recv overlap")
	}
	if err := errors.Join(checkBuffer("AllToAllV send", send), checkBuffer("AllToAllV recv", recv), shapeErr); err != nil {
		return c.run(ctx, &cl, err)
	}
	if w > 1 {
		if err := c.agreeOnCounts(ctx, &cl); err != nil {
			return err
		}
	}
	return c.run(ctx, &cl)
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
// from it (an even AllToAll of two int64s per pair, before the data), and
// checks the peers' side of each pair against this rank's. A
// disagreement is reported by both ranks of the pair and fails the
// communicator, so every rank returns at once and no data moves.
func (c *Comm) agreeOnCounts(ctx context.Context, data *engine.Call) error {
	w, me := c.cfg.WorldSize, c.cfg.Rank
	sendCounts, recvCounts := data.Spec.SendCounts, data.Spec.RecvCounts
	out := make([]int64, 2*w) // per peer: what I send you, what I expect from you
	for r := range w {
		out[2*r], out[2*r+1] = int64(sendCounts[r]), int64(recvCounts[r])
	}
	in := make([]int64, 2*w)
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllToAll, Count: 2, ElemSize: 8, Root: int(wire.AllToAllCounts)},
		DType: Int64, Data: Int64s(in).Bytes, Input: Int64s(out).Bytes}
	if err := c.run(ctx, &cl); err != nil {
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
	return c.run(ctx, data, fmt.Errorf("AllToAllV split sizes disagree: %s", strings.Join(bad, "; ")))
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
