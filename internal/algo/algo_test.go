package algo

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/cost"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Choose runs AllToAll as the pairwise exchange, even or with the split
// sizes given, and every rank's programs together move rank r's block for
// rank q into rank q's block from r.
func TestChooseAllToAllIsPairwise(t *testing.T) {
	const n = 4
	tun := Tunables{SmallBytes: 16, Channels: 2, ChunkBytes: 1 << 10}
	counts := [n][n]int{{1, 0, 3, 9}, {2, 2, 0, 0}, {5, 1, 1, 7}, {0, 0, 4, 4}} // counts[from][to]
	for _, even := range []bool{true, false} {
		progs := make([]*plan.Program, n)
		data, input := make([][]float64, n), make([][]float64, n)
		for r := range n {
			s := Spec{Collective: wire.AllToAll, Rank: r, World: n, Count: 3, ElemSize: 4}
			if !even {
				s.SendCounts, s.RecvCounts = make([]int, n), make([]int, n)
				for q := range n {
					s.SendCounts[q], s.RecvCounts[q] = counts[r][q], counts[q][r]
				}
			}
			p, err := Choose(s, tun)
			if err != nil {
				t.Fatal(err)
			}
			if p.Algorithm != "pairwise" {
				t.Fatalf("algorithm %q", p.Algorithm)
			}
			progs[r] = p
			input[r] = make([]float64, p.InputLen)
			for i := range input[r] {
				input[r][i] = float64(1000*r + i)
			}
			data[r] = make([]float64, p.DataLen)
		}
		if err := plan.Simulate(progs, data, input, plan.SimSum); err != nil {
			t.Fatal(err)
		}
		for q := range n {
			var want []float64
			for r := range n {
				off, c := 3*q, 3
				if !even {
					off, c = 0, counts[r][q]
					for p := range q {
						off += counts[r][p]
					}
				}
				for i := range c {
					want = append(want, float64(1000*r+off+i))
				}
			}
			if fmt.Sprint(want) != fmt.Sprint(data[q]) {
				t.Fatalf("even=%t: rank %d got %v want %v", even, q, data[q], want)
			}
		}
	}
	if _, err := Choose(Spec{Collective: wire.AllToAll, Rank: 0, World: 4, Members: []int{0, 1}, Count: 1, ElemSize: 4}, tun); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("AllToAll among members: %v, want ErrUnsupported", err)
	}
}

// A world ring in host order (Tunables.Order) changes which peers each
// rank talks to, never the results: every collective over the world and
// an allreduce among some members, whose ring follows the same order,
// give what rank order gives; the programs' neighbours follow the order.
func TestChooseFollowsTheWorldRingOrder(t *testing.T) {
	const n = 6
	order := []int{0, 2, 4, 1, 3, 5} // hosts a:{0,2,4} b:{1,3,5}, placed round robin
	for _, c := range []struct {
		coll    wire.Collective
		count   int
		members []int
	}{
		{wire.AllReduce, 60, nil}, {wire.AllReduce, 2, nil}, {wire.AllGather, 5, nil},
		{wire.ReduceScatter, 5, nil}, {wire.Broadcast, 40, nil}, {wire.AllToAll, 3, nil},
		{wire.AllReduce, 60, []int{5, 0, 1, 4}},
	} {
		results := make([][][]float64, 2)
		for v, o := range [][]int{nil, order} {
			tun := Tunables{SmallBytes: 16, Channels: 2, ChunkBytes: 64, Order: o}
			progs := make([]*plan.Program, n)
			data, input := make([][]float64, n), make([][]float64, n)
			for r := range n {
				s := Spec{Collective: c.coll, Rank: r, World: n, Count: c.count, ElemSize: 4, Root: 3, Members: c.members}
				if c.members != nil && !slices.Contains(c.members, r) {
					continue
				}
				p, err := Choose(s, tun)
				if err != nil {
					t.Fatalf("%v: %v", c.coll, err)
				}
				progs[r] = p
				input[r] = make([]float64, p.InputLen)
				data[r] = make([]float64, p.DataLen)
				for i := range data[r] {
					data[r][i] = float64(100*r + i)
				}
				for i := range input[r] {
					input[r][i] = float64(1000*r + i)
				}
			}
			for r := range n { // a non-member runs nothing
				if progs[r] == nil {
					progs[r] = &plan.Program{Rank: r, World: n}
				}
			}
			if err := plan.Simulate(progs, data, input, plan.SimSum); err != nil {
				t.Fatalf("%v order %v: %v", c.coll, o, err)
			}
			results[v] = data
			if o != nil && c.members == nil && c.coll == wire.AllReduce && c.count > 16 {
				right := peers(progs[0], plan.Send)
				if !slices.Equal(right, []int{2}) {
					t.Fatalf("rank 0 sends to %v in the host-ordered ring, want [2]", right)
				}
			}
		}
		if fmt.Sprint(results[0]) != fmt.Sprint(results[1]) {
			t.Fatalf("%v members %v: rank order gives %v, host order %v", c.coll, c.members, results[0], results[1])
		}
	}
}

