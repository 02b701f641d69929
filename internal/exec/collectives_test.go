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
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// subgroup is the Group of a member-list call (any value but wire.World
// names a subgroup; each member list has its own).
func subgroup(members []int) uint32 {
	g := uint32(1)
	for _, m := range members {
		g = g*16 + uint32(m) + 1
	}
	return g
}

// call is one collective as every rank makes it, checked against the
// sequential reference.
type call struct {
	name string
	spec algo.Spec // Collective, Count, Members, Root, Peer, counts; Rank, World and Avg are filled in
	algo string    // the algorithm the builders must pick (a check that the case tests what it says)
}

// reduces reports whether the collective reduces (takes an operator).
func (c call) reduces() bool {
	switch c.spec.Collective {
	case wire.AllReduce, wire.ReduceScatter, wire.AllReduceTree:
		return true
	}
	return false
}

// ops are the operators the call is checked with: every reduction, or
// the one a barrier runs with (Sum, on no data), or none.
func (c call) ops(all []reduce.Op) []reduce.Op {
	switch {
	case c.reduces():
		return all
	case c.spec.Collective == wire.Barrier:
		return []reduce.Op{reduce.Sum}
	}
	return []reduce.Op{0}
}

// ranks are the ranks that take part in the call.
func (c call) ranks(n int) []int {
	switch {
	case c.spec.Members != nil:
		return slices.Sorted(slices.Values(c.spec.Members))
	case c.spec.Collective == wire.PointToPoint:
		return []int{c.spec.Root, c.spec.Peer} // Root is the sender here
	}
	out := make([]int, n)
	for r := range out {
		out[r] = r
	}
	return out
}

