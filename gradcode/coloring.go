package gradcode

// A colouring gives every worker that holds data a colour such that the
// holders of one partition all have different colours. Colour classes are the
// columns of the structured auxiliary matrix: a class whose members cover the
// data exactly once is a group that decodes with 0/1 coefficients.

// noColour marks a worker that holds no partition (or is not being coloured).
const noColour = -1

// blockColouring colours the cyclic scheme's conflict graph (the s-th power of
// the n-cycle) with the fewest colours: the ring is cut into q = ⌊n/(s+1)⌋
// blocks of lengths s+1 … s+1+⌈r/q⌉ (r = n mod (s+1)), and each block is
// coloured 0, 1, 2, … from its start. Any s+1 consecutive workers then have
// distinct colours. It returns the colours and their count.
func blockColouring(n, s int) ([]int, int) {
	col := make([]int, n)
	q := n / (s + 1)
	if q == 0 { // n ≤ s: cannot happen for s < n, kept for safety
		for i := range col {
			col[i] = i
		}
		return col, n
	}
	r := n % (s + 1)
	next, count := 0, 0
	for b := 0; b < q; b++ {
		length := s + 1 + r/q
		if b < r%q {
			length++
		}
		for t := 0; t < length; t++ {
			col[next] = t
			next++
		}
		if length > count {
			count = length
		}
	}
	return col, count
}

// conflictColouring colours the workers listed in members (ascending ranks)
// so that the members holding one partition get distinct colours. hold lists
// each partition's holders; non-members are ignored. Two deterministic
// heuristics run — greedy in rank order and DSatur — and the one with fewer
// colours wins (greedy on ties). Non-members get noColour.
func conflictColouring(n int, members []int, hold [][]int) ([]int, int) {
	isMember := make([]bool, n)
	for _, m := range members {
		isMember[m] = true
	}
	adj := make([][]bool, n)
	for _, m := range members {
		adj[m] = make([]bool, n)
	}
	for _, h := range hold {
		for _, a := range h {
			if !isMember[a] {
				continue
			}
			for _, b := range h {
				if b != a && isMember[b] {
					adj[a][b] = true
				}
			}
		}
	}
	greedy, gc := greedyColouring(n, members, adj, members)
	dsatur, dc := dsaturColouring(n, members, adj)
	if dc < gc {
		return dsatur, dc
	}
	return greedy, gc
}

// greedyColouring gives each worker, in the given order, the smallest colour
// not used by an already coloured neighbour.
func greedyColouring(n int, members []int, adj [][]bool, order []int) ([]int, int) {
	col := make([]int, n)
	for i := range col {
		col[i] = noColour
	}
	count := 0
	used := make([]bool, len(members)+1)
	for _, v := range order {
		for c := range used {
			used[c] = false
		}
		for _, u := range members {
			if adj[v][u] && col[u] != noColour {
				used[col[u]] = true
			}
		}
		c := 0
		for used[c] {
			c++
		}
		col[v] = c
		if c+1 > count {
			count = c + 1
		}
	}
	return col, count
}

// dsaturColouring is Brélaz's DSatur: repeatedly colour the uncoloured worker
// with the most distinctly coloured neighbours (ties: more neighbours, then
// lower rank) with the smallest free colour.
func dsaturColouring(n int, members []int, adj [][]bool) ([]int, int) {
	col := make([]int, n)
	for i := range col {
		col[i] = noColour
	}
	degree := make([]int, n)
	for _, v := range members {
		for _, u := range members {
			if adj[v][u] {
				degree[v]++
			}
		}
	}
	count := 0
	seen := make([]bool, len(members)+1)
	for range members {
		best, bestSat := -1, -1
		for _, v := range members {
			if col[v] != noColour {
				continue
			}
			for c := range seen {
				seen[c] = false
			}
			sat := 0
			for _, u := range members {
				if adj[v][u] && col[u] != noColour && !seen[col[u]] {
					seen[col[u]] = true
					sat++
				}
			}
			if sat > bestSat || (sat == bestSat && degree[v] > degree[best]) {
				best, bestSat = v, sat
			}
		}
		for c := range seen {
			seen[c] = false
		}
		for _, u := range members {
			if adj[best][u] && col[u] != noColour {
				seen[col[u]] = true
			}
		}
		c := 0
		for seen[c] {
			c++
		}
		col[best] = c
		if c+1 > count {
			count = c + 1
		}
	}
	return col, count
}
