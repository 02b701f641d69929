package ring

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

func orders(n int, rng *rand.Rand) [][]int {
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	return [][]int{id, rng.Perm(n)}
}

// sumOf is the sequential reference: the elementwise sum of every rank's
// data, divided by the number of ranks with avg.
func sumOf(data [][]float64, avg bool) []float64 {
	var want []float64
	for r, d := range data {
		if r == 0 {
			want = make([]float64, len(d))
		}
		for i, v := range d {
			want[i] += v
		}
	}
	if avg {
		for i := range want {
			want[i] /= float64(len(data))
		}
	}
	return want
}

func inputs(n, count int, rng *rand.Rand) [][]float64 {
	d := make([][]float64, n)
	for r := range d {
		d[r] = make([]float64, count)
		for i := range d[r] {
			d[r][i] = float64(rng.Intn(1000)) // integers: sums are exact in any order
		}
	}
	return d
}

// Every ring program, simulated, equals the sequential reference.
func TestAllReduceEqualsSequentialReference(t *testing.T) {
	checkAllReduceReference(t, 8, []int{0, 1, 2, 7, 13, 64, 101}, func(s Spec, count int, avg bool) (*plan.Program, error) {
		return AllReduce(s, count, avg)
	})
}

// So does the ring in pieces, for pieces that divide the buffer evenly,
// leave a short last piece, or hold fewer elements than there are ranks.
func TestAllReducePiecesEqualsSequentialReference(t *testing.T) {
	for _, piece := range []int{1, 4, 50} {
		counts := []int{0, 1, 7, 24, 61}
		if piece == 1 {
			counts = counts[:4] // a piece per element: shorter buffers keep the test quick
		}
		t.Run(fmt.Sprintf("piece%d", piece), func(t *testing.T) {
			checkAllReduceReference(t, 5, counts, func(s Spec, count int, avg bool) (*plan.Program, error) {
				return AllReducePieces(s, count, piece, avg)
			})
		})
	}
}

// Piece k of the program is AllReduce's program for the piece alone, moved
// to the piece's offset: pieces change where the steps run, never the order
// in which an element's contributions are folded.
func TestAllReducePiecesIsTheRingOfEachPiece(t *testing.T) {
	for _, tc := range []struct{ n, count, piece, chans int }{{4, 100, 32, 1}, {3, 10, 4, 2}, {2, 9, 9, 1}, {5, 7, 100, 3}} {
		order := rand.New(rand.NewSource(int64(tc.n))).Perm(tc.n)
		for r := 0; r < tc.n; r++ {
			s := Spec{Order: order, Rank: r, Channels: tc.chans}
			got, err := AllReducePieces(s, tc.count, tc.piece, true)
			if err != nil {
				t.Fatal(err)
			}
			var want []plan.Channel
			for off := 0; off < tc.count; off += tc.piece {
				one, err := AllReduce(s, min(tc.piece, tc.count-off), true)
				if err != nil {
					t.Fatal(err)
				}
				if want == nil {
					want = make([]plan.Channel, len(one.Channels))
				}
				for c, ch := range one.Channels {
					for _, st := range ch.Steps {
						ops := slices.Clone(st.Ops)
						for i := range ops {
							ops[i].Off += off
						}
						want[c].Steps = append(want[c].Steps, plan.Step{Ops: ops, Phase: st.Phase})
					}
				}
			}
			if !reflect.DeepEqual(got.Channels, want) {
				t.Fatalf("%+v rank %d:\n%v", tc, r, got)
			}
			if wantName := map[bool]string{true: "ring-pieces", false: "ring"}[tc.piece < tc.count]; got.Algorithm != wantName {
				t.Fatalf("%+v: algorithm %q, want %q", tc, got.Algorithm, wantName)
			}
		}
	}
	if _, err := AllReducePieces(Spec{Order: []int{0, 1}, Channels: 1}, 4, 0, false); err == nil {
		t.Fatal("pieces of 0 elements accepted")
	}
}

