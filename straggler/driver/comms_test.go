package driver

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
)

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startComms creates n communicators in this process over real sockets
// (the pattern of the root package's comm_test.go).
func startComms(t testing.TB, n int) []*ringtail.Comm {
	t.Helper()
	port := freePort(t)
	comms := make([]*ringtail.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			cfg := ringtail.DefaultConfig(r, n)
			cfg.MasterPort = port
			cfg.Secret = []byte("test-secret")
			cfg.JobID = "driver-test"
			cfg.OpTimeout = 20 * time.Second
			cfg.PeerTimeout = 5 * time.Second
			cfg.ConnectTimeout = 20 * time.Second
			comms[r], errs[r] = ringtail.New(context.Background(), cfg)
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, c := range comms {
				if c != nil {
					c.Close()
				}
			}
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// each runs f on every rank concurrently and returns the errors by rank.
func each(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r) }()
	}
	wg.Wait()
	return errs
}

func noErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}
