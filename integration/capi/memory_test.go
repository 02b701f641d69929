//go:build cgo

package main

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// TestStragglerMemoryBoundsTheShares runs the shares policy over the C
// ABI's Go side with per-rank micro-batch caps, as the PyTorch hook opens
// it for a V100 + P100 mix scaled down: rank 0 computes twice as fast but
// holds micro-batches of 10 samples in at most 2 passes, so its share
// stops at 20 of the 64 although its speed alone would give it about 43;
// every rank plans the same shares, and each share splits into
// micro-batches none of which exceeds its rank's cap.
func TestStragglerMemoryBoundsTheShares(t *testing.T) {
	const world, params, batch, steps = 2, 8, 64, 12
	caps := []int64{10, 40}
	ss := openWorld(t, world)
	var mu sync.Mutex
	last := make([][]int, world)
	each(t, ss, func(r int, s *session) error {
		run, err := openStragglerMemory(s, params, "shares", batch, flagSampled, 20_000, caps, 2)
		if err != nil {
			return err
		}
		state := make([]float32, params)
		if err := run.setState(unsafe.Pointer(&state[0]), params, params); err != nil {
			return err
		}
		grad := make([]float32, params)
		share := batch / world
		for i := range steps {
			computeUS := int64(share) * 1000 // 1 ms a sample on rank 0
			if r == 1 {
				computeUS *= 2
			}
			for j := range grad {
				grad[j] = float32(share)
			}
			if _, err := run.step(unsafe.Pointer(&grad[0]), int64(share), computeUS, computeUS); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
			shares := run.d.Plan().Shares
			share = shares[r]
			sizes := make([]int64, 16)
			n, err := microSplit(int64(share), caps[r], sizes)
			if err != nil {
				return err
			}
			if got := sum(sizes[:n]); got != int64(share) {
				return fmt.Errorf("step %d: micro-batches %v sum to %d, not the share %d", i, sizes[:n], got, share)
			}
			if slices.Max(sizes[:n]) > caps[r] {
				return fmt.Errorf("step %d: micro-batches %v exceed rank %d's cap %d", i, sizes[:n], r, caps[r])
			}
			mu.Lock()
			last[r] = slices.Clone(shares)
			mu.Unlock()
		}
		_, err = run.flush(unsafe.Pointer(&grad[0]))
		return err
	})
	if !slices.Equal(last[0], last[1]) {
		t.Fatalf("the ranks planned different shares: %v and %v", last[0], last[1])
	}
	if last[0][0] != 20 || last[0][1] != 44 {
		t.Errorf("shares %v: want rank 0 held to 2 passes of its cap (20) and rank 1 the rest (44)", last[0])
	}
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// TestMicroSplitAndCap checks the stateless calls the hook splits with:
// the fewest near-equal micro-batches under the cap, and the cap from
// free memory (95% of it).
func TestMicroSplitAndCap(t *testing.T) {
	dst := make([]int64, 8)
	for _, c := range []struct {
		rows, limit int64
		want        []int64
	}{
		{48, 20, []int64{16, 16, 16}}, {10, 4, []int64{4, 3, 3}}, {7, 0, []int64{7}}, {5, 5, []int64{5}}, {0, 3, nil},
	} {
		n, err := microSplit(c.rows, c.limit, dst)
		if err != nil || !slices.Equal(dst[:n], c.want) {
			t.Errorf("split %d under %d: %v %v, want %v", c.rows, c.limit, dst[:n], err, c.want)
		}
	}
	for _, c := range []struct{ rows, limit int64 }{{-1, 3}, {3, -1}, {100, 3}} {
		if _, err := microSplit(c.rows, c.limit, dst); code(err) != codeInvalid {
			t.Errorf("split %d under %d: %v, want invalid", c.rows, c.limit, err)
		}
	}
	if b, err := parseSize("16GiB,32GiB", 1, 2); err != nil || b != 32<<30 {
		t.Errorf("rank 1's size of 16GiB,32GiB: %d %v", b, err)
	}
	for _, c := range []struct {
		spec        string
		rank, world int64
	}{{"1,2,3", 0, 2}, {"lots", 0, 1}, {"1", 2, 2}, {"1", 0, 0}} {
		if _, err := parseSize(c.spec, c.rank, c.world); code(err) != codeInvalid {
			t.Errorf("size %q for rank %d of %d: %v, want invalid", c.spec, c.rank, c.world, err)
		}
	}
	if b, err := microCap(2000, 100); err != nil || b != 19 {
		t.Errorf("cap of 2000 bytes at 100 a sample: %d %v; want 19", b, err)
	}
	if _, err := microCap(50, 100); code(err) != codeInvalid {
		t.Errorf("a cap below one sample: %v, want invalid", err)
	}
}

// TestStragglerMemoryBadArguments: the caps must be one per rank,
// non-negative, and hold the global batch within the passes.
func TestStragglerMemoryBadArguments(t *testing.T) {
	ss := openWorld(t, 1)
	for _, c := range []struct {
		caps  []int64
		accum int64
	}{
		{nil, 2}, {[]int64{4, 4}, 2}, {[]int64{-1}, 2}, {[]int64{4}, -1}, {[]int64{4}, 1},
	} {
		if _, err := openStragglerMemory(ss[0], 4, "shares", 16, flagSampled, 0, c.caps, c.accum); code(err) != codeInvalid {
			t.Errorf("caps %v, %d passes: %v, want invalid", c.caps, c.accum, err)
		}
	}
}
