package tree

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
)

// Every rank of an allreduce grouped by CPU ends with the sequential sum,
// the same bits on every rank, for groups of one and of several ranks, a
// number of groups that is not a power of two, with and without Avg; a
// member sends and receives one message, both with its leader.
func TestAllReduceGroupsEqualsSequentialReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, groups := range [][][]int{
		{{0, 3, 5, 6}, {1, 2, 4, 7}}, // 8 ranks on 2 CPUs, as the launcher binds them
		{{0}, {1}, {2}},
		{{2, 0}, {1}, {4, 3, 5}},
		{{0, 1, 2, 3}},
	} {
		n := 0
		for _, g := range groups {
			n += len(g)
		}
		for _, count := range []int{0, 1, 9} {
			for _, avg := range []bool{false, true} {
				name := fmt.Sprintf("%v/count%d/avg%v", groups, count, avg)
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
					p, err := AllReduceGroups(groups, n, r, count, avg)
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
						if data[r][i] != want[i] || math.Float64bits(data[r][i]) != math.Float64bits(data[0][i]) {
							t.Fatalf("%s: rank %d element %d = %v, want %v", name, r, i, data[r][i], want[i])
						}
					}
				}
				for _, g := range groups {
					for _, m := range g[1:] {
						p := progs[m]
						if len(p.Channels[0].Steps) != 2 || p.Channels[0].Steps[0].Ops[0].Peer != g[0] {
							t.Fatalf("%s: member %d runs %v, want a send and a receive with its leader %d", name, m, p, g[0])
						}
					}
				}
			}
		}
	}
}

func TestAllReduceGroupsRejectsBadGroups(t *testing.T) {
	for _, groups := range [][][]int{{{0, 1}, {}}, {{0, 1}, {1}}, {{0, 5}}, {{1}}} {
		if _, err := AllReduceGroups(groups, 2, 0, 4, false); err == nil {
			t.Fatalf("groups %v: no error", groups)
		}
	}
}
