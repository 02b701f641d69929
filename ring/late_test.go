package ring

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

func lateProgs(t *testing.T, order []int, late, count, chunk, chans int, avg bool) []*plan.Program {
	t.Helper()
	n := len(order)
	progs := make([]*plan.Program, n)
	for r := range progs {
		p, err := AllReduceLate(Spec{Order: order, Rank: r, Channels: chans}, late, count, chunk, avg)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		progs[r] = p
	}
	return progs
}

// Every late-rank program, simulated, equals the float64 reference on
// every rank with the same bits: worlds 1..13, every late rank, counts
// below the world size and odd ones, one to three channels, several
// chunk sizes, random ring orders, Sum and Avg.
func TestAllReduceLateEqualsSequentialReference(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	combo := 0
	for n := 1; n <= 13; n++ {
		for late := 0; late < n; late++ {
			for _, count := range []int{0, 1, max(0, n-2), 2*n + 3, 101} {
				combo++
				chans := 1 + combo%3
				chunk := []int{1, 3, 1 << 20}[combo/3%3]
				avg := combo%2 == 0
				order := orders(n, rng)[combo%2]
				name := fmt.Sprintf("n%d/late%d/count%d/ch%d/chunk%d/order%v/avg%v", n, late, count, chans, chunk, order, avg)
				data := make([][]float64, n)
				want := make([]float64, count)
				for r := range data {
					data[r] = make([]float64, count)
					for i := range data[r] {
						data[r][i] = rng.NormFloat64() // not exact: the bits show the order
						want[i] += data[r][i]
					}
				}
				if avg {
					for i := range want {
						want[i] /= float64(n)
					}
				}
				progs := lateProgs(t, order, late, count, chunk, chans, avg)
				if err := plan.Simulate(progs, data, nil, plan.SimSum); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for r := range data {
					for i := range want {
						if math.Abs(data[r][i]-want[i]) > 1e-12*float64(n) {
							t.Fatalf("%s: rank %d elem %d = %v, want %v", name, r, i, data[r][i], want[i])
						}
						if math.Float64bits(data[r][i]) != math.Float64bits(data[0][i]) {
							t.Fatalf("%s: rank %d elem %d = %v, rank 0 has %v", name, r, i, data[r][i], data[0][i])
						}
					}
				}
			}
		}
	}
}

