package ringtail

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// closeRaceIters is how many fresh jobs each close-race case forms (fewer
// under -short).
func closeRaceIters(t *testing.T, full int) int {
	if testing.Short() {
		return max(full/10, 5)
	}
	return full
}

// finalThenClose runs one job of n ranks: warm (optional) runs on every
// rank, then every rank calls a world AllReduce of count float32 and
// closes its communicator the moment its own call returns. Every rank's
// final call must succeed with the right sum: a rank that completed the
// collective has published everything the others need from it, so its
// close must not fail them.
func finalThenClose(t *testing.T, n, count int, mutate func(*Config), warm func(r int, c *Comm) error) {
	t.Helper()
	comms := startComms(t, n, mutate)
	if runtime.GOOS == "linux" {
		// The case under test: ranks of one host on fastboxes.
		for _, l := range comms[0].e.Links() {
			if !strings.Contains(l.Transport, "fastbox") {
				t.Fatalf("rank 0's link to rank %d is %q, want shared memory with fastboxes", l.Peer, l.Transport)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if warm != nil {
				if err := warm(r, c); err != nil {
					errs[r] = fmt.Errorf("warm-up: %w", err)
					return
				}
			}
			buf := make([]float32, count)
			for i := range buf {
				buf[i] = float32(r + i%7)
			}
			if err := c.AllReduce(context.Background(), Float32s(buf), Sum); err != nil {
				errs[r] = fmt.Errorf("final AllReduce: %w", err)
				return
			}
			for i, v := range buf {
				if want := float32(n*(i%7) + n*(n-1)/2); v != want {
					errs[r] = fmt.Errorf("final AllReduce: element %d is %v, want %v", i, v, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d of %d (count %d): %v", r, n, count, err)
		}
	}
}

// TestCloseRightAfterTheFinalAllReduce: every rank closes the moment its
// final AllReduce returns; the first to finish must not fail the others.
func TestCloseRightAfterTheFinalAllReduce(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		for _, count := range []int{2, 2472, 1 << 16, 300000} {
			t.Run(fmt.Sprintf("n=%d/count=%d", n, count), func(t *testing.T) {
				for range closeRaceIters(t, 40) {
					finalThenClose(t, n, count, nil, nil)
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// TestCloseRightAfterTheFinalAllReduceAfterTrees is the straggler
// driver's end of training: the even ranks (members) run AllReduceTrees
// that fold what the odd ranks (children) contribute eagerly, the
// children leave one more contribution that nobody takes, and then every
// rank makes a world AllReduce and closes the moment it returns.
func TestCloseRightAfterTheFinalAllReduceAfterTrees(t *testing.T) {
	const rounds = 4
	for _, n := range []int{3, 4} {
		for _, count := range []int{2472, 1 << 16} {
			t.Run(fmt.Sprintf("n=%d/count=%d", n, count), func(t *testing.T) {
				var members []int
				var edges []TreeEdge
				for r := range n {
					if r%2 == 0 {
						members = append(members, r)
					} else {
						edges = append(edges, TreeEdge{Child: r, Parent: r - 1, Must: true})
					}
				}
				want := float32(n * (n + 1) / 2) // every rank's r+1
				warm := func(r int, c *Comm) error {
					ctx := context.Background()
					for round := range rounds {
						buf := make([]float32, count)
						for i := range buf {
							buf[i] = float32(r + 1)
						}
						if r%2 == 1 {
							p, err := c.ContributeAsync(ctx, r-1, Float32s(buf), uint32(round))
							if err != nil {
								return fmt.Errorf("round %d: contribute: %w", round, err)
							}
							if err := p.Wait(ctx); err != nil {
								return fmt.Errorf("round %d: contribution: %w", round, err)
							}
							continue
						}
						tr := Tree{Members: members, Edges: edges, Tag: uint32(round), TagMask: MaxContributionTag}
						if _, err := c.AllReduceTree(ctx, Float32s(buf), tr); err != nil {
							return fmt.Errorf("round %d: AllReduceTree: %w", round, err)
						}
						if buf[0] != want || buf[count-1] != want {
							return fmt.Errorf("round %d: AllReduceTree gave %v, want %v", round, buf[0], want)
						}
					}
					if r%2 == 1 {
						// Left outstanding: the parent never takes it.
						if _, err := c.ContributeAsync(ctx, r-1, Float32s(make([]float32, count)), rounds); err != nil {
							return fmt.Errorf("last contribution: %w", err)
						}
					}
					return nil
				}
				for range closeRaceIters(t, 40) {
					finalThenClose(t, n, count, nil, warm)
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// TestRankClosingInsteadOfTheFinalAllReduceFailsTheOthers is the other
// side of the close-race tests: a rank that closes without making the
// final AllReduce (what the straggler hook's evicted rank 1 did in the
// caught run) fails every rank waiting in it, naming the rank that left.
func TestRankClosingInsteadOfTheFinalAllReduceFailsTheOthers(t *testing.T) {
	const n, count = 4, 2472
	comms := startComms(t, n, nil)
	errs := each(comms, func(r int, c *Comm) error {
		if err := c.AllReduce(context.Background(), Float32s(make([]float32, count)), Sum); err != nil {
			return fmt.Errorf("first AllReduce: %w", err)
		}
		if r == 1 {
			return c.Close()
		}
		return c.AllReduce(context.Background(), Float32s(make([]float32, count)), Sum)
	})
	if errs[1] != nil {
		t.Fatalf("rank 1: %v", errs[1])
	}
	for r, err := range errs {
		if r == 1 {
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindClosed || e.Rank != 1 {
			t.Errorf("rank %d: %v, want rank 1's close", r, err)
		}
	}
}
