package algo

import (
	"errors"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// hostsOf places n ranks on hosts of per ranks each (block placement).
func hostsOf(n, per int) []int {
	h := make([]int, n)
	for r := range h {
		h[r] = r / per
	}
	return h
}

// drive runs calls large AllReduces of bytes bytes of the world through
// p as the engine would: each candidate costing perByte[kind] ns per
// byte, the agreement being this rank's own report. It returns the kind
// of each call and stops at a probe (returning true).
func drive(p *Planner, bytes, calls int, perByte map[Kind]float64) (ran []Kind, probed bool) {
	s := Spec{Collective: wire.AllReduce, Count: bytes / 4, ElemSize: 4}
	for range calls {
		d := p.Decide(&s)
		if d.Probe {
			return ran, true
		}
		ran = append(ran, d.Choice.Kind)
		if d.Timed {
			p.Observe(bytes, time.Duration(perByte[d.Choice.Kind]*float64(bytes)))
		}
		if d.Agree {
			p.Agreed(bytes, p.Report(bytes))
		}
	}
	return ran, false
}

// Across two hosts of two ranks the candidates are the two-level
// allreduce, which the model prices first (each host's link carries the
// buffer once where the ring carries it 1.5 times), and the ring; the
// Tuner measures both and keeps the faster, whichever that is.
func TestAcrossHostsTheTwoLevelAllReduceIsPricedFirstAndMeasured(t *testing.T) {
	const bytes = 64 << 20
	for _, tc := range []struct {
		name string
		cost map[Kind]float64
		want Kind
	}{
		{"two-level faster", map[Kind]float64{KindRing: 12, KindTwoLevel: 8}, KindTwoLevel},
		{"ring faster", map[Kind]float64{KindRing: 8, KindTwoLevel: 12}, KindRing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlanner(Config{Tunables: Tunables{SmallBytes: 64 << 10, Channels: 1, ChunkBytes: 1 << 20}},
				Facts{World: 4, Host: hostsOf(4, 2), Net: DefaultNet()})
			if err != nil {
				t.Fatal(err)
			}
			ran, probed := drive(p, bytes, 200, tc.cost)
			if probed {
				t.Fatal("two hosts of two ranks asked for a link probe: no rank can be offloaded")
			}
			if ran[0] != KindTwoLevel {
				t.Fatalf("the first call ran %v, want the model's choice, two-level", ran[0])
			}
			last := ran[len(ran)-20:]
			n := 0
			for _, k := range last {
				if k == tc.want {
					n++
				}
			}
			if n < len(last)-tuneProbe {
				t.Fatalf("the last calls ran %v, want %v (with at most one probe)", last, tc.want)
			}
			if why := p.Why(bytes); why == "" || why == "not decided yet" {
				t.Fatalf("Why says %q", why)
			}
		})
	}
}