// rendezvous runs the programs with sends that complete only when the
// receiver is at the step that takes them (no buffering at all, stricter
// than any transport), every matched transfer of a round taking one slot.
// late's program starts only once every other rank has finished its steps
// that do not wait for late. It returns the rounds from late's first step
// to the end of every program, and fails on a deadlock.
func rendezvous(progs []*plan.Program, late int) (rounds, lateRounds int, err error) {
	type msg struct{ from, to, ch, seq int }
	n := len(progs)
	// seqs[r][c][s][i]: the link sequence number of op i of step s.
	seqs := make([][][][]int, n)
	for r, p := range progs {
		count := map[msg]int{}
		seqs[r] = make([][][]int, len(p.Channels))
		for c, ch := range p.Channels {
			for _, st := range ch.Steps {
				row := make([]int, len(st.Ops))
				for i, o := range st.Ops {
					k := msg{r, o.Peer, c, 0}
					if o.Kind == plan.Recv || o.Kind == plan.RecvReduce {
						k = msg{o.Peer, r, c, 0}
					}
					if !o.Kind.Local() {
						row[i] = count[k]
						count[k]++
					}
				}
				seqs[r][c] = append(seqs[r][c], row)
			}
		}
	}
	pos := make([][]int, n)
	done := make([][][]bool, n)
	for r, p := range progs {
		pos[r] = make([]int, len(p.Channels))
		done[r] = make([][]bool, len(p.Channels))
	}
	// posted reports whether rank r's current step on channel c holds the
	// op for message k.
	posted := func(r, c int, k msg) bool {
		p := progs[r]
		if pos[r][c] >= len(p.Channels[c].Steps) {
			return false
		}
		for i, o := range p.Channels[c].Steps[pos[r][c]].Ops {
			if done[r][c] != nil && done[r][c][i] || o.Kind.Local() {
				continue
			}
			var ok msg
			if o.Kind == plan.Send {
				ok = msg{r, o.Peer, c, seqs[r][c][pos[r][c]][i]}
			} else {
				ok = msg{o.Peer, r, c, seqs[r][c][pos[r][c]][i]}
			}
			if ok == k {
				return true
			}
		}
		return false
	}
	waitsForLate := func(r, c int) bool {
		for _, o := range progs[r].Channels[c].Steps[pos[r][c]].Ops {
			if !o.Kind.Local() && o.Peer == late {
				return true
			}
		}
		return false
	}
	lateStarted := false
	for round := 0; ; round++ {
		if !lateStarted {
			lateStarted = true
			for r := range progs {
				for c := range progs[r].Channels {
					if r != late && pos[r][c] < len(progs[r].Channels[c].Steps) && !waitsForLate(r, c) {
						lateStarted = false
					}
				}
			}
			if lateStarted {
				rounds = 0
			}
		}
		type hit struct{ r, c, i int }
		var hits []hit
		finished := true
		for r, p := range progs {
			if r == late && !lateStarted {
				finished = false
				continue
			}
			for c, ch := range p.Channels {
				if pos[r][c] >= len(ch.Steps) {
					continue
				}
				finished = false
				for i, o := range ch.Steps[pos[r][c]].Ops {
					if o.Kind.Local() || done[r][c] != nil && done[r][c][i] {
						continue
					}
					if (o.Peer == late || r == late) && !lateStarted {
						continue
					}
					var k msg
					if o.Kind == plan.Send {
						k = msg{r, o.Peer, c, seqs[r][c][pos[r][c]][i]}
					} else {
						k = msg{o.Peer, r, c, seqs[r][c][pos[r][c]][i]}
					}
					if posted(o.Peer, c, k) {
						hits = append(hits, hit{r, c, i})
					}
				}
			}
		}
		if finished {
			return rounds, lateRounds, nil
		}
		if len(hits) == 0 {
			return 0, 0, fmt.Errorf("deadlock in round %d at steps %v", round, pos)
		}
		for _, h := range hits {
			if done[h.r][h.c] == nil {
				done[h.r][h.c] = make([]bool, len(progs[h.r].Channels[h.c].Steps[pos[h.r][h.c]].Ops))
			}
			done[h.r][h.c][h.i] = true
		}
		for r, p := range progs {
			for c, ch := range p.Channels {
				if pos[r][c] >= len(ch.Steps) {
					continue
				}
				all := true
				for i, o := range ch.Steps[pos[r][c]].Ops {
					if !o.Kind.Local() && (done[r][c] == nil || !done[r][c][i]) {
						all = false
					}
				}
				if all {
					pos[r][c]++
					done[r][c] = nil
				}
			}
		}
		rounds++
		if lateStarted && allDone(progs[late], pos[late]) && lateRounds == 0 {
			lateRounds = rounds
		}
	}
}

func allDone(p *plan.Program, pos []int) bool {
	for c, ch := range p.Channels {
		if pos[c] < len(ch.Steps) {
			return false
		}
	}
	return true
}

// The completion after late arrives takes k·m+2m−2 slots (late's part
// k·m+1), each moving one unit of G/(k·m) over every busy link: the cost
// model of AllReduceLate, checked on the schedule itself, with sends
// that never buffer (so no deadlock hides behind a transport's buffers).
func TestAllReduceLateCompletionSlots(t *testing.T) {
	for n := 2; n <= 12; n++ {
		m := n - 1
		for _, k := range []int{1, 2, 5} {
			for _, late := range []int{0, n / 2, n - 1} {
				count := m * k * 4 // k rounds of chunk 4
				progs := lateProgs(t, identity(n), late, count, 4, 1, false)
				rounds, lateRounds, err := rendezvous(progs, late)
				if err != nil {
					t.Fatalf("n=%d k=%d late=%d: %v", n, k, late, err)
				}
				want := k*m + 2*m - 2
				if m == 1 {
					want = k + 1
				}
				if rounds != want || lateRounds != k*m+1 {
					t.Errorf("n=%d k=%d late=%d: completion in %d slots (late %d), want %d (late %d)", n, k, late, rounds, lateRounds, want, k*m+1)
				}
			}
		}
	}
}

