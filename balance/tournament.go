package balance

import "math"

// tournament answers "which rank finishes a sample of size s earliest?",
// argmin_r load[r] + A_r·s with ties to the lowest r, for LPT list
// scheduling, in O(log m) amortised per query and update instead of the
// O(m) scan. It is a kinetic tournament tree: every internal node stores
// the winner of its subtree at the current s and the value of s below
// which that winner could lose to the other child (its certificate). LPT
// queries come in non-increasing s ≥ 0, so a query only re-plays the nodes
// whose certificates have expired; an update (the winner's load grew)
// re-plays the leaf's path to the root.
//
// Winners are decided by comparing the computed values load + A·s exactly
// as the naive scan does, with the same tie-break, so both agree whenever
// the arithmetic is exact (the tests check this on integer data).
// Certificates are widened by a relative margin so rounding cannot let an
// order change go unnoticed except in near-ties within a few ulps.
type tournament struct {
	lines []tline // per rank
	n     int     // leaves, a power of two ≥ m
	nodes []tnode // heap-ordered; leaves at n..2n-1
}

type tline struct{ a, c float64 } // slope A_r and current load

type tnode struct {
	win  int32   // winning rank, -1 if the subtree is empty
	cert float64 // s below which win may lose to the other child
	melt float64 // max cert over the subtree
}

func newTournament(models []LinearModel, load []float64, s float64) *tournament {
	m := len(models)
	n := 1
	for n < m {
		n *= 2
	}
	t := &tournament{lines: make([]tline, m), n: n, nodes: make([]tnode, 2*n)}
	for r, md := range models {
		t.lines[r] = tline{a: md.A, c: load[r]}
	}
	for i := range n {
		t.nodes[n+i] = tnode{win: -1, cert: math.Inf(-1), melt: math.Inf(-1)}
		if i < m {
			t.nodes[n+i].win = int32(i)
		}
	}
	for i := n - 1; i >= 1; i-- {
		t.pull(i, s)
	}
	return t
}

// pull recomputes node i from its children at s.
func (t *tournament) pull(i int, s float64) {
	left, right := &t.nodes[2*i], &t.nodes[2*i+1]
	w, l := left.win, right.win
	if w < 0 || (l >= 0 && !t.beats(w, l, s)) {
		w, l = l, w
	}
	nd := &t.nodes[i]
	nd.win = w
	cert := math.Inf(-1)
	if w >= 0 && l >= 0 {
		lw, ll := t.lines[w], t.lines[l]
		if lw.a < ll.a {
			// As s falls the steeper loser gains; they cross at s*.
			cs := (ll.c - lw.c) / (lw.a - ll.a)
			margin := s + 1
			if cs < 0 {
				margin -= cs
			} else {
				margin += cs
			}
			cert = cs + 1e-9*margin
		}
	}
	nd.cert = cert
	if left.melt > cert {
		cert = left.melt
	}
	if right.melt > cert {
		cert = right.melt
	}
	nd.melt = cert
}

// beats reports whether rank x is strictly preferred to rank y at s.
func (t *tournament) beats(x, y int32, s float64) bool {
	lx, ly := t.lines[x], t.lines[y]
	vx, vy := lx.c+lx.a*s, ly.c+ly.a*s
	return vx < vy || (vx == vy && x < y)
}

// advance re-plays every node of i's subtree whose certificate expired at s.
func (t *tournament) advance(i int, s float64) {
	if i >= t.n || t.nodes[i].melt < s {
		return
	}
	t.advance(2*i, s)
	t.advance(2*i+1, s)
	t.pull(i, s)
}

// best returns the rank minimising load + A·s at s (non-increasing over
// calls) and that value.
func (t *tournament) best(s float64) (int, float64) {
	t.advance(1, s)
	r := t.nodes[1].win
	return int(r), t.lines[r].c + t.lines[r].a*s
}

// set updates rank r's load and re-plays its path at s.
func (t *tournament) set(r int, load, s float64) {
	t.lines[r].c = load
	for i := (t.n + r) / 2; i >= 1; i /= 2 {
		t.pull(i, s)
	}
}
