package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func randomUniform(rng *rand.Rand, n int) Matrix {
	m := NewMatrix(n)
	for i := range m {
		for j := range m[i] {
			if i != j {
				m[i][j] = float64(1 + rng.IntN(100))
			}
		}
	}
	return m
}

func BenchmarkAssignParents(b *testing.B) {
	for _, c := range []struct{ n, x int }{{64, 4}, {4096, 8}, {4096, 64}} {
		b.Run(fmt.Sprintf("ring%d_evict%d", c.n, c.x), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			bw := randomUniform(rng, c.n)
			ring, evicted := splitRanks(rng, c.n, c.x)
			b.ResetTimer()
			for b.Loop() {
				if _, err := AssignParents(ring, evicted, bw, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRingOrder(b *testing.B) {
	for _, c := range []struct{ hosts, perHost int }{{8, 8}, {8, 512}, {512, 8}} {
		b.Run(fmt.Sprintf("hosts%d_x%d", c.hosts, c.perHost), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			n := c.hosts * c.perHost
			ranks := make([]Rank, n)
			for i := range ranks {
				ranks[i] = Rank{ID: i, Host: fmt.Sprintf("h%d", i/c.perHost)}
			}
			bw := randomUniform(rng, n)
			b.ResetTimer()
			for b.Loop() {
				_ = RingOrder(ranks, bw)
			}
		})
	}
}