// checkAllReduceReference simulates the programs build makes for rings of
// 1..maxN ranks (rank order and a permutation), 1 and 3 channels, with
// and without Avg, and compares every rank's buffer with the sequential
// sum.
func checkAllReduceReference(t *testing.T, maxN int, counts []int, build func(s Spec, count int, avg bool) (*plan.Program, error)) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	for n := 1; n <= maxN; n++ {
		for _, count := range counts {
			for _, chans := range []int{1, 3} {
				for _, order := range orders(n, rng) {
					for _, avg := range []bool{false, true} {
						name := fmt.Sprintf("n%d/count%d/ch%d/order%v/avg%v", n, count, chans, order, avg)
						data := inputs(n, count, rng)
						want := sumOf(data, avg)
						progs := make([]*plan.Program, n)
						for r := range progs {
							p, err := build(Spec{Order: order, Rank: r, Channels: chans}, count, avg)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							if err := p.Validate(); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							progs[r] = p
						}
						if err := plan.Simulate(progs, data, nil, plan.SimSum); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for r := range data {
							for i := range want {
								if data[r][i] != want[i] {
									t.Fatalf("%s: rank %d elem %d = %v, want %v", name, r, i, data[r][i], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestReduceScatterAndAllGatherEqualReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for n := 1; n <= 7; n++ {
		for _, count := range []int{0, 1, 5, 17} {
			for _, order := range orders(n, rng) {
				in := inputs(n, n*count, rng)
				out := make([][]float64, n)
				progs := make([]*plan.Program, n)
				for r := range progs {
					out[r] = make([]float64, count)
					p, err := ReduceScatter(Spec{Order: order, Rank: r, Channels: 2}, count, false)
					if err != nil {
						t.Fatal(err)
					}
					progs[r] = p
				}
				orig := make([][]float64, n)
				for r := range in {
					orig[r] = append([]float64(nil), in[r]...)
				}
				if err := plan.Simulate(progs, out, in, plan.SimSum); err != nil {
					t.Fatalf("rs n=%d count=%d: %v", n, count, err)
				}
				for r := 0; r < n; r++ {
					for i := 0; i < count; i++ {
						var want float64
						for q := 0; q < n; q++ {
							want += orig[q][r*count+i]
						}
						if out[r][i] != want {
							t.Fatalf("rs n=%d order=%v rank %d elem %d = %v want %v", n, order, r, i, out[r][i], want)
						}
					}
					for i := range in[r] {
						if in[r][i] != orig[r][i] {
							t.Fatalf("rs wrote its input")
						}
					}
				}
				// allgather
				small := inputs(n, count, rng)
				gathered := make([][]float64, n)
				for r := range progs {
					gathered[r] = make([]float64, n*count)
					p, err := AllGather(Spec{Order: order, Rank: r, Channels: 2}, count)
					if err != nil {
						t.Fatal(err)
					}
					progs[r] = p
				}
				if err := plan.Simulate(progs, gathered, small, plan.SimSum); err != nil {
					t.Fatalf("ag: %v", err)
				}
				for r := 0; r < n; r++ {
					for q := 0; q < n; q++ {
						for i := 0; i < count; i++ {
							if gathered[r][q*count+i] != small[q][i] {
								t.Fatalf("ag n=%d rank %d block %d elem %d", n, r, q, i)
							}
						}
					}
				}
			}
		}
	}
}

func TestChainBroadcastDeliversEveryChunk(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for n := 1; n <= 6; n++ {
		for _, count := range []int{0, 1, 10, 33} {
			for root := 0; root < n; root++ {
				data := inputs(n, count, rng)
				want := append([]float64(nil), data[root]...)
				progs := make([]*plan.Program, n)
				for r := range progs {
					p, err := Broadcast(Spec{Order: rng.Perm(n)[:0:0], Rank: r, Channels: 1}, root, count, 4)
					_ = p
					if err == nil {
						t.Fatal("empty order accepted")
					}
					order := make([]int, n)
					for i := range order {
						order[i] = (i + 1) % n
					}
					progs[r], err = Broadcast(Spec{Order: order, Rank: r, Channels: 1}, root, count, 4)
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := plan.Simulate(progs, data, nil, plan.SimSum); err != nil {
					t.Fatalf("n=%d count=%d root=%d: %v", n, count, root, err)
				}
				for r := range data {
					for i := range want {
						if data[r][i] != want[i] {
							t.Fatalf("n=%d root=%d rank %d elem %d", n, root, r, i)
						}
					}
				}
			}
		}
	}
}

func TestSpecRejectsBadOrders(t *testing.T) {
	for _, s := range []Spec{
		{Order: []int{0, 0}, Rank: 0, Channels: 1},
		{Order: []int{0, 2}, Rank: 0, Channels: 1},
		{Order: []int{0, 1}, Rank: 2, Channels: 1},
		{Order: []int{0, 1}, Rank: 0, Channels: 0},
	} {
		if _, err := AllReduce(s, 10, false); err == nil {
			t.Errorf("spec %+v accepted", s)
		}
	}
}

// A ring among some ranks of a larger world leaves the others untouched.
func TestAllReduceAmongASubsetOfTheWorld(t *testing.T) {
	checkAmongASubset(t, 23, 2, func(s Spec, count int) (*plan.Program, error) { return AllReduce(s, count, false) })
	if _, err := AllReduce(Spec{Order: []int{1, 9}, World: 7, Rank: 1, Channels: 1}, 4, false); err == nil {
		t.Fatal("rank 9 accepted in a world of 7")
	}
}

// checkAmongASubset builds, with build, the programs of a sum over the
// members 5, 1, 3, 6 (in that ring order, two channels) of a world of 7,
// simulates them, and checks that every member holds the members' sum and
// every other rank its own data untouched.
func checkAmongASubset(t *testing.T, count int, seed int64, build func(s Spec, count int) (*plan.Program, error)) {
	t.Helper()
	const world = 7
	members := []int{5, 1, 3, 6}
	data := inputs(world, count, rand.New(rand.NewSource(seed)))
	orig := make([][]float64, world)
	for r := range data {
		orig[r] = append([]float64(nil), data[r]...)
	}
	progs := make([]*plan.Program, world)
	for r := range progs {
		progs[r] = &plan.Program{Rank: r, World: world, DataLen: count}
	}
	for _, r := range members {
		p, err := build(Spec{Order: members, World: world, Rank: r, Channels: 2}, count)
		if err != nil {
			t.Fatal(err)
		}
		progs[r] = p
	}
	if err := plan.Simulate(progs, data, nil, plan.SimSum); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < world; r++ {
		for i := 0; i < count; i++ {
			want := orig[r][i]
			if slices.Contains(members, r) {
				want = orig[5][i] + orig[1][i] + orig[3][i] + orig[6][i]
			}
			if data[r][i] != want {
				t.Fatalf("rank %d elem %d = %v want %v", r, i, data[r][i], want)
			}
		}
	}
}
