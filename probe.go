package ringtail

import (
	"context"

	"github.com/ringtail-ml/ringtail/internal/engine"
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

// Probe measures latency and bandwidth between every pair of ranks, at
// start or on demand (a collective: every rank calls it). Pairs meet in a
// round-robin tournament, so each round every rank is busy with exactly one
// partner: the lower rank sends a small probe that is echoed (latency is
// half the round trip), then a large one that is acknowledged. Each rank
// measures the pairs it leads; one Max-allreduce shares the measurements so
// every rank returns the same estimates (topology.EstimateLinks), which
// parent choice (topology.AssignParents) and ring order use.
func (c *Comm) Probe(ctx context.Context, cfg ProbeConfig) (topology.LinkEstimates, error) {
	p := engine.ProbeSizes{Small: cfg.Small, Large: cfg.Large, Repeats: cfg.Repeats}
	if err := p.Defaults(); err != nil {
		return topology.LinkEstimates{}, err
	}
	return engine.Probe(ctx, c.run, c.Size(), c.Rank(), p)
}