// bufs returns rank r's Data and Input (element counts) and their
// contents, and the Data every rank must hold after the call (by rank).
func (c call) buffers(n int, op reduce.Op) (data, input map[int][]float64, want map[int][]float64) {
	sp := c.spec
	data, input, want = map[int][]float64{}, map[int][]float64{}, map[int][]float64{}
	ranks := c.ranks(n)
	k := len(ranks)
	gen := func(m int, f func(i int) float64) []float64 {
		v := make([]float64, m)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	switch sp.Collective {
	case wire.AllReduce, wire.AllReduceTree:
		var ins [][]float64
		for pos, r := range ranks {
			data[r] = gen(sp.Count, func(i int) float64 { return contribution(op, pos, k, i) })
			ins = append(ins, data[r])
		}
		ref := reference(op, ins)
		for _, r := range ranks {
			want[r] = ref
		}
	case wire.Barrier:
		for _, r := range ranks {
			data[r], want[r] = []float64{}, []float64{}
		}
	case wire.ReduceScatter:
		var ins [][]float64
		for _, r := range ranks {
			input[r] = gen(n*sp.Count, func(i int) float64 { return contribution(op, r, n, i) })
			data[r] = make([]float64, sp.Count)
			ins = append(ins, input[r])
		}
		ref := reference(op, ins)
		for _, r := range ranks {
			want[r] = ref[r*sp.Count : (r+1)*sp.Count]
		}
	case wire.AllGather:
		var all []float64
		for _, r := range ranks {
			input[r] = gen(sp.Count, func(i int) float64 { return pattern(r, i) })
			data[r] = make([]float64, n*sp.Count)
			all = append(all, input[r]...)
		}
		for _, r := range ranks {
			want[r] = all
		}
	case wire.Broadcast:
		for _, r := range ranks {
			data[r] = gen(sp.Count, func(i int) float64 { return pattern(r, i) })
		}
		for _, r := range ranks {
			want[r] = data[sp.Root]
		}
	case wire.PointToPoint:
		from, to := sp.Root, sp.Peer
		data[from] = gen(sp.Count, func(i int) float64 { return pattern(from, i) })
		data[to] = make([]float64, sp.Count)
		want[from], want[to] = data[from], data[from]
	case wire.AllToAll:
		count := func(from, to int) int {
			if sp.SendCounts == nil {
				return sp.Count
			}
			return (from+2*to)%4 + 1
		}
		// Element j of the block from rank f to rank t.
		elem := func(f, t, j int) float64 { return pattern(f, 13*t+j) }
		for _, r := range ranks {
			var in, out []float64
			for q := 0; q < n; q++ {
				for j := 0; j < count(r, q); j++ {
					in = append(in, elem(r, q, j))
				}
				for j := 0; j < count(q, r); j++ {
					out = append(out, elem(q, r, j))
				}
			}
			input[r], data[r], want[r] = in, make([]float64, len(out)), out
		}
	}
	return data, input, want
}

// specFor is the call's Spec for rank r (a point-to-point call's ends
// differ).
func (c call) specFor(r int, dt reduce.DType, op reduce.Op, n int) algo.Spec {
	sp := c.spec
	sp.Avg, sp.ElemSize = op == reduce.Avg, dt.Size()
	if sp.Collective == wire.PointToPoint {
		from, to := sp.Root, sp.Peer
		sp.Root, sp.Send = 0, r == from
		sp.Peer = from
		if r == from {
			sp.Peer = to
		}
	}
	if sp.Collective == wire.AllToAll && sp.SendCounts != nil {
		sp.SendCounts, sp.RecvCounts = make([]int, n), make([]int, n)
		for q := 0; q < n; q++ {
			sp.SendCounts[q], sp.RecvCounts[q] = (r+2*q)%4+1, (q+2*r)%4+1
		}
	}
	return sp
}

// desc is the call's Desc (before its call number).
func (c call) desc(dt reduce.DType, op reduce.Op) wire.Desc {
	sp := c.spec
	d := wire.Desc{Collective: sp.Collective, DType: uint8(dt), RedOp: uint8(op), Root: uint32(sp.Root), Count: uint64(sp.Count)}
	switch {
	case sp.Members != nil:
		d.Group = subgroup(sp.Members)
	case sp.Collective == wire.PointToPoint:
		d.Group, d.Root = uint32(0x100+sp.Root<<4+sp.Peer), 0
	}
	return d
}

// check runs the call with dt and op on cluster cl and compares every
// rank's result with the reference.
func (c call) check(t *testing.T, cl *cluster, dt reduce.DType, op reduce.Op) {
	t.Helper()
	data, input, want := c.buffers(cl.n, op)
	ranks := c.ranks(cl.n)
	progs := map[int]*plan.Program{}
	calls := map[int]*Call{}
	for _, r := range ranks {
		p := cl.program(c.specFor(r, dt, op, cl.n), r)
		if c.algo != "" && p.Algorithm != c.algo {
			t.Fatalf("rank %d runs %q, the case is about %q", r, p.Algorithm, c.algo)
		}
		progs[r] = p
		calls[r] = &Call{Desc: cl.next(r, c.desc(dt, op)), DType: dt, Op: op, Data: encode(dt, data[r]), Input: encode(dt, input[r])}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := cl.each(ranks, func(r int) error { return cl.run(ctx, r, 0, progs[r], calls[r]) })
	for _, r := range ranks {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		got := decode(dt, calls[r].Data)
		if i := firstDiff(got, want[r]); i >= 0 {
			g, w := "none", "none"
			if i < len(got) {
				g = fmt.Sprint(got[i])
			}
			if i < len(want[r]) {
				w = fmt.Sprint(want[r][i])
			}
			t.Fatalf("rank %d: element %d of %d is %s, want %s", r, i, len(want[r]), g, w)
		}
	}
}

// collectives are every program kind the builders make, sized so that
// algo.Choose picks the algorithm named (cluster tunables: SmallBytes 256,
// ChunkBytes 512, two channels), over five ranks.
func collectives() []call {
	return []call{
		{"ring allreduce", algo.Spec{Collective: wire.AllReduce, Count: 1001}, "ring"},
		{"recursive doubling", algo.Spec{Collective: wire.AllReduce, Count: 31}, "recursive-doubling"},
		{"ring among members", algo.Spec{Collective: wire.AllReduce, Count: 700, Members: []int{3, 0, 4}}, "ring"},
		{"recursive doubling among members", algo.Spec{Collective: wire.AllReduce, Count: 9, Members: []int{4, 1, 2}}, "recursive-doubling"},
		{"reduce-scatter", algo.Spec{Collective: wire.ReduceScatter, Count: 41}, "ring"},
		{"collect+ring without children", algo.Spec{Collective: wire.AllReduceTree, Count: 600}, "collect+ring"},
		{"allgather", algo.Spec{Collective: wire.AllGather, Count: 41}, "ring"},
		{"chain broadcast", algo.Spec{Collective: wire.Broadcast, Count: 1001, Root: 2}, "chain"},
		{"binomial broadcast", algo.Spec{Collective: wire.Broadcast, Count: 31, Root: 3}, "binomial"},
		{"barrier", algo.Spec{Collective: wire.Barrier}, "recursive-doubling"},
		{"point-to-point", algo.Spec{Collective: wire.PointToPoint, Count: 100, Root: 4, Peer: 1}, "p2p"},
		{"all-to-all", algo.Spec{Collective: wire.AllToAll, Count: 40}, "pairwise"},
		{"uneven all-to-all", algo.Spec{Collective: wire.AllToAll, SendCounts: []int{}}, "pairwise"},
	}
}

// Every program kind the builders make, with every element type and every
// reduction, run by the executor over the in-memory transport, equals the
// sequential reference on every rank. The world's ring is not in rank
// order (as when ranks are ordered by host).
func TestEveryProgramEveryTypeEqualsTheSequentialReference(t *testing.T) {
	cl := newCluster(t, 5, clusterOpts{})
	cl.tun.Order = []int{3, 1, 4, 0, 2} // the world's ring in host order, not rank order
	for _, c := range collectives() {
		t.Run(c.name, func(t *testing.T) {
			for _, dt := range dtypes {
				for _, op := range c.ops(redOps) {
					c.check(t, cl, dt, op)
				}
			}
		})
	}
}

// The same programs over shared memory with the fastbox path enabled:
// messages up to a fastbox run synchronously on the fastboxes, larger ones
// on the general path through the shared-memory rings (folded in place).
func TestEveryProgramOnFastboxesEqualsTheSequentialReference(t *testing.T) {
	cl := newCluster(t, 3, clusterOpts{shm: true, fast: true})
	for _, c := range collectives() {
		if c.spec.Members != nil && slices.Max(c.spec.Members) >= 3 {
			c.spec.Members = []int{2, 0}
		}
		if c.spec.Collective == wire.PointToPoint {
			c.spec.Root, c.spec.Peer = 2, 0
		}
		if c.spec.Collective == wire.Broadcast {
			c.spec.Root = 1
		}
		t.Run(c.name, func(t *testing.T) {
			for _, dt := range []reduce.DType{reduce.Float32, reduce.Float16, reduce.Int64} {
				for _, op := range c.ops([]reduce.Op{reduce.Sum, reduce.Avg, reduce.Max}) {
					r := c.ranks(cl.n)[0]
					p := cl.program(c.specFor(r, dt, op, cl.n), r)
					fast := p.Fast
					if want := c.spec.Collective != wire.AllReduceTree; fast != want {
						t.Fatalf("fastbox path %v, want %v", fast, want)
					}
					c.check(t, cl, dt, op)
				}
			}
		})
	}
	t.Run("messages larger than a fastbox", func(t *testing.T) {
		cl := newCluster(t, 2, clusterOpts{shm: true, fast: true, chunk: 256 << 10, channels: 1})
		c := call{"ring allreduce of 1.2 MB", algo.Spec{Collective: wire.AllReduce, Count: 300_000}, "ring"}
		p := cl.program(c.specFor(0, reduce.Float32, reduce.Sum, cl.n), 0)
		if p.Fast {
			t.Fatal("a program with messages larger than a fastbox was put on the fastbox path")
		}
		c.check(t, cl, reduce.Float32, reduce.Sum)
		p.Fast = true // told otherwise, the executor refuses it
		if _, err := cl.execs[0].fastProgram(p, &Call{DType: reduce.Float32}); err == nil || !strings.Contains(err.Error(), "exceeds a fastbox") {
			t.Fatalf("a program with messages larger than a fastbox on the fastbox path: %v", err)
		}
	})
}

// A world of one has no mesh: the executor runs local operations only.
func TestAWorldOfOneRunsLocally(t *testing.T) {
	ex, err := New(nil, 512)
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Program{Algorithm: "local", World: 1, DataLen: 4, InputLen: 4, ScratchLen: 4, Channels: []plan.Channel{{Steps: []plan.Step{
		{Ops: []plan.Op{{Kind: plan.Copy, Buf: plan.Scratch, Src: plan.Input, Len: 4}}},
		{Ops: []plan.Op{{Kind: plan.Reduce, Buf: plan.Data, Src: plan.Scratch, Len: 4}, {Kind: plan.Scale, Buf: plan.Data, Off: 1, Len: 2, Div: 2}}},
	}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	call := &Call{DType: reduce.Int32, Op: reduce.Sum, Data: encode(reduce.Int32, []float64{1, 2, 3, 4}), Input: encode(reduce.Int32, []float64{10, 20, 30, 40})}
	if err := ex.Run(context.Background(), time.Second, p, call); err != nil {
		t.Fatal(err)
	}
	if got := decode(reduce.Int32, call.Data); !slices.Equal(got, []float64{11, 11, 16, 44}) {
		t.Fatalf("got %v", got)
	}
	if _, err := New(nil, 0); err == nil {
		t.Fatal("an executor with chunks of 0 bytes")
	}
	call.Data = call.Data[:8]
	if err := ex.Run(context.Background(), 0, p, call); err == nil {
		t.Fatal("a program of 4 elements ran on a buffer of 2")
	}
	bad := &plan.Program{World: 1, DataLen: 4, Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Scale, Buf: plan.Data, Len: 4, Div: 2}}}}}}}
	if err := ex.Run(context.Background(), 0, bad, &Call{DType: 99, Data: make([]byte, 16)}); err == nil {
		t.Fatal("a scale of an unknown element type succeeded")
	}
}

