package gradcode

import (
	"reflect"
	"testing"
)

// properColouring checks that the holders of every partition have distinct
// colours.
func properColouring(t *testing.T, colours []int, hold [][]int) {
	t.Helper()
	for j, h := range hold {
		seen := make(map[int]int)
		for _, w := range h {
			if colours[w] == noColour {
				continue
			}
			if other, dup := seen[colours[w]]; dup {
				t.Fatalf("partition %d: workers %d and %d share colour %d", j, other, w, colours[w])
			}
			seen[colours[w]] = w
		}
	}
}

// The s-th power of the n-cycle needs s+1+⌈r/q⌉ colours (n = q(s+1)+r);
// blockColouring reaches that bound.
func TestBlockColouringUsesFewestColours(t *testing.T) {
	for n := 2; n <= 70; n++ {
		for s := 1; s < n && s <= n/2; s++ {
			colours, count := blockColouring(n, s)
			q, r := n/(s+1), n%(s+1)
			want := s + 1 + (r+q-1)/q
			if count != want {
				t.Fatalf("n=%d s=%d: %d colours, want %d", n, s, count, want)
			}
			properColouring(t, colours, holders(tandonSupport(n, s), n))
		}
	}
	colours, _ := blockColouring(11, 2) // blocks of 4, 4, 3
	if want := []int{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2}; !reflect.DeepEqual(colours, want) {
		t.Fatalf("colours %v, want %v", colours, want)
	}
}

// The conflict colouring of Alg. 1 layouts is proper for random clusters.
func TestConflictColouringIsProper(t *testing.T) {
	rng := newRand(9)
	for trial := 0; trial < 200; trial++ {
		n := 4 + rng.Intn(40)
		s := 1 + rng.Intn(n/4+1)
		if s >= n {
			continue
		}
		c := randomThroughputs(n, rng)
		k := n + rng.Intn(2*n)
		load, err := loads(c, s, k)
		if err != nil {
			t.Fatal(err)
		}
		assign := cyclicCopies(load, k)
		hold := holders(assign, k)
		var members []int
		for i, l := range load {
			if l > 0 {
				members = append(members, i)
			}
		}
		colours, count := conflictColouring(n, members, hold)
		properColouring(t, colours, hold)
		if count < s+1 {
			t.Fatalf("%d colours for partitions with %d holders", count, s+1)
		}
	}
}

// Alg. 2 finds every exact cover of a small layout, checked against brute
// force over all subsets of workers.
func TestFindAllGroupsMatchesBruteForce(t *testing.T) {
	rng := newRand(4)
	for trial := 0; trial < 100; trial++ {
		n := 3 + rng.Intn(8)
		s := 1 + rng.Intn(2)
		if s >= n {
			continue
		}
		k := 2 + rng.Intn(6)
		// Integer throughputs make aligned laps (and so groups) likely.
		c := make([]float64, n)
		for i := range c {
			c[i] = float64(1 + rng.Intn(3))
		}
		load, err := loads(c, s, k)
		if err != nil {
			t.Fatal(err)
		}
		assign := cyclicCopies(load, k)
		got := findAllGroups(assign, k)
		var want [][]int
		for mask := 1; mask < 1<<n; mask++ {
			count := make([]int, k)
			var members []int
			idle := false
			for w := 0; w < n; w++ {
				if mask&(1<<w) != 0 {
					idle = idle || load[w] == 0 // idle workers belong to no group
					members = append(members, w)
					for _, p := range assign[w] {
						count[p]++
					}
				}
			}
			exact := !idle
			for _, x := range count {
				exact = exact && x == 1
			}
			if exact {
				want = append(want, members)
			}
		}
		sortGroups(want)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("loads %v k=%d: groups %v, brute force %v", load, k, got, want)
		}
	}
}

// PruneGroups leaves pairwise disjoint groups and drops the most entangled
// first.
func TestPruneGroupsDropsMostOverlapping(t *testing.T) {
	groups := [][]int{{0, 1}, {2, 3}, {1, 2}, {4, 5}}
	sortGroups(groups)
	got := pruneGroups(groups, 6)
	if want := [][]int{{0, 1}, {2, 3}, {4, 5}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pruned %v, want %v", got, want)
	}
}

// Loads sum to (s+1)·k, respect the cap k, and stay within one partition of
// the Theorem-5 quota.
func TestLoadsRoundQuotas(t *testing.T) {
	rng := newRand(12)
	for trial := 0; trial < 300; trial++ {
		n := 2 + rng.Intn(60)
		s := rng.Intn(n)
		k := 1 + rng.Intn(3*n)
		c := randomThroughputs(n, rng)
		if trial%5 == 0 {
			c[0] = 1000 // force the cap
		}
		load, err := loads(c, s, k)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := OptimalComputeTime(c, s, k)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for i, l := range load {
			sum += l
			if l < 0 || l > k {
				t.Fatalf("load %d of worker %d outside [0, %d]", l, i, k)
			}
			quota := min(c[i]*ts, float64(k))
			if float64(l) < quota-1-1e-9 || float64(l) > quota+1+1e-9 {
				t.Fatalf("load %d of worker %d far from quota %v", l, i, quota)
			}
		}
		if sum != (s+1)*k {
			t.Fatalf("loads sum to %d, want %d", sum, (s+1)*k)
		}
	}
}
