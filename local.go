package ringtail

import (
	"context"

	"github.com/ringtail-ml/ringtail/internal/engine"
)

// NewLocal joins n ranks inside this process over the real transports (one
// Comm per rank; shared memory between them), for benchmarks, simulations
// and tests that drive every rank from goroutines. Rank 0 hosts the
// rendezvous on a loopback port that was free a moment ago. Each rank's
// configuration is DefaultConfig(rank, n) with that port, then configure
// (may be nil) — set the secret, job id and timeouts there. If any rank
// fails to join, every Comm is closed and the first failure is returned,
// naming its rank.
func NewLocal(ctx context.Context, n int, configure func(*Config)) ([]*Comm, error) {
	return engine.NewLocal(n, func() ([]*Comm, []error, error) { return joinLocal(ctx, n, configure) }, (*Comm).Close)
}

// joinLocal has n ranks join at once, with rank 0 hosting the rendezvous
// on a loopback port that was free a moment ago, and returns each rank's
// Comm or error (tests that look at every rank's failure use it).
func joinLocal(ctx context.Context, n int, configure func(*Config)) ([]*Comm, []error, error) {
	return engine.JoinLocal(n, func(r, port int) (*Comm, error) {
		cfg := DefaultConfig(r, n)
		cfg.MasterPort = port
		if configure != nil {
			configure(&cfg)
		}
		return New(ctx, cfg)
	})
}
