package commtest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start creates n communicators concurrently (ringtail.NewLocal: rank 0
// hosts the rendezvous) with test-sized timeouts — operations 20 s, silent
// peers 5 s, joining 20 s — adjusted per rank by mutate (may be nil). It
// fails the test if any rank cannot join, and closes them all when the
// test ends.
func Start(t testing.TB, n int, mutate func(*ringtail.Config)) []*ringtail.Comm {
	t.Helper()
	comms, err := ringtail.NewLocal(context.Background(), n, func(cfg *ringtail.Config) {
		cfg.Secret = []byte("commtest-secret-0123")
		cfg.JobID = "commtest"
		cfg.OpTimeout = 20 * time.Second
		cfg.PeerTimeout = 5 * time.Second
		cfg.ConnectTimeout = 20 * time.Second
		if mutate != nil {
			mutate(cfg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// Each runs f on every rank 0..n−1 concurrently and returns the errors by
// rank.
func Each(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	return errs
}

// NoErrors fails t with the first rank's error, if any.
func NoErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}
