package ring

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// Every pairwise all-to-all, simulated, equals the transpose computed
// directly: rank r's block for rank q lands in rank q's block from r.
func TestAllToAllEqualsTranspose(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for n := 1; n <= 7; n++ {
		for _, shape := range []string{"even0", "even1", "even9", "uneven", "sparse"} {
			for _, chans := range []int{1, 3} {
				for _, order := range orders(n, rng) {
					name := fmt.Sprintf("n%d/%s/ch%d/order%v", n, shape, chans, order)
					counts := matrix(n, shape, rng) // counts[from][to]
					send := make([][]int, n)
					recv := make([][]int, n)
					for r := range n {
						send[r] = make([]int, n)
						recv[r] = make([]int, n)
						for q := range n {
							send[r][q] = counts[r][q]
							recv[r][q] = counts[q][r]
						}
					}
					progs := make([]*plan.Program, n)
					input := make([][]float64, n)
					data := make([][]float64, n)
					for r := range n {
						p, err := AllToAll(Spec{Order: order, Rank: r, Channels: chans}, send[r], recv[r], 4)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						progs[r] = p
						for q := range n {
							for i := range send[r][q] {
								input[r] = append(input[r], float64(r*1_000_000+q*1000+i))
							}
						}
						data[r] = make([]float64, p.DataLen)
					}
					if err := plan.Simulate(progs, data, input, plan.SimSum); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					for r := range n {
						var want []float64
						for q := range n {
							for i := range counts[q][r] {
								want = append(want, float64(q*1_000_000+r*1000+i))
							}
						}
						if fmt.Sprint(want) != fmt.Sprint(data[r]) {
							t.Fatalf("%s: rank %d got %v want %v", name, r, data[r], want)
						}
					}
				}
			}
		}
	}
}

func matrix(n int, shape string, rng *rand.Rand) [][]int {
	m := make([][]int, n)
	for r := range m {
		m[r] = make([]int, n)
		for q := range m[r] {
			switch shape {
			case "even0":
			case "even1":
				m[r][q] = 1
			case "even9":
				m[r][q] = 9
			case "uneven":
				m[r][q] = rng.Intn(12)
			case "sparse":
				if rng.Intn(3) == 0 {
					m[r][q] = 1 + rng.Intn(20)
				}
			}
		}
	}
	return m
}

// One message per step and peer: no rank receives from two ranks in the
// same step, and channels only carry large blocks.
func TestAllToAllIsPairwise(t *testing.T) {
	const n = 5
	counts := []int{10, 10, 10, 10, 10}
	p, err := AllToAll(Spec{Order: []int{0, 1, 2, 3, 4}, Rank: 2, Channels: 2}, counts, counts, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Channels) != 2 {
		t.Fatalf("%d channels, want 2 (blocks above the split size)", len(p.Channels))
	}
	// Channel 0: the local copy, then one step per k: send to 2+k, receive from 2−k.
	steps := p.Channels[0].Steps
	if len(steps) != n {
		t.Fatalf("channel 0 has %d steps, want %d:\n%v", len(steps), n, p)
	}
	for k := 1; k < n; k++ {
		ops := steps[k].Ops
		if len(ops) != 2 || ops[0].Kind != plan.Send || ops[0].Peer != (2+k)%n || ops[1].Kind != plan.Recv || ops[1].Peer != (2-k+n)%n {
			t.Fatalf("step %d: %v", k, ops)
		}
	}
	small, err := AllToAll(Spec{Order: []int{0, 1, 2, 3, 4}, Rank: 2, Channels: 2}, []int{1, 1, 1, 1, 1}, []int{1, 1, 1, 1, 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(small.Channels) != 1 {
		t.Fatalf("small blocks use %d channels, want 1:\n%v", len(small.Channels), small)
	}
}

func TestAllToAllRejectsBadCounts(t *testing.T) {
	spec := Spec{Order: []int{0, 1, 2}, Rank: 1, Channels: 1}
	for _, tc := range []struct {
		send, recv []int
		want       string
	}{
		{[]int{1, 1}, []int{1, 1, 1}, "counts"},
		{[]int{1, -1, 1}, []int{1, -1, 1}, "count -1"},
		{[]int{1, 2, 1}, []int{1, 3, 1}, "sends itself 2"},
	} {
		_, err := AllToAll(spec, tc.send, tc.recv, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("send %v recv %v: error %v, want %q", tc.send, tc.recv, err, tc.want)
		}
	}
	if _, err := AllToAll(Spec{Order: []int{0, 2}, World: 3, Rank: 0, Channels: 1}, []int{1, 1}, []int{1, 1}, 0); err == nil {
		t.Error("a subset ring was accepted")
	}
}
