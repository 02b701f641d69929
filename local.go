package ringtail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
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
	// The port was free a moment ago; another process may take it before
	// rank 0 binds it, so a few fresh tries.
	var err error
	for range 5 {
		var comms []*Comm
		if comms, err = newLocal(ctx, n, configure); err == nil || !portTaken(err) {
			return comms, err
		}
	}
	return nil, err
}

// portTaken reports whether err is a bind that found its port taken (the
// libp2p listener reports it only in its text).
func portTaken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func newLocal(ctx context.Context, n int, configure func(*Config)) ([]*Comm, error) {
	comms, errs, err := joinLocal(ctx, n, configure)
	if err != nil {
		return nil, err
	}
	for r, err := range errs {
		if err == nil {
			continue
		}
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
		return nil, fmt.Errorf("ringtail: %d ranks in this process: rank %d: %w", n, r, err)
	}
	return comms, nil
}

// joinLocal has n ranks join at once, with rank 0 hosting the rendezvous
// on a loopback port that was free a moment ago, and returns each rank's
// Comm or error (tests that look at every rank's failure use it).
func joinLocal(ctx context.Context, n int, configure func(*Config)) ([]*Comm, []error, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("ringtail: finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			cfg := DefaultConfig(r, n)
			cfg.MasterPort = port
			if configure != nil {
				configure(&cfg)
			}
			comms[r], errs[r] = New(ctx, cfg)
		})
	}
	wg.Wait()
	return comms, errs, nil
}
