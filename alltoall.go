package ringtail

import (
	"context"
	"errors"
	"fmt"

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
	case engine.Overlaps(send.Bytes, recv.Bytes):
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
	shapeErr := engine.CheckCounts(w, me, send.DType, recv.DType, send.Len(), recv.Len(), sendCounts, recvCounts)
	if shapeErr == nil && engine.Overlaps(send.Bytes, recv.Bytes) {
		shapeErr = fmt.Errorf("send and recv overlap")
	}
	if err := errors.Join(checkBuffer("AllToAllV send", send), checkBuffer("AllToAllV recv", recv), shapeErr); err != nil {
		return c.run(ctx, &cl, err)
	}
	return engine.AgreeOnCounts(ctx, c.run, w, me, &cl)
}
