package ringtail

import (
	"context"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/assemble"
	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Tree is a reduction in which some ranks have left the ring: the Members
// reduce among themselves, and each evicted rank (a child) contributes
// eagerly, at its own pace, to its parent (a member), which folds what
// its children have sent before the members reduce. This is STAR's parent
// tree, run as one program by the executor (see --dump-plan).
type Tree struct {
	// Members are the ranks in the ring, in ring order.
	Members []int
	// Edges give every child its parent.
	Edges []TreeEdge
	// Deadline is when parents stop waiting for a child that has sent
	// nothing yet (STAR's t_w after the fastest arrival); a child whose
	// contribution is late is folded at a later call. Zero: parents fold
	// only what has already arrived.
	Deadline time.Time
	// Tag and TagMask select the contributions that count: a child sends
	// with Contribute(ctx, parent, buf, tag) where tag&TagMask ==
	// Tag&TagMask. Contribution tags stop at MaxContributionTag, so
	// Tag&TagMask must too. A Mailbox's messages never count.
	Tag, TagMask uint32
}

// TreeEdge makes Child a child of Parent. With Must, the parent waits for
// at least one contribution from the child whatever the deadline (a
// staleness bound reached).
type TreeEdge = engine.TreeEdge

// AllReduceTree reduces buf (with Sum) among t.Members after each parent
// has folded in its children's contributions: on return every member holds
// identical bits — the members' buffers plus every contribution collected.
// Only members call it, with the same Tree. It returns how many
// contributions this rank collected.
func (c *Comm) AllReduceTree(ctx context.Context, buf Buffer, t Tree) (int, error) {
	cl := engine.Call{Spec: spec(wire.AllReduceTree, buf), DType: buf.DType, Op: Sum, Data: buf.Bytes, Deadline: t.Deadline}
	cl.Spec.Members, cl.Spec.Tag, cl.Spec.TagMask = t.Members, t.Tag, t.TagMask
	treeErr := engine.TreeSpec(&cl.Spec, t.Edges, c.cfg.WorldSize, c.cfg.Rank)
	err := c.run(ctx, &cl, checkBuffer("AllReduceTree", buf), treeErr)
	return cl.Collected, err
}

// DumpTree returns, as text, the program cfg.Rank would run for an
// AllReduceTree of count elements of dt (--dump-plan).
func DumpTree(cfg Config, count int, dt DType, t Tree) (string, error) {
	cl := engine.Call{Spec: algo.Spec{Collective: wire.AllReduceTree, Count: count, ElemSize: dt.Size(), Members: t.Members,
		Tag: t.Tag, TagMask: t.TagMask}, DType: dt, Op: Sum}
	for _, e := range t.Edges {
		if e.Parent == cfg.Rank {
			cl.Spec.Children = append(cl.Spec.Children, algo.Child{Rank: e.Child, Must: e.Must})
		}
	}
	return assemble.Program((*envcfg.Comm)(&cfg), &cl, nil)
}
