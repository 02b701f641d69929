package ringtail

import (
	"context"
	"fmt"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// AllReduceLate is AllReduce for a step in which rank late is predicted to
// reach the call after the others (the exact mode of StragglAR, arXiv
// 2505.23523): the other ranks reduce-scatter among themselves while late
// is still computing, and when it arrives a short completion folds its
// data in and hands the finished segments to every rank. The result is
// the exact reduction, with identical bits on every rank, as with
// AllReduce; only the order of the additions differs from AllReduce's, so
// the two calls may round differently.
//
// Every rank must pass the same late rank (a rank that names another is
// caught as a mismatch). After late arrives the call takes about G/B (G the
// buffer's bytes, B a rank's link bandwidth) instead of the ring's
// 2(n−1)/n·G/B; if late is not in fact the last to arrive, the call is
// still correct but slower than AllReduce.
func (c *Comm) AllReduceLate(ctx context.Context, buf Buffer, op Op, late int) error {
	cl := engine.Call{Spec: spec(wire.AllReduceLate, buf), DType: buf.DType, Op: op, Data: buf.Bytes}
	cl.Spec.Avg = op == Avg
	cl.Spec.Root = late
	var lateErr error
	if late < 0 || late >= c.cfg.WorldSize {
		lateErr = fmt.Errorf("late rank %d outside 0..%d", late, c.cfg.WorldSize-1)
	}
	return c.run(ctx, &cl, checkBuffer("AllReduceLate", buf), opErr(op), lateErr)
}
