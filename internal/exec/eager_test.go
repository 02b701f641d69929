package exec

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The parent tree of STAR as programs: members 0, 1 and 2 reduce with
// algo's AllReduceTree (collect+ring, collect+recursive-doubling), rank 0
// collecting what its evicted child, rank 3, posts at its own pace.
const (
	childTag  = 0x70
	childMask = 0xff
)

// tree is one AllReduceTree call of the members of an n-rank cluster.
type tree struct {
	cl     *cluster
	count  int
	must   bool
	progs  map[int]*plan.Program
	calls  map[int]*Call
	inputs map[int][]float64
}

func newTree(t *testing.T, cl *cluster, count int, must bool, deadline time.Time) *tree {
	tr := &tree{cl: cl, count: count, must: must, progs: map[int]*plan.Program{}, calls: map[int]*Call{}, inputs: map[int][]float64{}}
	members := []int{0, 1, 2}
	for pos, r := range members {
		sp := algo.Spec{Collective: wire.AllReduceTree, Count: count, ElemSize: 4, Members: members, Tag: childTag, TagMask: childMask}
		if r == 0 {
			sp.Children = []algo.Child{{Rank: 3, Must: must}}
		}
		tr.progs[r] = cl.program(sp, r)
		if !strings.HasPrefix(tr.progs[r].Algorithm, "collect+") || !tr.progs[r].General {
			t.Fatalf("rank %d: %s program, not a general collect+ one", r, tr.progs[r].Algorithm)
		}
		in := make([]float64, count)
		for i := range in {
			in[i] = pattern(pos, i)
		}
		tr.inputs[r] = in
		d := cl.next(r, wire.Desc{Collective: wire.AllReduceTree, DType: uint8(reduce.Float32), RedOp: uint8(reduce.Sum), Group: subgroup(members), Count: uint64(count)})
		tr.calls[r] = &Call{Desc: d, DType: reduce.Float32, Op: reduce.Sum, Data: encode(reduce.Float32, in), Deadline: deadline}
	}
	return tr
}

// run runs the members' calls, the parent's (rank 0's) with ctx, and
// returns their errors by rank.
func (tr *tree) run(ctx context.Context) map[int]error {
	errs := tr.cl.each([]int{0, 1, 2}, func(r int) error {
		if r != 0 {
			return tr.cl.run(context.Background(), r, time.Minute, tr.progs[r], tr.calls[r])
		}
		return tr.cl.run(ctx, r, time.Minute, tr.progs[r], tr.calls[r])
	})
	return map[int]error{0: errs[0], 1: errs[1], 2: errs[2]}
}

// check compares every member's result with the members' sum plus the
// children's gradients folded.
func (tr *tree) check(t *testing.T, gradients ...[]float64) {
	t.Helper()
	want := make([]float64, tr.count)
	for _, in := range append([][]float64{tr.inputs[0], tr.inputs[1], tr.inputs[2]}, gradients...) {
		for i := range want {
			want[i] += in[i]
		}
	}
	for r, c := range tr.calls {
		if i := firstDiff(decode(reduce.Float32, c.Data), want); i >= 0 {
			t.Fatalf("rank %d: element %d is %v, want %v", r, i, decode(reduce.Float32, c.Data)[i], want[i])
		}
	}
}

// post runs rank 3's program of one Post of grad to its parent, rank 0,
// tagged tag.
func post(t *testing.T, cl *cluster, grad []float64, tag uint32) {
	t.Helper()
	p := &plan.Program{Algorithm: "test-post", Rank: 3, World: cl.n, DataLen: len(grad),
		Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Post, Peer: 0, Buf: plan.Data, Len: len(grad), Tag: tag}}}}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	d := cl.next(3, wire.Desc{Collective: wire.Eager, DType: uint8(reduce.Float32), Group: 0xc41d, Count: uint64(len(grad))})
	if err := cl.run(context.Background(), 3, time.Minute, p, &Call{Desc: d, DType: reduce.Float32, Op: reduce.Sum, Data: encode(reduce.Float32, grad)}); err != nil {
		t.Fatal(err)
	}
}

func gradient(k, count int) []float64 {
	g := make([]float64, count)
	for i := range g {
		g[i] = float64(100*k + i%7)
	}
	return g
}

