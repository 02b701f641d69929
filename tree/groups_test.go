package tree

import (
	"fmt"
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
				progs := checkSum(t, name, n, count, avg, rng, func(r int) (*plan.Program, error) {
					return AllReduceGroups(groups, n, r, count, avg)
				})
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
