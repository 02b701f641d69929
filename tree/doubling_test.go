package tree

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

func TestRecursiveDoublingEqualsReferenceAnyWorldSize(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for n := 1; n <= 13; n++ {
		for _, count := range []int{0, 1, 3, 8} {
			for _, avg := range []bool{false, true} {
				order := rng.Perm(n)
				checkSum(t, fmt.Sprintf("n=%d count=%d avg=%v", n, count, avg), n, count, avg, rng, func(r int) (*plan.Program, error) {
					return AllReduce(order, n, r, count, avg)
				})
			}
		}
	}
}

// checkSum builds every rank's program of an allreduce of count elements
// among n ranks, simulates it on random integers (exact sums in any
// order) and checks that every rank ends with the sum (divided by n with
// avg), the same bits everywhere. It returns the programs.
func checkSum(t *testing.T, name string, n, count int, avg bool, rng *rand.Rand, build func(r int) (*plan.Program, error)) []*plan.Program {
	t.Helper()
	data, want := make([][]float64, n), make([]float64, count)
	for r := range data {
		data[r] = make([]float64, count)
		for i := range data[r] {
			data[r][i] = float64(rng.Intn(1000))
			want[i] += data[r][i]
		}
	}
	if avg {
		for i := range want {
			want[i] /= float64(n)
		}
	}
	progs := make([]*plan.Program, n)
	for r := range progs {
		p, err := build(r)
		if err != nil {
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
				t.Fatalf("%s: rank %d elem %d = %v want %v", name, r, i, data[r][i], want[i])
			}
		}
	}
	return progs
}

func TestBinomialBroadcastReachesEveryRank(t *testing.T) {
	for n := 1; n <= 11; n++ {
		for root := 0; root < n; root++ {
			order := make([]int, n)
			for i := range order {
				order[i] = (n - 1 - i)
			}
			data := make([][]float64, n)
			for r := range data {
				data[r] = []float64{float64(r), float64(r * 10)}
			}
			progs := make([]*plan.Program, n)
			for r := range progs {
				p, err := Broadcast(order, n, r, root, 2)
				if err != nil {
					t.Fatal(err)
				}
				progs[r] = p
			}
			if err := plan.Simulate(progs, data, nil, plan.SimSum); err != nil {
				t.Fatalf("n=%d root=%d: %v", n, root, err)
			}
			for r := range data {
				if data[r][0] != float64(root) || data[r][1] != float64(root*10) {
					t.Fatalf("n=%d root=%d: rank %d has %v", n, root, r, data[r])
				}
			}
		}
	}
}