// Across four hosts of one rank each, the first large call asks for the
// links to be measured; with rank 2's link at a fifth of the others' the
// offload of rank 2 is priced first, and measured against the ring; when
// the links are measured again and all alike, the offload is no longer a
// candidate and the ring runs. A drift of the time in use asks for the
// links again.
func TestASlowLinkIsOffloadedOnceMeasured(t *testing.T) {
	const bytes, n = 64 << 20, 4
	p, err := NewPlanner(Config{Tunables: Tunables{SmallBytes: 64 << 10, Channels: 1, ChunkBytes: 1 << 20}},
		Facts{World: n, Host: hostsOf(n, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, probed := drive(p, bytes, 1, nil); !probed {
		t.Fatal("the first large call across 4 hosts did not ask for the links")
	}
	matrix := func(slow int, rate float64) [][]float64 {
		bw := make([][]float64, n)
		for a := range bw {
			bw[a] = make([]float64, n)
			for b := range bw[a] {
				if a != b {
					bw[a][b] = 125e6
					if a == slow || b == slow {
						bw[a][b] = rate
					}
				}
			}
		}
		return bw
	}
	p.Measured(matrix(2, 25e6), nil, 0)
	s := Spec{Collective: wire.AllReduce, Count: bytes / 4, ElemSize: 4}
	d := p.Decide(&s)
	if d.Choice.Kind != KindOffload || d.Choice.Slow != 2 || d.Choice.Rounds < 2 {
		t.Fatalf("with rank 2's link slow the first call runs %v, want rank 2 offloaded", d.Choice)
	}
	ran, _ := drive(p, bytes, 100, map[Kind]float64{KindRing: 30, KindOffload: 20})
	if ran[len(ran)-1] != KindOffload {
		t.Fatalf("the offload measured faster, yet the last call ran %v", ran[len(ran)-1])
	}
	p.Measured(matrix(2, 125e6), nil, 0)
	if d := p.Decide(&s); d.Choice.Kind != KindRing || d.Tuned() {
		t.Fatalf("with every link alike the call runs %v (tuned %t), want the ring alone", d.Choice, d.Tuned())
	}
	// The ring's time drifts (a link slowed): the links are measured again.
	p.Measured(matrix(2, 25e6), nil, 0)
	ran, probed := drive(p, bytes, 60, map[Kind]float64{KindRing: 20, KindOffload: 30})
	if probed {
		t.Fatalf("asked for the links without a drift, after %v", ran)
	}
	if ran, probed = drive(p, bytes, 100, map[Kind]float64{KindRing: 90, KindOffload: 30}); !probed {
		t.Fatalf("the ring's time tripled and the links were not measured again: %v", ran)
	}
}

// A program set by the configuration runs where it applies, and the ring
// where it does not, without measuring.
func TestAConfiguredProgramRunsWhereItApplies(t *testing.T) {
	tun := Tunables{SmallBytes: 64, Channels: 1, ChunkBytes: 1 << 20, PieceBytes: 1 << 16}
	for _, tc := range []struct {
		program Kind
		facts   Facts
		want    Kind
	}{
		{KindTwoLevel, Facts{World: 4, Host: hostsOf(4, 2)}, KindTwoLevel},
		{KindTwoLevel, Facts{World: 4, Fast: true, FastboxBytes: 1 << 20}, KindRing},
		{KindRing, Facts{World: 4, Host: hostsOf(4, 2)}, KindRing},
		{KindPieces, Facts{World: 4, Fast: true, FastboxBytes: 1 << 20}, KindPieces},
		{KindOffload, Facts{World: 3, Host: hostsOf(3, 1), Measured: true}, KindOffload},
	} {
		p, err := NewPlanner(Config{Tunables: tun, Program: tc.program}, tc.facts)
		if err != nil {
			t.Fatal(err)
		}
		s := Spec{Collective: wire.AllReduce, Count: 1 << 20, ElemSize: 4}
		d := p.Decide(&s)
		if d.Choice.Kind != tc.want || d.Tuned() || d.Probe {
			t.Fatalf("%v set, facts %+v: %+v, want %v untuned", tc.program, tc.facts, d, tc.want)
		}
		s.Rank, s.World = 0, tc.facts.World
		if _, err := p.Program(s, d.Choice); err != nil {
			t.Fatalf("%v: %v", tc.want, err)
		}
	}
}

// A program set by the configuration that can never run on the ranks'
// facts is refused (CheckProgram, as NCCL refuses an unusable
// NCCL_ALGO); one that runs at some sizes is not, and a call of a size
// it skips says so (SetProgramSkipped).
func TestAProgramThatCannotRunIsRefused(t *testing.T) {
	tun := Tunables{SmallBytes: 64, Channels: 1, ChunkBytes: 1 << 20, PieceBytes: 1 << 16}
	off := tun
	off.PieceBytes = 0
	oneHost := Facts{World: 4, Fast: true, FastboxBytes: 1 << 20}
	for _, tc := range []struct {
		program Kind
		tun     Tunables
		facts   Facts
		refused bool
	}{
		{KindTwoLevel, tun, oneHost, true},
		{KindTwoLevel, tun, Facts{World: 5, Host: []int{0, 0, 0, 1, 1}}, true},
		{KindTwoLevel, tun, Facts{World: 4, Host: hostsOf(4, 2)}, false},
		{KindOffload, tun, oneHost, true},
		{KindOffload, tun, Facts{World: 4, Host: hostsOf(4, 2)}, true},
		{KindOffload, tun, Facts{World: 3, Host: hostsOf(3, 1)}, false},
		{KindPieces, off, oneHost, true},
		{KindPieces, tun, oneHost, false},
		{KindRing, tun, oneHost, false},
		{KindDefault, off, oneHost, false},
	} {
		p, err := NewPlanner(Config{Tunables: tc.tun, Program: tc.program}, tc.facts)
		if err != nil {
			t.Fatal(err)
		}
		err = p.CheckProgram()
		if got := errors.Is(err, ErrProgramCannotRun); got != tc.refused {
			t.Errorf("%v on %+v: CheckProgram = %v, want refused %t", tc.program, tc.facts, err, tc.refused)
		}
	}
	p, err := NewPlanner(Config{Tunables: tun, Program: KindPieces}, oneHost)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		count   int
		skipped bool
	}{{8, false}, {1 << 10, true}, {1 << 20, false}} { // small: not the program's; one piece: the ring; larger: pieces
		s := Spec{Collective: wire.AllReduce, Count: tc.count, ElemSize: 4}
		d := p.Decide(&s)
		if got := p.SetProgramSkipped(&s, d.Choice); got != tc.skipped {
			t.Errorf("ring-pieces set, %d B run %v: skipped %t, want %t", s.Bytes(), d.Choice, got, tc.skipped)
		}
	}
}

// Three candidates: each runs a first window in the given order, the
// fastest is kept, and the others are probed in turn.
func TestTunerChoosesAmongThreeCandidates(t *testing.T) {
	const bytes = 1 << 24
	var tu Tuner
	tu.Reset(bytes, 3)
	cost := []float64{3, 2, 1}
	var ran []int
	for range 3000 {
		st := tu.Next(bytes)
		ran = append(ran, st.Variant)
		if st.Timed {
			tu.Observe(bytes, time.Duration(cost[st.Variant]*bytes))
		}
		if st.Agree {
			tu.Agreed(bytes, tu.Report(bytes))
		}
	}
	first := 1 + tuneProbe
	for i, want := range []int{0, 1, 2} {
		for _, v := range ran[i*first : (i+1)*first] {
			if v != want {
				t.Fatalf("the first windows ran %v, want each candidate's in turn", ran[:3*first])
			}
		}
	}
	if best, _ := tu.Choice(bytes); best != 2 {
		t.Fatalf("kept candidate %d, want the fastest, 2", best)
	}
	seen := map[int]bool{}
	for _, v := range ran[3*first:] {
		seen[v] = true
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("the slower candidates were not both probed again: %v", seen)
	}
}

func TestParseKindNamesEveryProgram(t *testing.T) {
	for k := KindRing; k <= KindOffload; k++ {
		if got, err := ParseKind(k.String()); err != nil || got != k {
			t.Fatalf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if k, err := ParseKind("auto"); err != nil || k != KindDefault {
		t.Fatalf("auto: %v, %v", k, err)
	}
	if _, err := ParseKind("tree"); err == nil {
		t.Fatal("an unknown program parsed")
	}
}

// On one host with fastboxes, when ranks share CPUs a small allreduce of
// the world folds within each CPU's ranks (cpu-groups), led by the first
// rank of each CPU in ring order; a subgroup's, a larger one's, one of
// ranks not bound to one CPU, or one of two ranks per CPU (where recursive
// doubling measured faster) each takes recursive doubling.
func TestSmallAllReducesGroupRanksByCPU(t *testing.T) {
	tun := Tunables{SmallBytes: 4096, Channels: 1, ChunkBytes: 1 << 20}
	bound := []int{0, 1, 1, 0, 1, 0, 0, 1} // the launcher's binding of 8 ranks on 2 CPUs
	p, err := NewPlanner(Config{Tunables: tun}, Facts{World: 8, Fast: true, FastboxBytes: 1 << 20, CPU: bound})
	if err != nil {
		t.Fatal(err)
	}
	for r, leader := range []int{0, 1, 1, 0, 1, 0, 0, 1} { // CPU 0 led by rank 0, CPU 1 by rank 1
		s := Spec{Collective: wire.AllReduce, Count: 2, ElemSize: 4, Rank: r, World: 8}
		prog, err := p.Program(s, Choice{Kind: KindCPUGroups})
		if err != nil {
			t.Fatal(err)
		}
		if first := prog.Channels[0].Steps[0].Ops[0]; r != leader && (first.Kind != plan.Send || first.Peer != leader) {
			t.Fatalf("rank %d starts with %v, want a send to its CPU's leader %d", r, first, leader)
		}
	}
	for _, tc := range []struct {
		s    Spec
		want Kind
	}{
		{Spec{Collective: wire.AllReduce, Count: 2, ElemSize: 4}, KindCPUGroups},
		{Spec{Collective: wire.AllReduce, Count: 2, ElemSize: 4, Members: []int{0, 5, 2}}, KindDefault},
		{Spec{Collective: wire.AllReduce, Count: 1000, ElemSize: 4}, KindDefault},
		{Spec{Collective: wire.Broadcast, Count: 2, ElemSize: 4}, KindDefault},
	} {
		d := p.Decide(&tc.s)
		if d.Choice.Kind != tc.want {
			t.Fatalf("%+v: %v, want %v", tc.s, d.Choice, tc.want)
		}
		s := tc.s
		s.Rank, s.World = 5, 8
		prog, err := p.Program(s, d.Choice)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == KindCPUGroups && (prog.Algorithm != "cpu-groups" || !prog.Fast) {
			t.Fatalf("%q on the fastbox path %t, want cpu-groups on it", prog.Algorithm, prog.Fast)
		}
	}
	for _, cpu := range [][]int{{0, 1, 1, 0, 1, 0, -1, 1}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 1, 0}} {
		p, err := NewPlanner(Config{Tunables: tun}, Facts{World: len(cpu), Fast: true, FastboxBytes: 1 << 20, CPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		if d := p.Decide(&Spec{Collective: wire.AllReduce, Count: 2, ElemSize: 4}); d.Choice.Kind != KindDefault {
			t.Fatalf("CPUs %v: %v, want recursive doubling", cpu, d.Choice)
		}
	}
}

// Where one stream carries a fifth of what every stream at once does, the
// ring across hosts runs on more channels (as few as the model says are
// enough); where one stream fills the link it runs on the configured one.
func TestStreamsAreUsedWhereOneDoesNotFillTheLink(t *testing.T) {
	const n, bytes = 4, 64 << 20
	bw := make([][]float64, n)
	for a := range bw {
		bw[a] = make([]float64, n)
		for b := range bw[a] {
			if a != b {
				bw[a][b] = 40e6
			}
		}
	}
	for _, tc := range []struct {
		stream float64
		want   int
	}{{8e6, 8}, {0, 0}} {
		p, err := NewPlanner(Config{Tunables: Tunables{SmallBytes: 4096, Channels: 1, ChunkBytes: 1 << 20}},
			Facts{World: n, Host: []int{0, 0, 1, 1}, Streams: 8})
		if err != nil {
			t.Fatal(err)
		}
		s := Spec{Collective: wire.AllReduce, Count: bytes / 4, ElemSize: 4}
		if d := p.Decide(&s); !d.Probe {
			t.Fatalf("with 8 streams across hosts the first call does not ask for the links: %+v", d)
		}
		p.Measured(bw, nil, tc.stream)
		d := p.Decide(&s)
		if d.Choice.Channels != tc.want {
			t.Fatalf("one stream at %g B/s: %v, want %d channels", tc.stream, d.Choice, tc.want)
		}
		s.Rank, s.World = 0, n
		prog, err := p.Program(s, d.Choice)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(prog.Channels); got != max(1, tc.want) {
			t.Fatalf("%v: a program of %d channels", d.Choice, got)
		}
	}
}
