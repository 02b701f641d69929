package topology

// Tournament returns, round by round, rank me's partner in a round-robin
// over n ranks (the circle method; -1 is a bye when n is odd). Every pair
// meets exactly once, and in each round every rank has at most one partner.
func Tournament(n, me int) []int {
	m := n
	if m%2 == 1 {
		m++ // a phantom rank gives byes
	}
	out := make([]int, 0, m-1)
	for round := 0; round < m-1; round++ {
		// Position 0 stays; the others rotate.
		pos := func(r int) int {
			if r == 0 {
				return 0
			}
			return (r-1+round)%(m-1) + 1
		}
		rankAt := make([]int, m)
		for r := 0; r < m; r++ {
			rankAt[pos(r)] = r
		}
		p := pos(me)
		partner := rankAt[m-1-p]
		if partner >= n {
			partner = -1
		}
		out = append(out, partner)
	}
	return out
}