// phaseLog is a Tracer that records what the executor reports.
type phaseLog struct {
	phases  []plan.Phase
	arrived int
}

func (l *phaseLog) Begin(CallInfo)      {}
func (l *phaseLog) End(error)           {}
func (l *phaseLog) Arrived()            { l.arrived++ }
func (l *phaseLog) Phase(ph plan.Phase) { l.phases = append(l.phases, ph) }
func (l *phaseLog) reset()              { l.phases, l.arrived = nil, 0 }

// A Tracer hears, on both paths, each phase change of channel 0 once and
// the first data from a peer once per call.
func TestATracerHearsPhasesAndTheFirstArrival(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			cl := newCluster(t, 4, path.opts) // a power of two: recursive doubling is exchanges only
			logs := make([]*phaseLog, cl.n)
			for r := range logs {
				logs[r] = &phaseLog{}
				cl.execs[r].SetTracer(logs[r])
			}
			for _, c := range []struct {
				call
				phases []plan.Phase
			}{
				{call{"ring", algo.Spec{Collective: wire.AllReduce, Count: 1001}, "ring"}, []plan.Phase{plan.PhaseReduceScatter, plan.PhaseAllGather}},
				{call{"recursive doubling", algo.Spec{Collective: wire.AllReduce, Count: 31}, "recursive-doubling"}, []plan.Phase{plan.PhaseExchange, plan.PhaseNone}}, // the final fold is unlabelled
			} {
				for _, l := range logs {
					l.reset()
				}
				c.check(t, cl, reduce.Float32, reduce.Sum)
				for r, l := range logs {
					if !slices.Equal(l.phases, c.phases) || l.arrived != 1 {
						t.Fatalf("%s, rank %d: phases %v, %d arrivals; want %v and 1", c.name, r, l.phases, l.arrived, c.phases)
					}
				}
			}
		})
	}
}
