package ringtail

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/engine"
)

// value is what rank from puts in element i of its block for rank to.
func a2aValue(from, to, i int) int32 { return int32(from*1_000_000 + to*10_000 + i) }

func TestAllToAllEqualsTranspose(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, chans := range []int{1, 2} {
			comms := startComms(t, n, func(c *Config) { c.Channels = chans; c.SmallBytes = 64 })
			for _, block := range []int{0, 1, 5, 40, 3000} { // 40 × 4 B > SmallBytes: split over the channels
				name := fmt.Sprintf("n%d/ch%d/block%d", n, chans, block)
				recv := make([][]int32, n)
				noErrors(t, each(comms, func(r int, c *Comm) error {
					send := make([]int32, n*block)
					for q := range n {
						for i := range block {
							send[q*block+i] = a2aValue(r, q, i)
						}
					}
					recv[r] = make([]int32, n*block)
					return c.AllToAll(context.Background(), Int32s(send), Int32s(recv[r]))
				}))
				for r := range n {
					for q := range n {
						for i := range block {
							if got, want := recv[r][q*block+i], a2aValue(q, r, i); got != want {
								t.Fatalf("%s: rank %d block %d elem %d = %d want %d", name, r, q, i, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestAllToAllVUnevenEqualsTranspose(t *testing.T) {
	const n = 4
	comms := startComms(t, n, func(c *Config) { c.Channels = 2; c.SmallBytes = 64 })
	rng := rand.New(rand.NewSource(3))
	for trial := range 6 {
		counts := make([][]int, n) // counts[from][to]
		for r := range counts {
			counts[r] = make([]int, n)
			for q := range counts[r] {
				if rng.Intn(4) > 0 {
					counts[r][q] = rng.Intn(100)
				}
			}
		}
		recv := make([][]int32, n)
		noErrors(t, each(comms, func(r int, c *Comm) error {
			var send []int32
			sc, rc := make([]int, n), make([]int, n)
			total := 0
			for q := range n {
				sc[q], rc[q] = counts[r][q], counts[q][r]
				total += rc[q]
				for i := range counts[r][q] {
					send = append(send, a2aValue(r, q, i))
				}
			}
			recv[r] = make([]int32, total)
			return c.AllToAllV(context.Background(), Int32s(send), sc, Int32s(recv[r]), rc)
		}))
		for r := range n {
			off := 0
			for q := range n {
				for i := range counts[q][r] {
					if got, want := recv[r][off+i], a2aValue(q, r, i); got != want {
						t.Fatalf("trial %d: rank %d from %d elem %d = %d want %d", trial, r, q, i, got, want)
					}
				}
				off += counts[q][r]
			}
		}
	}
	// The communicator is in step afterwards.
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.Barrier(context.Background()) }))
}

// Split sizes that disagree fail every rank before any data moves, and
// the ranks of the pair say which counts disagree.
func TestAllToAllVDisagreeingCountsFailEveryRank(t *testing.T) {
	const n = 3
	comms := startComms(t, n, nil)
	errs := each(comms, func(r int, c *Comm) error {
		sc, rc := []int{2, 2, 2}, []int{2, 2, 2}
		if r == 2 {
			rc[1] = 3 // rank 1 sends 2
		}
		total := 0
		for _, v := range rc {
			total += v
		}
		return c.AllToAllV(context.Background(), Int32s(make([]int32, 6)), sc, Int32s(make([]int32, total)), rc)
	})
	for r, err := range errs {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("rank %d: %v, want an *Error", r, err)
		}
		if r == 1 || r == 2 {
			if !strings.Contains(err.Error(), "rank 1 sends 2 elements to rank 2, which expects 3") {
				t.Errorf("rank %d: %v does not name the disagreement", r, err)
			}
		}
	}
}

func TestAllToAllRejectsBadShapes(t *testing.T) {
	ctx := context.Background()
	buf := make([]int32, 8)
	for _, tc := range []struct {
		name string
		call func(c *Comm) error
		want string
	}{
		{"odd", func(c *Comm) error { return c.AllToAll(ctx, Int32s(make([]int32, 3)), Int32s(make([]int32, 3))) }, "multiple of the world size"},
		{"types", func(c *Comm) error { return c.AllToAll(ctx, Int32s(make([]int32, 2)), Float32s(make([]float32, 2))) }, "send is int32 but recv is float32"},
		{"overlap", func(c *Comm) error { return c.AllToAll(ctx, Int32s(buf[:4]), Int32s(buf[2:6])) }, "overlap"},
	} {
		comms := startComms(t, 2, nil) // an invalid call fails its communicator
		if err := tc.call(comms[0]); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		var e *Error
		if err := comms[1].Barrier(ctx); !errors.As(err, &e) {
			t.Errorf("%s: the peer's next call returned %v, want the abort", tc.name, err)
		}
	}
	if err := engine.CheckCounts(2, 0, Int32, Int32, 3, 3, []int{1, 2}, []int{1, 1}); err == nil ||
		!strings.Contains(err.Error(), "add up") {
		t.Errorf("counts that do not add up: %v", err)
	}
	if err := engine.CheckCounts(2, 0, Int32, Int32, 3, 3, []int{-1, 4}, []int{-1, 4}); err == nil ||
		!strings.Contains(err.Error(), "negative") {
		t.Errorf("negative count: %v", err)
	}
	if err := engine.CheckCounts(2, 1, Int32, Int32, 3, 3, []int{1, 2}, []int{2, 1}); err == nil ||
		!strings.Contains(err.Error(), "sends itself") {
		t.Errorf("own block: %v", err)
	}
}
