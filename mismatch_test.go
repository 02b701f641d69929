package ringtail

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// mismatchOf returns the *Error of kind KindMismatch that err is, or nil.
func mismatchOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) && e.Kind == KindMismatch {
		return e
	}
	return nil
}

// Every rank of a call that some ranks make with other arguments fails
// with a mismatch naming the field, and none waits for its timeout. A rank
// that needs nothing more from the ranks that found the disagreement (the
// true root of a broadcast, once its receiver has acknowledged) may return
// before their abort reaches it; then one of its next calls fails.
func TestDisagreementsFailEveryRankNamingTheField(t *testing.T) {
	cases := []struct {
		name  string
		n     int
		field string
		call  func(r int, c *Comm) error
	}{
		{"broadcast root, 8 bytes", 4, "root", func(r int, c *Comm) error {
			return c.Broadcast(context.Background(), Float32s(make([]float32, 2)), r%2)
		}},
		{"broadcast root, 4 MiB", 4, "root", func(r int, c *Comm) error {
			return c.Broadcast(context.Background(), Float32s(make([]float32, 1<<20)), r%2)
		}},
		// Nobody sends: each waits for the other, the root in its view.
		{"each believes the other is the root", 2, "root", func(r int, c *Comm) error {
			return c.Broadcast(context.Background(), Float32s(make([]float32, 2)), 1-r)
		}},
		{"each believes the other is the root, 4 MiB", 2, "root", func(r int, c *Comm) error {
			return c.Broadcast(context.Background(), Float32s(make([]float32, 1<<20)), 1-r)
		}},
		{"late rank, 8 bytes", 4, "root", func(r int, c *Comm) error {
			return c.AllReduceLate(context.Background(), Float32s(make([]float32, 2)), Sum, r%2)
		}},
		{"late rank, 4 MiB", 4, "root", func(r int, c *Comm) error {
			return c.AllReduceLate(context.Background(), Float32s(make([]float32, 1<<20)), Sum, r%2)
		}},
		// Nobody sends: each waits for the other's data, late in its view.
		{"each believes the other is late", 2, "root", func(r int, c *Comm) error {
			return c.AllReduceLate(context.Background(), Float32s(make([]float32, 1<<20)), Sum, 1-r)
		}},
		{"AllReduceLate where the others call AllReduce", 3, "collective", func(r int, c *Comm) error {
			if r == 0 {
				return c.AllReduceLate(context.Background(), Float32s(make([]float32, 3000)), Sum, 2)
			}
			return c.AllReduce(context.Background(), Float32s(make([]float32, 3000)), Sum)
		}},
		{"a skipped call", 3, "count", func(r int, c *Comm) error {
			if r != 2 {
				if err := c.AllReduce(context.Background(), Float32s(make([]float32, 1000)), Sum); err != nil {
					return err
				}
			}
			return c.AllReduce(context.Background(), Float32s(make([]float32, 3000)), Sum)
		}},
		// Both are the group's first call: only the step labels differ.
		{"a skipped call of the same shape, labelled with steps", 3, "step", func(r int, c *Comm) error {
			for step := range uint64(2) {
				if r == 2 && step == 0 {
					continue
				}
				if err := c.AllReduce(WithStep(context.Background(), step), Float32s(make([]float32, 1000)), Sum); err != nil {
					return err
				}
			}
			return nil
		}},
		{"a skipped subgroup call", 3, "", func(r int, c *Comm) error {
			if r != 1 {
				if err := c.AllReduceAmong(context.Background(), Float32s(make([]float32, 8)), Sum, []int{0, 1, 2}); err != nil {
					return err
				}
			}
			return c.AllReduce(context.Background(), Float32s(make([]float32, 8)), Sum)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comms := startComms(t, tc.n, nil)
			errs := each(comms, func(r int, c *Comm) error {
				if err := tc.call(r, c); err != nil {
					return err
				}
				for range 3 {
					if err := c.Barrier(context.Background()); err != nil {
						return err
					}
				}
				return nil
			})
			for r, err := range errs {
				e := mismatchOf(err)
				if e == nil {
					t.Fatalf("rank %d: got %v, want a mismatch error", r, err)
				}
				if tc.field != "" && !strings.Contains(e.Detail, tc.field) {
					t.Errorf("rank %d: %v does not name the %s", r, err, tc.field)
				}
			}
			t.Logf("rank 0 says: %v", errs[0])
		})
	}
}

// A rank that alone believes it is a broadcast's root only sends; it must
// not return its own data as the result: its Broadcast call itself fails
// with the others' mismatch (they fail then or at their next call), for
// every position of the self-declared root relative to the true one, on
// the tree (small) and the chain (large).
func TestSelfDeclaredBroadcastRootFailsItsCall(t *testing.T) {
	for _, elems := range []int{2, 1 << 20} {
		for target := 1; target < 4; target++ {
			comms := startComms(t, 4, nil)
			errs := each(comms, func(r int, c *Comm) error {
				root := 0
				if r == target {
					root = target
				}
				err := c.Broadcast(context.Background(), Float32s(make([]float32, elems)), root)
				if err != nil || r == target {
					return err
				}
				return c.Barrier(context.Background())
			})
			for r, err := range errs {
				if mismatchOf(err) == nil {
					t.Fatalf("%d elements, rank %d names itself root: rank %d got %v, want a mismatch error", elems, target, r, err)
				}
			}
			if !strings.Contains(errs[target].Error(), "root") {
				t.Errorf("%d elements: the self-declared root's error does not name the root: %v", elems, errs[target])
			}
		}
	}
}
