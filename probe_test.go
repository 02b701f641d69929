package ringtail

import (
	"context"
	"testing"
)

func TestProbeMeasuresEveryPairTheSameOnEveryRank(t *testing.T) {
	comms := startComms(t, 3, nil)
	ests := make([][]float64, 3)
	noErrors(t, each(comms, func(r int, c *Comm) error {
		e, err := c.Probe(context.Background(), ProbeConfig{Large: 256 << 10, Repeats: 2})
		if err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				ests[r] = append(ests[r], e.Latency[i][j], e.Bandwidth[i][j])
			}
		}
		return nil
	}))
	for r := 1; r < 3; r++ {
		for k := range ests[0] {
			if ests[r][k] != ests[0][k] {
				t.Fatalf("rank %d's estimates differ from rank 0's", r)
			}
		}
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			lat, bw := ests[0][2*(3*i+j)], ests[0][2*(3*i+j)+1]
			if i != j && (lat <= 0 || bw <= 0) {
				t.Fatalf("pair %d,%d: latency %v, bandwidth %v", i, j, lat, bw)
			}
		}
	}
	t.Logf("latency 0→1 %.1f µs, bandwidth 0→1 %.2f GB/s", ests[0][2]*1e6, ests[0][3]/1e9)
}
