package topology

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomRanks puts n ranks on up to maxHosts hosts at random.
func randomRanks(rng *rand.Rand, n, maxHosts int) []Rank {
	ranks := make([]Rank, n)
	for i := range ranks {
		ranks[i] = Rank{ID: i, Host: fmt.Sprintf("host-%c", 'a'+rng.IntN(maxHosts))}
	}
	rng.Shuffle(n, func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
	return ranks
}

// randomBandwidth draws link bandwidths from a few values, so that ties
// happen, with some links unmeasured (0).
func randomBandwidth(rng *rand.Rand, n int) Matrix {
	values := []float64{0, 1, 2, 3, 5, 10, 10, 25}
	m := NewMatrix(n)
	for i := range m {
		for j := range m[i] {
			if i != j {
				m[i][j] = values[rng.IntN(len(values))]
			}
		}
	}
	return m
}

// checkHostBlocks fails unless ring is a permutation of ranks in which
// every host's ranks form one contiguous ascending block.
func checkHostBlocks(t *testing.T, ranks []Rank, ring []int) {
	t.Helper()
	host := map[int]string{}
	for _, r := range ranks {
		host[r.ID] = r.Host
	}
	ids := slices.Sorted(maps.Keys(host))
	got := slices.Sorted(slices.Values(ring))
	if !slices.Equal(got, ids) {
		t.Fatalf("ring %v is not a permutation of %v", ring, ids)
	}
	closed := map[string]bool{}
	for i, id := range ring {
		h := host[id]
		if i > 0 && host[ring[i-1]] == h {
			if ring[i-1] > id {
				t.Fatalf("ring %v: ranks of %s not ascending", ring, h)
			}
			continue
		}
		if closed[h] {
			t.Fatalf("ring %v: ranks of %s are split", ring, h)
		}
		if i > 0 {
			closed[host[ring[i-1]]] = true
		}
	}
}

func TestRingOrder_SameHostRanksAreAdjacentForRandomHostMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(40)
		ranks := randomRanks(rng, n, 1+rng.IntN(14))
		var bw Matrix
		if trial%2 == 0 {
			bw = randomBandwidth(rng, n)
		}
		ring := RingOrder(ranks, bw)
		checkHostBlocks(t, ranks, ring)
		if ring[0] != 0 {
			t.Fatalf("ring %v does not start at the smallest rank", ring)
		}
	}
}

// exhaustiveRing tries every ordering of the ranks that starts at the
// smallest ID and keeps hosts contiguous and ascending, in lexicographic
// order, and returns the first with the best score.
func exhaustiveRing(t *testing.T, ranks []Rank, bw Matrix) ([]int, RingScore) {
	t.Helper()
	ids := make([]int, len(ranks))
	for i, r := range ranks {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	host := map[int]string{}
	for _, r := range ranks {
		host[r.ID] = r.Host
	}
	valid := func(p []int) bool {
		if p[0] != ids[0] {
			return false
		}
		closed := map[string]bool{}
		for i, id := range p {
			if i > 0 && host[p[i-1]] == host[id] {
				if p[i-1] > id {
					return false
				}
				continue
			}
			if closed[host[id]] {
				return false
			}
			if i > 0 {
				closed[host[p[i-1]]] = true
			}
		}
		return true
	}
	var best []int
	var bestScore RingScore
	p := slices.Clone(ids)
	for {
		if valid(p) {
			if s := ScoreRing(ranks, p, bw); best == nil || s.Better(bestScore) {
				best, bestScore = slices.Clone(p), s
			}
		}
		if !nextPermutation(p) {
			break
		}
	}
	return best, bestScore
}

func TestRingOrder_AgreesWithExhaustiveSearchUpToEightRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 400; trial++ {
		n := 1 + rng.IntN(8)
		ranks := randomRanks(rng, n, 1+rng.IntN(n))
		bw := randomBandwidth(rng, n)
		want, wantScore := exhaustiveRing(t, ranks, bw)
		got := RingOrder(ranks, bw)
		if gotScore := ScoreRing(ranks, got, bw); gotScore != wantScore {
			t.Fatalf("trial %d: ranks %v\nRingOrder %v scores %+v, exhaustive best %v scores %+v", trial, ranks, got, gotScore, want, wantScore)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: same score but RingOrder %v, exhaustive first best %v", trial, got, want)
		}
	}
}

func TestRingOrder_DoesNotDependOnInputOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 100; trial++ {
		n := 1 + rng.IntN(30)
		ranks := randomRanks(rng, n, 1+rng.IntN(9))
		bw := randomBandwidth(rng, n)
		want := RingOrder(ranks, bw)
		shuffled := slices.Clone(ranks)
		rng.Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := RingOrder(shuffled, bw); !slices.Equal(got, want) {
			t.Fatalf("shuffled input changed the ring: %v vs %v", got, want)
		}
	}
}

