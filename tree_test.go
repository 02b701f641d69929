package ringtail

import (
	"context"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The parent tree as one program: evicted children post at their own
// pace, parents fold what came by the deadline, members reduce; a late
// contribution is folded by the next call, none is lost or folded twice.
func TestAllReduceTreeFoldsChildrenAtTheirOwnPace(t *testing.T) {
	const n, count = 5, 3000
	comms := startComms(t, n, nil)
	tree := Tree{Members: []int{0, 1, 2}, Edges: []TreeEdge{{Child: 3, Parent: 0}, {Child: 4, Parent: 2}}, TagMask: 1}
	ctx := context.Background()
	fill := func(v float32) []float32 {
		b := make([]float32, count)
		for i := range b {
			b[i] = v + float32(i%7)
		}
		return b
	}
	// Step 1: child 3 contributes before the deadline, child 4 does not.
	if err := comms[3].Contribute(ctx, 0, Float32s(fill(100)), 2); err != nil {
		t.Fatal(err)
	}
	bufs := [][]float32{fill(1), fill(2), fill(3)}
	// The deadline is each parent's own policy. Rank 0 waits up to a
	// minute, so child 3's contribution (handed to the transport, perhaps
	// not yet read) is on time however loaded the machine; rank 2 gives up
	// on child 4 after 50 ms.
	got := make([]int, 3)
	noErrors(t, each(comms[:3], func(r int, c *Comm) (err error) {
		tr := tree
		tr.Deadline = time.Now().Add(50 * time.Millisecond)
		if r == 0 {
			tr.Deadline = time.Now().Add(time.Minute)
		}
		got[r], err = c.AllReduceTree(ctx, Float32s(bufs[r]), tr)
		return err
	}))
	for r := range bufs {
		for i, v := range bufs[r] {
			if want := float32(106) + 4*float32(i%7); v != want {
				t.Fatalf("step 1 rank %d elem %d = %v want %v", r, i, v, want)
			}
		}
	}
	if got[0] != 1 || got[2] != 0 {
		t.Fatalf("collected %v, want child 3 at rank 0 and nothing at rank 2", got)
	}
	// Child 4's late contribution is folded at step 2, where it is a must.
	go func() { _ = comms[4].Contribute(ctx, 2, Float32s(fill(1000)), 4) }()
	tree.Edges[1].Must = true
	tree.Deadline = time.Time{}
	bufs = [][]float32{fill(1), fill(2), fill(3)}
	noErrors(t, each(comms[:3], func(r int, c *Comm) (err error) {
		got[r], err = c.AllReduceTree(ctx, Float32s(bufs[r]), tree)
		return err
	}))
	for r := range bufs {
		for i, v := range bufs[r] {
			if want := float32(1006) + 4*float32(i%7); v != want {
				t.Fatalf("step 2 rank %d elem %d = %v want %v", r, i, v, want)
			}
		}
	}
}

// Every tree program passes plan.Simulate: contributions posted by the
// children are folded exactly once, and those that missed the deadline
// are left for the next call.
func TestTreeProgramsSimulate(t *testing.T) {
	const n, count = 6, 37
	members := []int{0, 2, 3, 5}
	edges := map[int]int{1: 0, 4: 0} // child → parent
	progs := make([]*plan.Program, n)
	for r := range n {
		if p, ok := edges[r]; ok {
			progs[r] = &plan.Program{Algorithm: "post", Rank: r, World: n, DataLen: count,
				Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Post, Peer: p, Buf: plan.Data, Len: count}}}}}}}
			continue
		}
		s := algo.Spec{Collective: wire.AllReduceTree, Rank: r, World: n, Members: members, Count: count, ElemSize: 4}
		for c, p := range edges {
			if p == r {
				s.Children = append(s.Children, algo.Child{Rank: c, Must: c == 4})
			}
		}
		for _, small := range []int{0} {
			p, err := algo.Choose(s, algo.Tunables{SmallBytes: small, Channels: 2, ChunkBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			progs[r] = p
		}
	}
	data := make([][]float64, n)
	want := make([]float64, count)
	for r := range data {
		data[r] = make([]float64, count)
		for i := range data[r] {
			data[r][i] = float64(r*100 + i)
			want[i] += data[r][i]
		}
	}
	left, err := plan.SimulateEager(progs, data, nil, plan.SimSum)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d contributions left uncollected", len(left))
	}
	for _, m := range members {
		for i, v := range data[m] {
			if v != want[i] {
				t.Fatalf("member %d elem %d = %v want %v", m, i, v, want[i])
			}
		}
	}
}
