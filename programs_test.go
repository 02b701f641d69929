package ringtail

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/transport"
)

// onHosts places rank r of a local job on the host r/per: sockets with a
// host id per host, so ranks of one host use shared memory and ranks of
// different hosts TCP, as across real hosts.
func onHosts(per int) func(rank int) transport.Network {
	return func(r int) transport.Network {
		s, err := transport.NewSockets(transport.SocketsConfig{HostID: fmt.Sprintf("test-host-%d", r/per)})
		if err != nil {
			panic(err)
		}
		return s
	}
}

// allReduceAcross runs calls float32 Sum allreduces of in (one buffer per
// rank, copied) on n ranks placed on hosts of per ranks, with the
// algorithm set, and returns every rank's results and the algorithm rank
// 0's timeline shows for each call.
func allReduceAcross(t *testing.T, n, per int, algorithm string, in [][]float32, calls int, more ...func(*Config)) ([][]float32, []string) {
	t.Helper()
	timeline := filepath.Join(t.TempDir(), "trace.json")
	comms := startCommsOn(t, n, func(c *Config) {
		c.LocalRank, c.LocalWorldSize = c.Rank%per, per
		c.Algorithm, c.Timeline, c.SmallBytes = algorithm, timeline, 1024
		for _, f := range more {
			f(c)
		}
	}, onHosts(per))
	out := make([][]float32, n)
	for range calls {
		for r := range out {
			out[r] = slices.Clone(in[r])
		}
		noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(context.Background(), Float32s(out[r]), Sum) }))
	}
	for _, c := range comms {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out, allReduceAlgorithms(t, timeline, 0, n, 4*len(in[0]))
}

// Across hosts, every program the decision point can choose gives the
// exact sum on every rank: the two-level allreduce over two hosts of two
// ranks, the offload of a rank over three hosts of one; and the offload
// gives the ring's bits where the sum depends on the order of additions.
// With the choice left to the decision point (auto) the ranks measure the
// links and every call's result is still the sum.
func TestEveryProgramAcrossHostsGivesTheSum(t *testing.T) {
	const count = 10007
	rng := rand.New(rand.NewSource(29))
	exact := func(n int) ([][]float32, []float32) {
		in, want := make([][]float32, n), make([]float32, count)
		for r := range in {
			in[r] = make([]float32, count)
			for i := range in[r] {
				in[r][i] = float32(rng.Intn(2001) - 1000) // integers: exact in any order
				want[i] += in[r][i]
			}
		}
		return in, want
	}
	for _, tc := range []struct {
		n, per    int
		algorithm string
		want      string // the program rank 0's timeline shows last
	}{
		{4, 2, "two-level", "two-level"},
		{3, 1, "ring-offload", "ring-offload"},
		{4, 2, "auto", ""},
		{3, 1, "auto", ""},
	} {
		t.Run(fmt.Sprintf("%d ranks, %d per host, %s", tc.n, tc.per, tc.algorithm), func(t *testing.T) {
			in, want := exact(tc.n)
			out, algos := allReduceAcross(t, tc.n, tc.per, tc.algorithm, in, 12)
			for r := range out {
				for i, v := range out[r] {
					if v != want[i] {
						t.Fatalf("rank %d element %d = %v, want %v (programs %v)", r, i, v, want[i], algos)
					}
				}
			}
			if len(algos) != 12 || tc.want != "" && algos[len(algos)-1] != tc.want {
				t.Fatalf("rank 0 ran %v, want 12 calls ending with %s", algos, tc.want)
			}
		})
	}
	t.Run("the offload gives the ring's bits", func(t *testing.T) {
		in := make([][]float32, 3)
		for r := range in {
			in[r] = make([]float32, count)
			for i := range in[r] {
				in[r][i] = float32((rng.Float64() - 0.5) * math.Pow(10, float64(rng.Intn(13)-6)))
			}
		}
		// The ring's bits depend on its channels (they cut the buffer into
		// the segments each rank starts), so both run on two, one stream
		// each: the offload would otherwise take as many streams as the
		// probe finds paying, and be compared with another ring.
		twoChannels := func(c *Config) { c.Channels, c.Streams = 2, 2 }
		ring, _ := allReduceAcross(t, 3, 1, "ring", in, 1, twoChannels)
		off, algos := allReduceAcross(t, 3, 1, "ring-offload", in, 1, twoChannels)
		if algos[0] != "ring-offload" {
			t.Fatalf("ran %v, want ring-offload", algos)
		}
		for r := range off {
			for i, v := range off[r] {
				if math.Float32bits(v) != math.Float32bits(ring[0][i]) {
					t.Fatalf("rank %d element %d = %v, the ring gives %v", r, i, v, ring[0][i])
				}
			}
		}
	})
}