// Four hosts with two GPUs each. Host a's uplink to host b is slow (1 vs
// 10 elsewhere), and so is c's to d; the stable order a,b,c,d would use
// both. The best ring goes a → c → b → d → a.
func TestRingOrder_RoutesAroundSlowInterHostLinks(t *testing.T) {
	ranks := []Rank{
		{0, "a"}, {1, "a"}, {2, "b"}, {3, "b"}, {4, "c"}, {5, "c"}, {6, "d"}, {7, "d"},
	}
	bw := NewMatrix(8)
	for i := range bw {
		for j := range bw[i] {
			bw[i][j] = 10
		}
	}
	bw[1][2], bw[5][6] = 1, 1 // a→b and c→d
	if got := RingOrder(ranks, nil); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("without measurements: %v, want the stable order", got)
	}
	got := RingOrder(ranks, bw)
	if want := []int{0, 1, 4, 5, 2, 3, 6, 7}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s := ScoreRing(ranks, got, bw); s.Bottleneck != 10 || s.InvSum != 0.4 {
		t.Fatalf("score %+v, want bottleneck 10 over 4 inter-host links", s)
	}
}

func TestRingOrder_ManyHostsKeepStableOrder(t *testing.T) {
	var ranks []Rank
	for i := 0; i < 2*(MaxOptimisedHosts+1); i++ {
		ranks = append(ranks, Rank{ID: i, Host: fmt.Sprintf("h%02d", i/2)})
	}
	bw := NewMatrix(len(ranks))
	bw[1][2] = 1e9 // would matter if optimised; the stable order is kept anyway
	got := RingOrder(ranks, bw)
	for i, id := range got {
		if id != i {
			t.Fatalf("got %v, want 0..%d in order", got, len(ranks)-1)
		}
	}
}

func TestRingOrder_EdgeCases(t *testing.T) {
	if got := RingOrder(nil, nil); len(got) != 0 {
		t.Fatalf("no ranks: %v", got)
	}
	if got := RingOrder([]Rank{{7, "x"}}, nil); !slices.Equal(got, []int{7}) {
		t.Fatalf("one rank: %v", got)
	}
	// A duplicated ID is used once, on its lexicographically first host.
	got := RingOrder([]Rank{{1, "b"}, {0, "b"}, {1, "a"}, {2, "a"}}, nil)
	if want := []int{0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("duplicates: %v, want %v", got, want)
	}
	// IDs outside the matrix have unmeasured links: no panic.
	_ = RingOrder([]Rank{{0, "a"}, {1, "b"}, {9, "c"}}, NewMatrix(2))
}

func TestScoreRing_CountsOnlyInterHostLinks(t *testing.T) {
	ranks := []Rank{{0, "a"}, {1, "a"}, {2, "b"}}
	bw := Matrix{
		{0, 0.5, 4},
		{0.5, 0, 2},
		{8, 0.5, 0},
	}
	s := ScoreRing(ranks, []int{0, 1, 2}, bw)
	if s.Bottleneck != 2 || s.InvSum != 0.5+0.125 {
		t.Fatalf("got %+v, want links 1→2 (2) and 2→0 (8)", s)
	}
	one := ScoreRing(ranks[:2], []int{0, 1}, bw)
	if !math.IsInf(one.Bottleneck, 1) || one.InvSum != 0 {
		t.Fatalf("single host: %+v", one)
	}
	if !(RingScore{Bottleneck: 3, InvSum: 9}).Better(RingScore{Bottleneck: 2, InvSum: 1}) ||
		!(RingScore{Bottleneck: 2, InvSum: 1}).Better(RingScore{Bottleneck: 2, InvSum: 2}) ||
		(RingScore{Bottleneck: 2, InvSum: 2}).Better(RingScore{Bottleneck: 2, InvSum: 2}) {
		t.Fatal("Better is not bottleneck-then-InvSum")
	}
}

// ScoreRing scores ring (rank IDs in ring order, each followed by the next
// and the last by the first) by its inter-host links in bw. Ranks missing
// from ranks are taken to be alone on their own host.
func ScoreRing(ranks []Rank, ring []int, bw Matrix) RingScore {
	host := make(map[int]string, len(ranks))
	for _, r := range ranks {
		host[r.ID] = r.Host
	}
	var links []float64
	for i, a := range ring {
		b := ring[(i+1)%len(ring)]
		ha, okA := host[a]
		hb, okB := host[b]
		if a != b && (!okA || !okB || ha != hb) {
			links = append(links, bw.At(a, b))
		}
	}
	return scoreLinks(links)
}
