package straggler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkExactlyOnce fails unless the ranks' computed units are every unit of
// the step exactly once and their samples sum to the batch.
func checkExactlyOnce(t *testing.T, shares []int, unitSize int, computed [][]int) {
	t.Helper()
	units, _ := ReassignUnits(shares, unitSize)
	seen := make([]int, len(units))
	samples, batch := 0, 0
	for _, sh := range shares {
		batch += sh
	}
	for _, us := range computed {
		for _, u := range us {
			seen[u]++
			samples += units[u].Hi - units[u].Lo
		}
	}
	for u, c := range seen {
		if c != 1 {
			t.Fatalf("unit %d (owner %d) computed %d times; computed %v", u, units[u].Owner, c, computed)
		}
	}
	if samples != batch {
		t.Fatalf("ranks computed %d samples, the batch is %d", samples, batch)
	}
}

// TestReassignExactlyOnceAnyOrder is the protocol's invariant: with random
// speeds, random shares and every message delivered in a random order (no
// FIFO between two ranks), every rank's step ends and every unit is
// computed exactly once.
func TestReassignExactlyOnceAnyOrder(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 37))
			n := 1 + rng.IntN(9)
			shares := make([]int, n)
			for r := range shares {
				shares[r] = rng.IntN(40)
			}
			cfg := DefaultReassignConfig(1 + rng.IntN(4))
			cfg.Helpers = rng.IntN(n + 1)
			cfg.Trigger = rng.Float64() * 0.3
			cfg.Initial = 0.01 + rng.Float64()*0.2
			cfg.ClaimAhead = rng.IntN(3)
			speed := make([]int, n) // virtual ticks per unit
			for r := range speed {
				speed[r] = 1 + rng.IntN(20)
			}
			rs := make([]*Reassigner, n)
			for r := range rs {
				var err error
				if rs[r], err = NewReassigner(cfg, r, 5, shares, 100); err != nil {
					t.Fatal(err)
				}
			}
			type busy struct{ unit, until int }
			working := map[int]busy{}
			var pool []ReassignMsg
			now := 0
			collect := func(r int) {
				if _, ok := working[r]; !ok {
					if u, ok := rs[r].Start(time.Duration(now)); ok {
						working[r] = busy{u, now + speed[r]*(1+rng.IntN(3))}
					}
				}
				pool = append(pool, rs[r].Ready()...)
			}
			for r := range rs {
				collect(r)
			}
			for iter := 0; ; iter++ {
				if iter > 1_000_000 {
					t.Fatal("no end")
				}
				all := true
				for _, x := range rs {
					all = all && x.Done()
				}
				if all && len(working) == 0 {
					break
				}
				// Either deliver a random message or let time pass to the
				// next unit's end.
				if len(pool) > 0 && (len(working) == 0 || rng.IntN(3) > 0) {
					i := rng.IntN(len(pool))
					m := pool[i]
					pool = slices.Delete(pool, i, i+1)
					if err := rs[m.To].Receive(m, time.Duration(now)); err != nil {
						t.Fatal(err)
					}
					collect(m.To)
					continue
				}
				if len(working) == 0 {
					t.Fatalf("stalled: no message, no work, ranks not done")
				}
				next, who := -1, -1
				for r := range n {
					if b, ok := working[r]; ok && (next < 0 || b.until < next) {
						next, who = b.until, r
					}
				}
				now = next
				if err := rs[who].Finish(working[who].unit, time.Duration(now)); err != nil {
					t.Fatal(err)
				}
				delete(working, who)
				collect(who)
			}
			// Late messages change nothing.
			for _, m := range pool {
				if err := rs[m.To].Receive(m, time.Duration(now)); err != nil {
					t.Fatal(err)
				}
				if _, ok := rs[m.To].Start(time.Duration(now)); ok {
					t.Fatalf("rank %d starts a unit after the step", m.To)
				}
			}
			computed := make([][]int, n)
			for r, x := range rs {
				computed[r] = x.Computed()
			}
			checkExactlyOnce(t, shares, cfg.UnitSize, computed)
		})
	}
}

// TestSimulateReassignRandom runs the virtual-time step of the simulator
// with random speeds, late starts and stalls and checks the invariant, and
// that a step is never longer than with no help (BSP), give or take the
// messages' latency.
func TestSimulateReassignRandom(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		n := 2 + rng.IntN(12)
		shares := make([]int, n)
		for r := range shares {
			shares[r] = 8 + rng.IntN(32)
		}
		cfg := DefaultReassignConfig(1 + rng.IntN(3))
		per := make([]time.Duration, n)
		begin := make([]time.Duration, n)
		bsp := time.Duration(0)
		for r := range n {
			per[r] = time.Duration(1+rng.IntN(10)) * time.Millisecond
			if rng.IntN(4) == 0 {
				begin[r] = time.Duration(rng.IntN(50)) * time.Millisecond
			}
		}
		_, spans := ReassignUnits(shares, cfg.UnitSize)
		for r := range n {
			bsp = max(bsp, begin[r]+time.Duration(spans[r].Len())*per[r])
		}
		const lat = 20 * time.Microsecond
		out, err := SimulateReassign(ReassignStep{Config: cfg, Step: 1, Shares: shares, Expect: 100 * time.Millisecond, Begin: begin,
			UnitTime: func(r int, _ Unit, _ time.Duration) time.Duration { return per[r] }, Latency: lat})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkExactlyOnce(t, shares, cfg.UnitSize, out.Computed)
		// A grant is made only when the owner expects the helper to end it
		// first, from the paces measured so far: a misjudged one costs at
		// most a follow-up's units at the slowest pace, and the Done and
		// answers a few latencies.
		worst := time.Duration(0)
		for _, p := range per {
			worst = max(worst, p)
		}
		own := 0
		for _, sp := range spans {
			own = max(own, sp.Len())
		}
		chunk := 2*max(1, int(math.Ceil(cfg.Initial*float64(own)))) + cfg.ClaimAhead
		if out.End > bsp+time.Duration(chunk)*worst+10*lat {
			t.Errorf("seed %d: step ends at %v, BSP's at %v", seed, out.End, bsp)
		}
	}
}

// TestReassignFinishChecksTheUnit: a Finish of a unit not started is the
// caller's error, not a unit counted.
func TestReassignFinishChecksTheUnit(t *testing.T) {
	r, err := NewReassigner(DefaultReassignConfig(1), 0, 0, []int{4, 4}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(0, 0); err == nil {
		t.Fatal("Finish before Start: no error")
	}
	u, ok := r.Start(0)
	if !ok || u != 0 {
		t.Fatalf("Start = %d, %v; want unit 0", u, ok)
	}
	if err := r.Finish(u+1, 1); err == nil {
		t.Fatal("Finish of another unit: no error")
	}
	if err := r.Finish(u, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.Computed(); !slices.Equal(got, []int{0}) {
		t.Fatalf("computed %v, want [0]", got)
	}
}