// peers returns the distinct peers of a program's ops of one kind.
func peers(p *plan.Program, kind plan.OpKind) []int {
	var out []int
	for _, ch := range p.Channels {
		for _, st := range ch.Steps {
			for _, op := range st.Ops {
				if op.Kind == kind && !slices.Contains(out, op.Peer) {
					out = append(out, op.Peer)
				}
			}
		}
	}
	return out
}

// AllReduceLate takes the late-rank ring with the late rank from Root,
// in units between cost.LateMinBytes and cost.LateMaxBytes, and refuses a late rank
// outside the world.
func TestChooseAllReduceLate(t *testing.T) {
	tun := Tunables{SmallBytes: 4 << 10, Channels: 1, ChunkBytes: 1 << 20}
	for _, tc := range []struct {
		world, count, esize int
		wantChunk           int // elements
	}{
		{4, 10, 4, cost.LateMinBytes / 4},            // tiny: one unit
		{4, 16 << 20 / 4, 4, cost.LateMaxBytes / 4},  // 16 MiB: capped
		{8, 16 << 20 / 4, 4, (16<<20/4/7 + 15) / 16}, // a sixteenth of a segment
		{8, 16 << 20 / 2, 2, (16<<20/2/7 + 15) / 16}, // in elements of the type
	} {
		s := Spec{Collective: wire.AllReduceLate, World: tc.world, Rank: 1, Root: 2, Count: tc.count, ElemSize: tc.esize}
		if got := lateChunk(s, tun); got != tc.wantChunk {
			t.Errorf("%+v: chunk %d, want %d", tc, got, tc.wantChunk)
		}
		p, err := Choose(s, tun)
		if err != nil {
			t.Fatal(err)
		}
		if p.Algorithm != "ring-late" {
			t.Errorf("%+v: algorithm %q", tc, p.Algorithm)
		}
		// Rank 2 is late: it sends and receives only in the completion.
		s.Rank = 2
		lp, err := Choose(s, tun)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range lp.Channels[0].Steps {
			for _, o := range st.Ops {
				if o.Kind == plan.RecvReduce {
					t.Fatalf("the late rank folds: %v", o)
				}
			}
		}
	}
	if got := lateChunk(Spec{World: 4, Count: 1 << 30, ElemSize: 4}, Tunables{Channels: 1, ChunkBytes: 64 << 10}); got != 16<<10 {
		t.Errorf("a smaller ChunkBytes caps the unit: %d elements", got)
	}
	for _, late := range []int{-1, 4} {
		if _, err := Choose(Spec{Collective: wire.AllReduceLate, World: 4, Rank: 0, Root: late, Count: 8, ElemSize: 4}, tun); err == nil {
			t.Errorf("late rank %d accepted", late)
		}
	}
}

// With pieces "always" on shared memory, an AllReduce larger than
// PieceBytes runs in pieces of at most PieceBytes (in elements of the
// call's type), one at or below it runs as the plain ring, and a parent
// tree's program (general path) never takes pieces.
func TestPiecesOnlyLargeAllReduces(t *testing.T) {
	tun := Tunables{SmallBytes: 64, Channels: 1, ChunkBytes: 1 << 10, PieceBytes: 400}
	pl, err := NewPlanner(Config{Tunables: tun, Pieces: "always"}, Facts{World: 4, Fast: true, FastboxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		count, esize int
		want         string
		maxLen       int // the longest message: a piece's segment
	}{
		{count: 100, esize: 4, want: "ring", maxLen: 25},
		{count: 101, esize: 4, want: "ring-pieces", maxLen: 25},
		{count: 1000, esize: 2, want: "ring-pieces", maxLen: 50},
		{count: 10, esize: 4, want: "recursive-doubling"},
	} {
		s := Spec{Collective: wire.AllReduce, Rank: 1, World: 4, Count: c.count, ElemSize: c.esize}
		p, err := pl.Program(s, pl.Decide(&s).Choice)
		if err != nil {
			t.Fatal(err)
		}
		if p.Algorithm != c.want || !p.Fast {
			t.Fatalf("%d×%d bytes: %q (fastbox path %t), want %q on the fastbox path", c.count, c.esize, p.Algorithm, p.Fast, c.want)
		}
		if c.maxLen > 0 && p.LargestMessage() != c.maxLen {
			t.Fatalf("%d×%d bytes: longest message %d elements, want %d", c.count, c.esize, p.LargestMessage(), c.maxLen)
		}
	}
	s := Spec{Collective: wire.AllReduceTree, Rank: 1, World: 4, Members: []int{0, 1, 2}, Count: 1000, ElemSize: 4,
		Children: []Child{{Rank: 3}}}
	p, err := pl.Program(s, pl.Decide(&s).Choice)
	if err != nil {
		t.Fatal(err)
	}
	if p.Algorithm != "collect+ring" || p.Fast {
		t.Fatalf("parent tree: %q (fastbox path %t), want collect+ring on the general path", p.Algorithm, p.Fast)
	}
}
