package ring

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// simulateAll builds every rank's program with build, simulates them on
// copies of data and returns the buffers.
func simulateAll(t *testing.T, n int, data [][]float64, build func(r int) (*plan.Program, error)) [][]float64 {
	t.Helper()
	progs := make([]*plan.Program, n)
	out := make([][]float64, n)
	for r := range progs {
		p, err := build(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		progs[r] = p
		out[r] = append([]float64(nil), data[r]...)
	}
	if err := plan.Simulate(progs, out, nil, plan.SimSum); err != nil {
		t.Fatal(err)
	}
	return out
}

// wideInputs are values whose sums depend on the order of the additions
// (magnitudes from 1e-8 to 1e8, both signs), so that equal bits mean the
// same reduction order.
func wideInputs(n, count int, rng *rand.Rand) [][]float64 {
	d := make([][]float64, n)
	for r := range d {
		d[r] = make([]float64, count)
		for i := range d[r] {
			d[r][i] = (rng.Float64() - 0.5) * math.Pow(10, float64(rng.Intn(17)-8))
		}
	}
	return d
}

// The offloaded ring gives every rank the plain ring's bits, for every
// position of the slow rank, ring order, channel count, round count and
// buffer (shorter than the ring, than the rounds, uneven), with and
// without Avg: it folds in the ring's order.
func TestAllReduceOffloadGivesTheRingsBits(t *testing.T) {
	rng := rand.New(rand.NewSource(29))
	for n := 3; n <= 6; n++ {
		for _, order := range orders(n, rng)[1:] { // a permutation
			for slow := range n {
				for _, chans := range []int{1, 2} {
					for _, count := range []int{0, 2, 61} {
						for _, rounds := range []int{1, 3} {
							for _, avg := range []bool{false, true} {
								name := fmt.Sprintf("n%d/order%v/slow%d/ch%d/count%d/rounds%d/avg%v", n, order, slow, chans, count, rounds, avg)
								data := wideInputs(n, count, rng)
								ring := simulateAll(t, n, data, func(r int) (*plan.Program, error) {
									return AllReduce(Spec{Order: order, Rank: r, Channels: chans}, count, avg)
								})
								off := simulateAll(t, n, data, func(r int) (*plan.Program, error) {
									return AllReduceOffload(Spec{Order: order, Rank: r, Channels: chans}, slow, count, rounds, avg)
								})
								for r := range off {
									for i := range off[r] {
										if math.Float64bits(off[r][i]) != math.Float64bits(ring[0][i]) {
											t.Fatalf("%s: rank %d element %d = %v, the ring gives %v", name, r, i, off[r][i], ring[0][i])
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// The slow rank sends its data once and receives the result once, and
// nothing else crosses its links.
func TestAllReduceOffloadMovesTheSlowRanksDataOnce(t *testing.T) {
	const n, count, slow = 5, 1000, 2
	order := []int{3, 0, 2, 4, 1}
	for r := range n {
		p, err := AllReduceOffload(Spec{Order: order, Rank: r, Channels: 2}, slow, count, 6, false)
		if err != nil {
			t.Fatal(err)
		}
		sent, recvd := 0, 0
		for _, ch := range p.Channels {
			for _, st := range ch.Steps {
				for _, o := range st.Ops {
					switch {
					case o.Kind == plan.Send && (r == slow || o.Peer == slow):
						sent += o.Len
					case (o.Kind == plan.Recv || o.Kind == plan.RecvReduce) && (r == slow || o.Peer == slow):
						recvd += o.Len
					}
				}
			}
		}
		switch r {
		case slow:
			if sent != count || recvd != count {
				t.Fatalf("the slow rank sends %d and receives %d elements, want %d each", sent, recvd, count)
			}
		case 4: // its right neighbour: receives most of its data, sends it every result
			if sent != count || recvd != count-count/n {
				t.Fatalf("rank %d sends %d to the slow rank and receives %d, want %d and %d", r, sent, recvd, count, count-count/n)
			}
		case 0: // its left neighbour: receives the segment it finishes
			if sent != 0 || recvd != count/n {
				t.Fatalf("rank %d sends %d to the slow rank and receives %d, want 0 and %d", r, sent, recvd, count/n)
			}
		default:
			if sent+recvd != 0 {
				t.Fatalf("rank %d exchanges %d elements with the slow rank, want none", r, sent+recvd)
			}
		}
	}
}

func TestAllReduceOffloadRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		order        []int
		slow, rounds int
	}{{[]int{0, 1}, 1, 4}, {[]int{0, 1, 2}, 3, 4}, {[]int{0, 1, 2}, 1, 0}} {
		if _, err := AllReduceOffload(Spec{Order: tc.order, Rank: 0, Channels: 1}, tc.slow, 10, tc.rounds, false); err == nil {
			t.Fatalf("order %v, slow %d, %d rounds: no error", tc.order, tc.slow, tc.rounds)
		}
	}
}

// Every rank of a two-level allreduce ends with the sequential sum (and
// the same bits), for hosts of 1..3 ranks, 1..3 hosts, ranks numbered in
// any order, 1 and 2 channels, with and without Avg.
func TestAllReduceTwoLevelEqualsSequentialReference(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	for nh := 1; nh <= 3; nh++ {
		for L := 1; L <= 3; L++ {
			n := nh * L
			perm := rng.Perm(n)
			hosts := make([][]int, nh)
			for h := range hosts {
				hosts[h] = perm[h*L : (h+1)*L]
			}
			for _, chans := range []int{1, 2} {
				for _, count := range []int{0, 1, 5, 64} {
					for _, avg := range []bool{false, true} {
						name := fmt.Sprintf("hosts%v/ch%d/count%d/avg%v", hosts, chans, count, avg)
						data := inputs(n, count, rng)
						want := sumOf(data, avg)
						out := simulateAll(t, n, data, func(r int) (*plan.Program, error) {
							return AllReduceTwoLevel(hosts, n, r, chans, count, avg)
						})
						for r := range out {
							for i := range want {
								if out[r][i] != want[i] {
									t.Fatalf("%s: rank %d element %d = %v, want %v", name, r, i, out[r][i], want[i])
								}
							}
						}
						wide := wideInputs(n, count, rng)
						out = simulateAll(t, n, wide, func(r int) (*plan.Program, error) {
							return AllReduceTwoLevel(hosts, n, r, chans, count, avg)
						})
						for r := range out {
							for i := range out[r] {
								if math.Float64bits(out[r][i]) != math.Float64bits(out[0][i]) {
									t.Fatalf("%s: rank %d element %d = %v, rank 0 has %v", name, r, i, out[r][i], out[0][i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// Across hosts, each rank of a two-level allreduce moves 2(H−1)/H of its
// shard (1/L of the buffer) each way: every host's link carries 2(H−1)/H
// of the buffer, where a flat ring carries 2(n−1)/n.
func TestAllReduceTwoLevelCrossesHostsWithItsShardOnly(t *testing.T) {
	hosts := [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}
	const count = 8000
	hostOf := func(r int) int { return r / 2 }
	for r := range 8 {
		p, err := AllReduceTwoLevel(hosts, 8, r, 1, count, false)
		if err != nil {
			t.Fatal(err)
		}
		out := 0
		for _, st := range p.Channels[0].Steps {
			for _, o := range st.Ops {
				if o.Kind == plan.Send && hostOf(o.Peer) != hostOf(r) {
					out += o.Len
				}
			}
		}
		if want := 2 * 3 * count / 2 / 4; out != want {
			t.Fatalf("rank %d sends %d elements to other hosts, want %d", r, out, want)
		}
	}
}

func TestAllReduceTwoLevelRejectsUnevenHosts(t *testing.T) {
	for _, hosts := range [][][]int{{{0, 1}, {2}}, {{0, 1}, {1, 2}}, {}, {{0, 5}}} {
		if _, err := AllReduceTwoLevel(hosts, 3, 0, 1, 10, false); err == nil {
			t.Fatalf("hosts %v: no error", hosts)
		}
	}
}
