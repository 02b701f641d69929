package topology

import (
	"slices"
	"testing"
)

// Tests named after STAR (papers/003_4607e418b294c13a.txt) sections.

// §IV-B: "remove x stragglers ... and connect each of them with a
// non-straggler (as its parent) that has high bandwidth to it".
// Eight workers, one straggler (7); worker 5 has the fastest link to it.
func TestSTAR_IVB_EvictedStragglerJoinsHighBandwidthParent(t *testing.T) {
	bw := uniformBandwidth(8, 10)
	setLink(bw, 7, 5, 40)
	setLink(bw, 7, 2, 25)
	got, err := AssignParents([]int{0, 1, 2, 3, 4, 5, 6}, []int{7}, bw, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Assignment{{Child: 7, Parent: 5, Bandwidth: 40}}; !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// §IV-D2: "balance child assignments by letting each child select a
// high-bandwidth ring worker with the fewest existing children". Three
// stragglers all see worker 0 as fastest (40) and workers 1 and 2 as
// comparable (30, 25); the rest are slow (5). Each gets its own parent.
func TestSTAR_IVD2_ChildrenSpreadOverComparableParents(t *testing.T) {
	bw := uniformBandwidth(8, 5)
	for _, c := range []int{5, 6, 7} {
		setLink(bw, c, 0, 40)
		setLink(bw, c, 1, 30)
		setLink(bw, c, 2, 25)
	}
	got, err := AssignParents([]int{0, 1, 2, 3, 4}, []int{5, 6, 7}, bw, 3)
	if err != nil {
		t.Fatal(err)
	}
	parents := []int{got[0].Parent, got[1].Parent, got[2].Parent}
	slices.Sort(parents)
	if !slices.Equal(parents, []int{0, 1, 2}) {
		t.Fatalf("parents %v, want 0, 1 and 2 once each: %+v", parents, got)
	}

	// With a far slower alternative (worker 1 at 15 < 40/2), doubling up
	// on the fast parent is preferred to a non-comparable one.
	bw = uniformBandwidth(4, 1)
	for _, c := range []int{2, 3} {
		setLink(bw, c, 0, 40)
		setLink(bw, c, 1, 15)
	}
	got, err = AssignParents([]int{0, 1}, []int{2, 3}, bw, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Parent != 0 || got[1].Parent != 0 {
		t.Fatalf("got %+v, want both on worker 0", got)
	}
}

// §V (LGC adapted to all-reduce): "connecting each to a ring worker with
// the highest bandwidth to it" — Tolerance 0 with room for every child.
func TestSTAR_V_LGCBaselineTakesHighestBandwidthParent(t *testing.T) {
	bw := uniformBandwidth(6, 5)
	setLink(bw, 4, 0, 40)
	setLink(bw, 4, 1, 39)
	setLink(bw, 5, 0, 30)
	got, err := ParentPolicy{MaxChildren: 2, Tolerance: 0}.Assign([]int{0, 1, 2, 3}, []int{4, 5}, bw)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Parent != 0 || got[1].Parent != 0 {
		t.Fatalf("got %+v, want both on their fastest worker 0", got)
	}
}

func uniformBandwidth(n int, v float64) Matrix {
	m := NewMatrix(n)
	for i := range m {
		for j := range m[i] {
			if i != j {
				m[i][j] = v
			}
		}
	}
	return m
}

func setLink(m Matrix, a, b int, v float64) { m[a][b], m[b][a] = v, v }
