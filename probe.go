package ringtail

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail/topology"
)

// ProbeConfig sizes a link probe.
type ProbeConfig struct {
	// Small is the latency probe's size in bytes (default 8).
	Small int
	// Large is the bandwidth probe's size in bytes (default 1 MiB).
	Large int
	// Repeats is how many times each pair exchanges each probe (default 3);
	// the median is kept.
	Repeats int
}

func (p *ProbeConfig) defaults() error {
	if p.Small == 0 {
		p.Small = 8
	}
	if p.Large == 0 {
		p.Large = 1 << 20
	}
	if p.Repeats == 0 {
		p.Repeats = 3
	}
	if p.Small < 0 || p.Large <= p.Small || p.Repeats < 1 || p.Large > 1<<30 {
		return fmt.Errorf("ringtail: probe sizes %d/%d bytes, %d repeats", p.Small, p.Large, p.Repeats)
	}
	return nil
}

// Probe measures latency and bandwidth between every pair of ranks, at
// start or on demand (a collective: every rank calls it). Pairs meet in a
// round-robin tournament, so each round every rank is busy with exactly one
// partner: the lower rank sends a small probe that is echoed (latency is
// half the round trip), then a large one that is acknowledged. Each rank
// measures the pairs it leads; one Max-allreduce shares the measurements so
// every rank returns the same estimates (topology.EstimateLinks), which
// parent choice (topology.AssignParents) and ring order use.
func (c *Comm) Probe(ctx context.Context, cfg ProbeConfig) (topology.LinkEstimates, error) {
	if err := cfg.defaults(); err != nil {
		return topology.LinkEstimates{}, err
	}
	n, me := c.Size(), c.Rank()
	// lat[i*n+j] and big[i*n+j]: median seconds for the pair (i, j), both orders.
	shared := make([]float64, 2*n*n)
	small := make([]byte, cfg.Small)
	large := make([]byte, cfg.Large)
	ack := make([]byte, 1)
	for _, partner := range topology.Tournament(n, me) {
		if partner < 0 {
			continue // a bye this round
		}
		var lats, bigs []float64
		for rep := 0; rep < cfg.Repeats; rep++ {
			if me < partner {
				t0 := time.Now()
				if err := c.Send(ctx, partner, Raw(small, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := c.Recv(ctx, partner, Raw(small, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				rtt := time.Since(t0).Seconds()
				t1 := time.Now()
				if err := c.Send(ctx, partner, Raw(large, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := c.Recv(ctx, partner, Raw(ack, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				lats = append(lats, rtt/2)
				bigs = append(bigs, time.Since(t1).Seconds()-rtt/2)
			} else {
				if err := c.Recv(ctx, partner, Raw(small, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := c.Send(ctx, partner, Raw(small, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := c.Recv(ctx, partner, Raw(large, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
				if err := c.Send(ctx, partner, Raw(ack, Uint8)); err != nil {
					return topology.LinkEstimates{}, err
				}
			}
		}
		if me < partner {
			l, b := median(lats), median(bigs)
			for _, ij := range [][2]int{{me, partner}, {partner, me}} {
				shared[ij[0]*n+ij[1]] = l
				shared[n*n+ij[0]*n+ij[1]] = b
			}
		}
	}
	if err := c.AllReduce(ctx, Float64s(shared), Max); err != nil {
		return topology.LinkEstimates{}, err
	}
	var samples []topology.ProbeSample
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			samples = append(samples,
				topology.ProbeSample{From: i, To: j, Bytes: int64(cfg.Small), Duration: seconds(shared[i*n+j])},
				topology.ProbeSample{From: i, To: j, Bytes: int64(cfg.Large), Duration: seconds(shared[n*n+i*n+j])})
		}
	}
	return topology.EstimateLinks(n, samples)
}

func seconds(s float64) time.Duration {
	return max(time.Nanosecond, time.Duration(s*float64(time.Second)))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
