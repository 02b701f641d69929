package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// Every rank gathers the others' device names and computes the same
// priors: a P100 beside V100s is 3× slower; with no known model (no GPU)
// there are none.
func TestDevicePriorsAreGatheredAndAgreed(t *testing.T) {
	const n = 3
	comms, err := ringtail.NewLocal(context.Background(), n, func(c *ringtail.Config) {
		c.Secret, c.OpTimeout = []byte("priors-test-secret-0"), 60*time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"Tesla V100-SXM2-16GB", "Tesla P100-PCIE-16GB", "Tesla V100-SXM2-16GB"}, "[1 3.0303030303030303 1]"}, // the prior table: P100 0.33 of a V100
		{[]string{"", "", ""}, "[]"},
	} {
		got := make([][]float64, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[r], errs[r] = devicePriors(ctx, comms[r], tc.names[r])
			}()
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("rank %d: %v", r, errs[r])
			}
			if s := fmt.Sprint(got[r]); s != tc.want {
				t.Fatalf("names %q: rank %d priors %s, want %s", tc.names, r, s, tc.want)
			}
		}
	}
}
