package topology

import "testing"

// Every pair of ranks meets exactly once, and in each round a rank meets
// at most one partner, which meets it back.
func TestTournamentPairsEveryoneOnce(t *testing.T) {
	for n := 1; n <= 9; n++ {
		met := map[[2]int]int{}
		rounds := len(Tournament(n, 0))
		for r := 0; r < rounds; r++ {
			for me := 0; me < n; me++ {
				p := Tournament(n, me)[r]
				if p < 0 {
					continue
				}
				if Tournament(n, p)[r] != me {
					t.Fatalf("n=%d round %d: %d meets %d but %d meets %d", n, r, me, p, p, Tournament(n, p)[r])
				}
				if me < p {
					met[[2]int{me, p}]++
				}
			}
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if met[[2]int{i, j}] != 1 {
					t.Fatalf("n=%d: pair %d,%d met %d times", n, i, j, met[[2]int{i, j}])
				}
			}
		}
	}
}
