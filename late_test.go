package ringtail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"
)

// AllReduceLate over real transports, with the late rank actually late:
// every element type and operator, sizes from empty to several rounds of
// units, one and two channels, over shared memory (the fastboxes) and over
// unix sockets (the general path). The result equals a float64
// reference (within float32 rounding for random float32 and float64
// values; exactly for small integers) and has the same bits on every rank.
func TestAllReduceLateEqualsReferenceOnEveryRank(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []struct {
		n, chans int
		noShm    bool // unix sockets: the general path, not the fastboxes
	}{{4, 1, false}, {4, 2, true}, {8, 1, true}, {8, 2, false}} {
		n, chans := cfg.n, cfg.chans
		comms := startComms(t, n, func(c *Config) { c.Channels, c.DisableShm = chans, cfg.noShm })
		late := n - 1 - chans // a different rank per configuration
		type tc struct {
			dt     DType
			op     Op
			count  int
			random bool // random normal values (float32, float64 only)
		}
		var cases []tc
		for _, dt := range []DType{Float32, Float64, Int32, Int64, Float16, BFloat16, Uint8} {
			for _, op := range []Op{Sum, Avg, Prod, Min, Max} {
				cases = append(cases, tc{dt, op, 4099, false})
			}
		}
		for _, count := range []int{0, 1, n - 1, 13} {
			cases = append(cases, tc{Float32, Sum, count, false}, tc{Int32, Avg, count, false})
		}
		for _, count := range []int{3001, 1 << 17} { // 1<<17: several rounds of units
			cases = append(cases, tc{Float32, Sum, count, true}, tc{Float64, Avg, count, true})
		}
		for _, k := range cases {
			name := fmt.Sprintf("n%d/ch%d/noshm%v/late%d/%v/%v/%d/random%v", n, chans, cfg.noShm, late, k.dt, k.op, k.count, k.random)
			rng := rand.New(rand.NewSource(int64(n*7919 + k.count)))
			value := func(r, i int) float64 { return float64((r*3+i)%4 + 1) }
			if k.op == Prod {
				value = func(r, i int) float64 { return float64((r+i)%2 + 1) } // 2^n fits uint8
			}
			vals := make([][]float64, n)
			bufs := make([]Buffer, n)
			for r := range bufs {
				vals[r] = make([]float64, k.count)
				bufs[r] = Raw(make([]byte, k.count*k.dt.Size()), k.dt)
				for i := range vals[r] {
					v := value(r, i)
					if k.random {
						v = rng.NormFloat64()
						if k.dt == Float32 {
							v = float64(float32(v))
						}
					}
					vals[r][i] = v
					put(bufs[r], i, v)
				}
			}
			noErrors(t, each(comms, func(r int, c *Comm) error {
				if r == late {
					// Late for real: the others start without it. Not a
					// synchronisation: the result does not depend on it.
					if err := Sleep(ctx, 5*time.Millisecond); err != nil {
						return err
					}
				}
				return c.AllReduceLate(ctx, bufs[r], k.op, late)
			}))
			for r := 1; r < n; r++ {
				if !bytes.Equal(bufs[r].Bytes, bufs[0].Bytes) {
					t.Fatalf("%s: rank %d's result differs from rank 0's", name, r)
				}
			}
			for i := 0; i < k.count; i++ {
				want, abs := vals[0][i], math.Abs(vals[0][i])
				for r := 1; r < n; r++ {
					v := vals[r][i]
					abs += math.Abs(v)
					switch k.op {
					case Sum, Avg:
						want += v
					case Prod:
						want *= v
					case Min:
						want = math.Min(want, v)
					case Max:
						want = math.Max(want, v)
					}
				}
				if k.op == Avg {
					want /= float64(n)
					abs /= float64(n)
					if k.dt == Int32 || k.dt == Int64 || k.dt == Uint8 {
						want = math.Trunc(want)
					}
				}
				tol := 0.0
				switch {
				case k.random:
					tol = float64(n+1) * 0x1p-23 * abs // n roundings in float32 at most
				case k.op == Avg && (k.dt == Float16 || k.dt == BFloat16):
					tol = 0x1p-7 * abs // the quotient rounded to 16 bits
				}
				if got := get(bufs[0], i); math.Abs(got-want) > tol {
					t.Fatalf("%s: elem %d = %v, want %v (±%g)", name, i, got, want, tol)
				}
			}
		}
	}
}

// A late rank that names no rank of the world is an invalid call: the
// caller gets the reason and every other rank fails at once, as with any
// invalid call.
func TestAllReduceLateRejectsABadLateRank(t *testing.T) {
	comms := startComms(t, 3, nil)
	ctx := context.Background()
	errs := each(comms, func(r int, c *Comm) error {
		late := 1
		if r == 2 {
			late = 3
		}
		return c.AllReduceLate(ctx, Float32s(make([]float32, 100)), Sum, late)
	})
	var e *Error
	if !errors.As(errs[2], &e) || e.Kind != KindLocal {
		t.Fatalf("rank 2: got %v, want a local error", errs[2])
	}
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: no error", r)
		}
	}
	t.Logf("rank 2 says: %v", errs[2])
}

// A single rank is its own late rank: the call returns its buffer (Avg
// divides by one).
func TestAllReduceLateOnOneRank(t *testing.T) {
	comms := startComms(t, 1, nil)
	v := []float32{1.5, -2, 3}
	if err := comms[0].AllReduceLate(context.Background(), Float32s(v), Avg, 0); err != nil {
		t.Fatal(err)
	}
	if v[0] != 1.5 || v[1] != -2 || v[2] != 3 {
		t.Fatalf("got %v", v)
	}
}
