package gradcode

import (
	"slices"
	"sort"
)

// Group search budgets keep Alg. 2's recursion bounded on adversarial loads.
const (
	maxGroupsFound = 512
	maxGroupSteps  = 1 << 17
)

// findAllGroups is Alg. 2's FindAllGroups for assignments whose workers hold
// cyclic intervals of partitions (both the Tandon and the Alg. 1 layouts do):
// every set of workers whose intervals tile the k partitions exactly once.
// Each group is listed once, as ascending ranks, led by its smallest rank;
// groups come out sorted by (size, ranks). The search stops quietly after
// maxGroupsFound groups or maxGroupSteps recursion steps.
func findAllGroups(assign [][]int, k int) [][]int {
	n := len(assign)
	startsAt := make([][]int, k) // partition → workers whose interval starts there
	for i, parts := range assign {
		if len(parts) > 0 {
			startsAt[parts[0]] = append(startsAt[parts[0]], i)
		}
	}
	var groups [][]int
	steps := 0
	chain := make([]int, 0, n)
	var extend func(first, pos, covered int)
	extend = func(first, pos, covered int) {
		steps++
		if steps > maxGroupSteps || len(groups) >= maxGroupsFound {
			return
		}
		if covered == k {
			if pos == assign[first][0] {
				g := slices.Clone(chain)
				sort.Ints(g)
				groups = append(groups, g)
			}
			return
		}
		for _, w := range startsAt[pos] {
			l := len(assign[w])
			if w <= first || covered+l > k {
				continue
			}
			chain = append(chain, w)
			extend(first, (pos+l)%k, covered+l)
			chain = chain[:len(chain)-1]
		}
	}
	for first := 0; first < n; first++ {
		l := len(assign[first])
		if l == 0 {
			continue
		}
		chain = append(chain[:0], first)
		extend(first, (assign[first][0]+l)%k, l)
	}
	sortGroups(groups)
	return groups
}

// pruneGroups is Alg. 2's PruneGroups: while two groups share a worker, drop
// the group that intersects the most other groups (ties: the larger group,
// then the later one in (size, ranks) order), so that the survivors are
// pairwise disjoint. groups must be sorted by sortGroups.
func pruneGroups(groups [][]int, n int) [][]int {
	g := len(groups)
	member := make([][]int, n) // worker → indices of groups holding it
	for gi, grp := range groups {
		for _, w := range grp {
			member[w] = append(member[w], gi)
		}
	}
	overlap := make([][]bool, g)
	for gi := range overlap {
		overlap[gi] = make([]bool, g)
	}
	count := make([]int, g)
	for _, gs := range member {
		for _, a := range gs {
			for _, b := range gs {
				if a != b && !overlap[a][b] {
					overlap[a][b] = true
					count[a]++
				}
			}
		}
	}
	live := make([]bool, g)
	for gi := range live {
		live[gi] = true
	}
	for {
		worst := -1
		for gi := 0; gi < g; gi++ {
			if !live[gi] || count[gi] == 0 {
				continue
			}
			if worst < 0 || count[gi] > count[worst] ||
				(count[gi] == count[worst] && len(groups[gi]) >= len(groups[worst])) {
				worst = gi
			}
		}
		if worst < 0 {
			break
		}
		live[worst] = false
		for gi := 0; gi < g; gi++ {
			if live[gi] && overlap[gi][worst] {
				count[gi]--
			}
		}
	}
	out := make([][]int, 0, g)
	for gi, grp := range groups {
		if live[gi] {
			out = append(out, grp)
		}
	}
	return out
}

// sortGroups orders groups by size, then lexicographically by ranks.
func sortGroups(groups [][]int) {
	sort.SliceStable(groups, func(a, b int) bool {
		if len(groups[a]) != len(groups[b]) {
			return len(groups[a]) < len(groups[b])
		}
		return slices.Compare(groups[a], groups[b]) < 0
	})
}

// isUnitGroup reports whether members cover every partition exactly once and
// all their coefficients in B are exactly 1, so that the 0/1 indicator of
// members decodes.
func isUnitGroup(members []int, assign [][]int, b [][]float64, k int) bool {
	if len(members) == 0 {
		return false
	}
	count := make([]int, k)
	for _, w := range members {
		for _, p := range assign[w] {
			count[p]++
			if b[w][p] != 1 {
				return false
			}
		}
	}
	for _, c := range count {
		if c != 1 {
			return false
		}
	}
	return true
}

// unitColourClasses returns, sorted, the colour classes that are unit groups.
func unitColourClasses(colours []int, ncolours int, assign [][]int, b [][]float64, k int) [][]int {
	classes := make([][]int, ncolours)
	for w, c := range colours {
		if c != noColour {
			classes[c] = append(classes[c], w)
		}
	}
	var out [][]int
	for _, cl := range classes {
		if isUnitGroup(cl, assign, b, k) {
			out = append(out, cl)
		}
	}
	sortGroups(out)
	return out
}
