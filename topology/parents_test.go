package topology

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveLink is the undirected link bandwidth, written out independently of
// link: the slower measured direction, else the measured one, else 0.
func naiveLink(bw Matrix, a, b int) float64 {
	x, y := bw[a][b], bw[b][a]
	if x > 0 && y > 0 {
		if x < y {
			return x
		}
		return y
	}
	if x > y {
		return x
	}
	return y
}

// parentObjective is Assign's documented objective, computed naively:
// (children at non-comparable parents, Σ children², Σ preference rank).
func parentObjective(ring []int, parentOf map[int]int, bw Matrix, tol float64) [3]int {
	var obj [3]int
	count := map[int]int{}
	for c, p := range parentOf {
		best := 0.0
		for _, m := range ring {
			best = max(best, naiveLink(bw, c, m))
		}
		got := naiveLink(bw, c, p)
		if got < (1-tol)*best {
			obj[0]++
		}
		for _, m := range ring {
			if naiveLink(bw, c, m) > got {
				obj[2]++
			}
		}
		count[p]++
	}
	for _, k := range count {
		obj[1] += k * k
	}
	return obj
}

func less3(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// bruteForceParents tries every assignment of evicted to ring members with
// at most maxChildren children each and returns the best objective.
func bruteForceParents(ring, evicted []int, bw Matrix, maxChildren int, tol float64) [3]int {
	best := [3]int{-1}
	choice := make([]int, len(evicted))
	var walk func(i int)
	walk = func(i int) {
		if i == len(evicted) {
			parentOf := map[int]int{}
			count := map[int]int{}
			for k, c := range evicted {
				parentOf[c] = ring[choice[k]]
				count[ring[choice[k]]]++
				if count[ring[choice[k]]] > maxChildren {
					return
				}
			}
			if obj := parentObjective(ring, parentOf, bw, tol); best[0] < 0 || less3(obj, best) {
				best = obj
			}
			return
		}
		for j := range ring {
			choice[i] = j
			walk(i + 1)
		}
	}
	walk(0)
	return best
}

// splitRanks picks which of n ranks are evicted.
func splitRanks(rng *rand.Rand, n, evict int) (ring, evicted []int) {
	perm := rng.Perm(n)
	return perm[evict:], perm[:evict]
}

func asMap(t *testing.T, as []Assignment) map[int]int {
	t.Helper()
	m := map[int]int{}
	for i, a := range as {
		if i > 0 && as[i-1].Child >= a.Child {
			t.Fatalf("assignments not ordered by child: %+v", as)
		}
		m[a.Child] = a.Parent
	}
	return m
}

// checkBalanced fails if some parent has two or more children while a
// parent comparable for one of those children has none.
func checkBalanced(t *testing.T, ring []int, parentOf map[int]int, bw Matrix, tol float64) {
	t.Helper()
	count := map[int]int{}
	for _, p := range parentOf {
		count[p]++
	}
	for c, p := range parentOf {
		if count[p] < 2 {
			continue
		}
		best := 0.0
		for _, m := range ring {
			best = max(best, naiveLink(bw, c, m))
		}
		for _, q := range ring {
			if count[q] == 0 && naiveLink(bw, c, q) >= (1-tol)*best {
				t.Fatalf("parent %d has %d children (incl. %d) while comparable parent %d has none (link %v vs best %v)",
					p, count[p], c, q, naiveLink(bw, c, q), best)
			}
		}
	}
}

func TestAssignParents_AgreesWithExhaustiveSearchUpToEightRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tolerances := []float64{0, 0.2, DefaultTolerance, 1}
	for trial := 0; trial < 1500; trial++ {
		n := 2 + rng.IntN(7)
		evict := 1 + rng.IntN(min(n-1, 4))
		ring, evicted := splitRanks(rng, n, evict)
		bw := randomBandwidth(rng, n)
		policy := ParentPolicy{MaxChildren: 1 + rng.IntN(3), Tolerance: tolerances[rng.IntN(len(tolerances))]}
		got, err := policy.Assign(ring, evicted, bw)
		if len(evicted) > len(ring)*policy.MaxChildren {
			if !errors.Is(err, ErrNoCapacity) {
				t.Fatalf("trial %d: err = %v, want ErrNoCapacity", trial, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		parentOf := asMap(t, got)
		if len(parentOf) != len(evicted) {
			t.Fatalf("trial %d: %d assignments for %d evicted", trial, len(parentOf), len(evicted))
		}
		count := map[int]int{}
		for c, p := range parentOf {
			if !slices.Contains(evicted, c) || !slices.Contains(ring, p) {
				t.Fatalf("trial %d: bad assignment %d→%d", trial, c, p)
			}
			if count[p]++; count[p] > policy.MaxChildren {
				t.Fatalf("trial %d: parent %d over MaxChildren %d", trial, p, policy.MaxChildren)
			}
		}
		want := bruteForceParents(ring, evicted, bw, policy.MaxChildren, policy.Tolerance)
		if obj := parentObjective(ring, parentOf, bw, policy.Tolerance); obj != want {
			t.Fatalf("trial %d: ring %v evicted %v policy %+v\nobjective %v, exhaustive best %v\nassignment %+v\nbw %v",
				trial, ring, evicted, policy, obj, want, got, bw)
		}
	}
}

func TestAssignParents_NoParentDoublesUpWhileAComparableOneIsIdle(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 200; trial++ {
		n := 4 + rng.IntN(60)
		evict := 1 + rng.IntN(n/2)
		ring, evicted := splitRanks(rng, n, evict)
		bw := randomBandwidth(rng, n)
		maxChildren := 1 + rng.IntN(4)
		got, err := AssignParents(ring, evicted, bw, maxChildren)
		if len(evicted) > len(ring)*maxChildren {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checkBalanced(t, ring, asMap(t, got), bw, DefaultTolerance)
	}
}

func TestAssignParents_DoesNotDependOnInputOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 100; trial++ {
		n := 3 + rng.IntN(30)
		ring, evicted := splitRanks(rng, n, 1+rng.IntN(n/2))
		bw := randomBandwidth(rng, n)
		want, err := AssignParents(ring, evicted, bw, 2)
		if err != nil {
			t.Fatal(err)
		}
		rng.Shuffle(len(ring), func(i, j int) { ring[i], ring[j] = ring[j], ring[i] })
		rng.Shuffle(len(evicted), func(i, j int) { evicted[i], evicted[j] = evicted[j], evicted[i] })
		got, err := AssignParents(ring, evicted, bw, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("order changed the result:\n%+v\n%+v", got, want)
		}
	}
}

func TestAssignParents_RejectsBadInput(t *testing.T) {
	bw := NewMatrix(4)
	cases := []struct {
		name          string
		ring, evicted []int
		bw            Matrix
		max           int
		want          error
	}{
		{"too many children", []int{0}, []int{1, 2}, bw, 1, ErrNoCapacity},
		{"empty ring", nil, []int{1}, bw, 1, ErrInvalidInput},
		{"zero MaxChildren", []int{0}, []int{1}, bw, 0, ErrInvalidInput},
		{"both ring and evicted", []int{0, 1}, []int{1}, bw, 1, ErrInvalidInput},
		{"duplicate evicted", []int{0}, []int{1, 1}, bw, 2, ErrInvalidInput},
		{"outside matrix", []int{0}, []int{4}, bw, 1, ErrInvalidInput},
		{"bad matrix", []int{0}, []int{1}, Matrix{{0, -1}, {1, 0}}, 1, ErrInvalidInput},
	}
	for _, c := range cases {
		if _, err := AssignParents(c.ring, c.evicted, c.bw, c.max); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := (ParentPolicy{MaxChildren: 1, Tolerance: 1.5}).Assign([]int{0}, []int{1}, bw); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("tolerance 1.5: err = %v", err)
	}
	got, err := AssignParents([]int{0}, nil, bw, 1)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("nothing evicted: %v, %v", got, err)
	}
}

// At the scale ringtail sim runs (4096 ranks), evicting a few dozen
// stragglers is quick: each child keeps only its best candidates.
func TestAssignParents_LargeRingIsFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	n := 4096
	bw := NewMatrix(n)
	for i := range bw {
		for j := range bw[i] {
			if i != j {
				bw[i][j] = float64(1 + rng.IntN(100))
			}
		}
	}
	ring, evicted := splitRanks(rng, n, 64)
	got, err := AssignParents(ring, evicted, bw, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, ring, asMap(t, got), bw, DefaultTolerance)
}