// A parent folds every gradient its child has posted before the members
// reduce (collect+ring for a large call, collect+recursive-doubling for a
// small one), and the members' result holds them; a Must collect waits for
// one; a collect whose deadline passes takes none and is not a failure.
func TestAllReduceTreeCollectsAChildsGradients(t *testing.T) {
	for _, count := range []int{40, 600} {
		cl := newCluster(t, 4, clusterOpts{})
		t.Run(fmt.Sprintf("%d posted before", count), func(t *testing.T) {
			g1, g2 := gradient(1, count), gradient(2, count)
			post(t, cl, g1, childTag)
			post(t, cl, g2, childTag|0x100) // the mask ignores the high bits
			cl.boxes[0].await(t, 2)
			tr := newTree(t, cl, count, false, time.Now().Add(time.Minute))
			for r, err := range tr.run(context.Background()) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if got := tr.calls[0].Collected; got != 2 {
				t.Fatalf("collected %d gradients, want 2", got)
			}
			tr.check(t, g1, g2)
		})
		t.Run(fmt.Sprintf("%d deadline passes", count), func(t *testing.T) {
			tr := newTree(t, cl, count, false, time.Now().Add(10*time.Millisecond))
			for r, err := range tr.run(context.Background()) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if got := tr.calls[0].Collected; got != 0 {
				t.Fatalf("collected %d gradients, want none", got)
			}
			tr.check(t)
		})
		t.Run(fmt.Sprintf("%d no deadline takes only what has arrived", count), func(t *testing.T) {
			tr := newTree(t, cl, count, false, time.Time{})
			for r, err := range tr.run(context.Background()) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			tr.check(t)
		})
		t.Run(fmt.Sprintf("%d must waits for one", count), func(t *testing.T) {
			tr := newTree(t, cl, count, true, time.Now()) // the deadline has passed: Must ignores it
			g := gradient(3, count)
			done := make(chan map[int]error, 1)
			go func() { done <- tr.run(context.Background()) }()
			post(t, cl, g, childTag)
			for r, err := range <-done {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if got := tr.calls[0].Collected; got != 1 {
				t.Fatalf("collected %d gradients, want 1", got)
			}
			tr.check(t, g)
		})
	}
}

// The members' programs equal plan.Simulate's reference of the same
// programs (the eager messages included).
func TestAllReduceTreeEqualsTheSimulator(t *testing.T) {
	cl := newCluster(t, 4, clusterOpts{})
	const count = 600
	g := gradient(5, count)
	post(t, cl, g, childTag)
	cl.boxes[0].await(t, 1)
	tr := newTree(t, cl, count, true, time.Time{})
	for r, err := range tr.run(context.Background()) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	progs := []*plan.Program{tr.progs[0], tr.progs[1], tr.progs[2],
		{Algorithm: "post", Rank: 3, World: 4, DataLen: count, Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Post, Peer: 0, Buf: plan.Data, Len: count, Tag: childTag}}}}}}}}
	data := [][]float64{tr.inputs[0], tr.inputs[1], tr.inputs[2], g}
	for r := range data {
		data[r] = slices.Clone(data[r])
	}
	if err := plan.Simulate(progs, data, make([][]float64, 4), plan.SimSum); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if i := firstDiff(decode(reduce.Float32, tr.calls[r].Data), data[r]); i >= 0 {
			t.Fatalf("rank %d differs from the simulator at element %d", r, i)
		}
	}
}

// A gradient of the wrong size is a mismatch naming the child; a Must
// collect ends with the context, naming the child it waited on; a collect
// needs a mailbox.
func TestCollectFailures(t *testing.T) {
	t.Run("wrong size", func(t *testing.T) {
		cl := newCluster(t, 4, clusterOpts{})
		post(t, cl, gradient(1, 39), childTag)
		cl.boxes[0].await(t, 1)
		tr := newTree(t, cl, 40, false, time.Time{})
		errs := tr.run(context.Background())
		te := transportError(t, 0, errs[0])
		if te.Kind != transport.KindMismatch || te.Rank != 3 || !strings.Contains(te.Detail, "posted 156 bytes") {
			t.Fatalf("got %v, want a mismatch naming rank 3", errs[0])
		}
	})
	t.Run("must canceled", func(t *testing.T) {
		cl := newCluster(t, 4, clusterOpts{})
		tr := newTree(t, cl, 40, true, time.Time{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		errs := tr.run(ctx)
		wantWaitedOn(t, errs[0], transport.KindTimeout, 0, 3)
	})
	t.Run("no mailbox", func(t *testing.T) {
		cl := newCluster(t, 4, clusterOpts{})
		cl.execs[0].SetMailbox(nil)
		tr := newTree(t, cl, 40, false, time.Time{})
		if err := tr.run(context.Background())[0]; err == nil || !strings.Contains(err.Error(), "mailbox") {
			t.Fatalf("got %v, want a missing mailbox", err)
		}
	})
}
