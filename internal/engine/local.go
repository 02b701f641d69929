package engine

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
)

// JoinLocal has n ranks of this process join a job at once, each with
// join(rank, port), where port is a loopback port that was free a moment
// ago for rank 0's rendezvous (ringtail.NewLocal); it returns each rank's
// result and error.
func JoinLocal[T any](n int, join func(rank, port int) (T, error)) ([]T, []error, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("ringtail: finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	out := make([]T, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { out[r], errs[r] = join(r, port) })
	}
	wg.Wait()
	return out, errs, nil
}

// NewLocal runs joinAll (JoinLocal's n ranks) until it fails for another
// reason than its port being taken meanwhile (by another process), at most
// five times. If a rank fails to join, close closes every rank that
// joined and the error names the first failed rank.
func NewLocal[T any](n int, joinAll func() ([]T, []error, error), close func(T) error) ([]T, error) {
	var err error
	for range 5 {
		var out []T
		if out, err = newLocal(n, joinAll, close); err == nil || !PortTaken(err) {
			return out, err
		}
	}
	return nil, err
}

// PortTaken reports whether err is a bind that found its port taken (the
// libp2p listener reports it only in its text).
func PortTaken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func newLocal[T any](n int, joinAll func() ([]T, []error, error), close func(T) error) ([]T, error) {
	out, errs, err := joinAll()
	if err != nil {
		return nil, err
	}
	for r, err := range errs {
		if err == nil {
			continue
		}
		for i, joined := range out {
			if errs[i] == nil {
				close(joined)
			}
		}
		return nil, fmt.Errorf("ringtail: %d ranks in this process: rank %d: %w", n, r, err)
	}
	return out, nil
}