// Channels and uneven counts keep the schedule free of deadlock without
// buffering.
func TestAllReduceLateNeverNeedsBuffering(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for n := 2; n <= 9; n++ {
		for late := 0; late < n; late++ {
			order := rng.Perm(n)
			progs := lateProgs(t, order, late, 7*n+5, 2, 3, true)
			if _, _, err := rendezvous(progs, late); err != nil {
				t.Fatalf("n=%d late=%d order=%v: %v", n, late, order, err)
			}
		}
	}
}

func identity(n int) []int {
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	return id
}

// Every rank sends at most one message and receives at most one per step
// (the fastbox path runs a step's sends before its receives and holds two
// messages per direction), and every step of the completion is as long as
// the units it moves.
func TestAllReduceLateStepShape(t *testing.T) {
	for n := 2; n <= 9; n++ {
		for late := 0; late < n; late++ {
			for _, p := range lateProgs(t, identity(n), late, 1000, 7, 2, true) {
				for c, ch := range p.Channels {
					for s, st := range ch.Steps {
						sends, recvs := 0, 0
						for _, o := range st.Ops {
							switch o.Kind {
							case plan.Send:
								sends++
							case plan.Recv, plan.RecvReduce:
								recvs++
							}
						}
						if sends > 1 || recvs > 1 {
							t.Fatalf("n=%d late=%d rank %d ch %d step %d: %d sends, %d receives", n, late, p.Rank, c, s, sends, recvs)
						}
					}
				}
			}
		}
	}
}

// A ring among some ranks of a larger world, with the late rank (3) among them.
func TestAllReduceLateAmongASubset(t *testing.T) {
	checkAmongASubset(t, 29, 4, func(s Spec, count int) (*plan.Program, error) { return AllReduceLate(s, 3, count, 2, false) })
}

func TestAllReduceLateRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		s                  Spec
		late, count, chunk int
	}{
		{Spec{Order: []int{0, 1, 2}, Rank: 0, Channels: 1}, 3, 10, 1},
		{Spec{Order: []int{0, 1, 2}, Rank: 0, Channels: 1}, -1, 10, 1},
		{Spec{Order: []int{0, 2}, World: 3, Rank: 0, Channels: 1}, 1, 10, 1},
		{Spec{Order: []int{0, 1, 2}, Rank: 0, Channels: 1}, 1, 10, 0},
		{Spec{Order: []int{0, 1, 2}, Rank: 0, Channels: 1}, 1, -1, 4},
		{Spec{Order: []int{0, 1, 2}, Rank: 0, Channels: 0}, 1, 10, 4},
		{Spec{Order: []int{0, 1, 2}, Rank: 5, Channels: 1}, 1, 10, 4},
	} {
		if _, err := AllReduceLate(tc.s, tc.late, tc.count, tc.chunk, false); err == nil {
			t.Errorf("%+v late=%d count=%d chunk=%d accepted", tc.s, tc.late, tc.count, tc.chunk)
		}
	}
}

// The executor takes the fastbox path only when a program's largest
// message fits, and both ends of a link must take the same path: every
// rank's largest message must be the same.
func TestAllReduceLateLargestMessageIsTheSameOnEveryRank(t *testing.T) {
	for n := 2; n <= 10; n++ {
		for _, count := range []int{1, n + 1, 1000, 100003} {
			for _, chunk := range []int{3, 64, 1 << 20} {
				late := count % n
				want := -1
				for _, p := range lateProgs(t, identity(n), late, count, chunk, 2, false) {
					largest := p.LargestMessage()
					if want < 0 {
						want = largest
					}
					if largest != want {
						t.Fatalf("n=%d count=%d chunk=%d: rank %d's largest message is %d elements, rank 0's %d", n, count, chunk, p.Rank, largest, want)
					}
				}
			}
		}
	}
}
