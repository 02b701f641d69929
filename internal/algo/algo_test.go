package algo

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Choose runs AllToAll as the pairwise exchange, even or with the split
// sizes given, and every rank's programs together move rank r's block for
// rank q into rank q's block from r.
func TestChooseAllToAllIsPairwise(t *testing.T) {
	const n = 4
	tun := Tunables{SmallBytes: 16, Channels: 2, ChunkBytes: 1 << 10}
	counts := [n][n]int{{1, 0, 3, 9}, {2, 2, 0, 0}, {5, 1, 1, 7}, {0, 0, 4, 4}} // counts[from][to]
	for _, even := range []bool{true, false} {
		progs := make([]*plan.Program, n)
		data, input := make([][]float64, n), make([][]float64, n)
		for r := range n {
			s := Spec{Collective: wire.AllToAll, Rank: r, World: n, Count: 3, ElemSize: 4}
			if !even {
				s.SendCounts, s.RecvCounts = make([]int, n), make([]int, n)
				for q := range n {
					s.SendCounts[q], s.RecvCounts[q] = counts[r][q], counts[q][r]
				}
			}
			p, err := Choose(s, tun)
			if err != nil {
				t.Fatal(err)
			}
			if p.Algorithm != "pairwise" || Name(s, tun) != "pairwise" {
				t.Fatalf("algorithm %q (Name %q)", p.Algorithm, Name(s, tun))
			}
			progs[r] = p
			input[r] = make([]float64, p.InputLen)
			for i := range input[r] {
				input[r][i] = float64(1000*r + i)
			}
			data[r] = make([]float64, p.DataLen)
		}
		if err := plan.Simulate(progs, data, input, plan.SimSum); err != nil {
			t.Fatal(err)
		}
		for q := range n {
			var want []float64
			for r := range n {
				off, c := 3*q, 3
				if !even {
					off, c = 0, counts[r][q]
					for p := range q {
						off += counts[r][p]
					}
				}
				for i := range c {
					want = append(want, float64(1000*r+off+i))
				}
			}
			if fmt.Sprint(want) != fmt.Sprint(data[q]) {
				t.Fatalf("even=%t: rank %d got %v want %v", even, q, data[q], want)
			}
		}
	}
	if _, err := Choose(Spec{Collective: wire.AllToAll, Rank: 0, World: 4, Members: []int{0, 1}, Count: 1, ElemSize: 4}, tun); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("AllToAll among members: %v, want ErrUnsupported", err)
	}
}
