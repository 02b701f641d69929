package driver

import (
	"sync"
	"testing"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
)

// startComms creates n communicators in this process over real sockets.
func startComms(t testing.TB, n int) []*ringtail.Comm { return commtest.Start(t, n, nil) }

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
