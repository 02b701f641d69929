package inject

import (
	"math"
	"testing"
	"time"
)

const base = 100 * time.Millisecond

func mustInjector(t *testing.T, spec string, world int) *Injector {
	t.Helper()
	s, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	in, err := New(s, world)
	if err != nil {
		t.Fatalf("New(%q, %d): %v", spec, world, err)
	}
	return in
}

func TestDeterministicSlowRankScalesOnlyItsCompute(t *testing.T) {
	in := mustInjector(t, "slow=2:3x", 4)
	for step := 0; step < 50; step++ {
		for r := 0; r < 4; r++ {
			eff := in.At(r, step, base)
			want, wantCause := base, Cause(0)
			if r == 2 {
				want, wantCause = 3*base, CauseSlow
			}
			if eff.Compute != want || eff.Causes != wantCause || eff.Fault.Kind != FaultNone {
				t.Fatalf("rank %d step %d: %+v, want compute %v cause %b", r, step, eff, want, wantCause)
			}
		}
	}
	if eff := in.At(2, 0, base); eff.EndSlowdown != 3 {
		t.Fatalf("slow rank EndSlowdown = %v, want 3", eff.EndSlowdown)
	}
}

func TestPersistentStragglersAddTheirDelayEveryStep(t *testing.T) {
	in := mustInjector(t, "persistent=1,3:+40ms;persistent=3:2x", 4)
	for step := 0; step < 20; step++ {
		if got := in.At(1, step, base).Compute; got != base+40*time.Millisecond {
			t.Fatalf("rank 1 step %d compute %v, want %v", step, got, base+40*time.Millisecond)
		}
		if got := in.At(3, step, base).Compute; got != 2*base+40*time.Millisecond {
			t.Fatalf("rank 3 step %d compute %v, want %v", step, got, 2*base+40*time.Millisecond)
		}
		if got := in.At(0, step, base).Compute; got != base {
			t.Fatalf("rank 0 step %d compute %v, want unslowed %v", step, got, base)
		}
	}
}

func TestFaultsFireOnlyAtTheirStep(t *testing.T) {
	in := mustInjector(t, "kill=2@7;freeze=1@3:250ms;freeze=0@5", 4)
	want := map[[2]int]Fault{
		{2, 7}: {Kind: FaultKill, Rank: 2, Step: 7},
		{1, 3}: {Kind: FaultFreeze, Rank: 1, Step: 3, Freeze: 250 * time.Millisecond},
		{0, 5}: {Kind: FaultFreeze, Rank: 0, Step: 5},
	}
	for step := 0; step < 12; step++ {
		for r := 0; r < 4; r++ {
			got := in.At(r, step, base).Fault
			if got != want[[2]int{r, step}] {
				t.Errorf("rank %d step %d fault %+v, want %+v", r, step, got, want[[2]int{r, step}])
			}
		}
	}
}

func TestSameSeedSameEffectsInAnyCallOrder(t *testing.T) {
	const spec = "seed=7;flexrr-slow=0.05:150%;powerlaw=5;transient=0.6:period=10:on=4;persistent=2:+3ms"
	a := mustInjector(t, spec, 8)
	b := mustInjector(t, a.spec.String(), 8)
	const steps = 200
	fwd := make([]Effect, 0, 8*steps)
	for step := 0; step < steps; step++ {
		for r := 0; r < 8; r++ {
			fwd = append(fwd, a.At(r, step, base))
		}
	}
	i := len(fwd) - 1
	for step := steps - 1; step >= 0; step-- {
		for r := 7; r >= 0; r-- {
			if got := b.At(r, step, base); got != fwd[i] {
				t.Fatalf("rank %d step %d: reverse-order call gave %+v, forward %+v", r, step, got, fwd[i])
			}
			i--
		}
	}
	other := mustInjector(t, "seed=8;flexrr-slow=0.05:150%;powerlaw=5;transient=0.6:period=10:on=4;persistent=2:+3ms", 8)
	differ := 0
	for step := 0; step < steps; step++ {
		if other.At(0, step, base) != a.At(0, step, base) {
			differ++
		}
	}
	if differ < steps/2 {
		t.Fatalf("seeds 7 and 8 agree on %d of %d steps; the seed is not used", steps-differ, steps)
	}
}

func TestPatternsComposeInTheDocumentedOrder(t *testing.T) {
	// Compute = base·F·P·(1 + d·c) + Σ extra; recover each term separately.
	const seed = "seed=3;"
	pl := mustInjector(t, seed+"powerlaw=4", 4)
	sw := mustInjector(t, seed+"flexrr-slow=0.2:50%", 4)
	all := mustInjector(t, seed+"powerlaw=4;flexrr-slow=0.2:50%;slow=1:2x;persistent=1:+7ms", 4)
	for step := 0; step < 100; step++ {
		p := float64(pl.At(1, step, base).Compute) / float64(base)
		c := (float64(sw.At(1, step, base).Compute)/float64(base) - 1) / 0.5
		want := time.Duration(float64(base)*2*p*(1+0.5*c)) + 7*time.Millisecond
		got := all.At(1, step, base).Compute
		if d := got - want; d < -time.Microsecond || d > time.Microsecond { // p and c are read back from whole nanoseconds
			t.Fatalf("step %d: composed compute %v, want %v (p=%.4f c=%.4f)", step, got, want, p, c)
		}
	}
}

func TestRanksOutsideTheWorldAreUntouched(t *testing.T) {
	in := mustInjector(t, "slow=0:2x;powerlaw=3", 2)
	for _, r := range []int{-1, 2, 100} {
		if eff := in.At(r, 5, base); eff.Compute != base || eff.Causes != 0 {
			t.Errorf("rank %d: %+v, want untouched", r, eff)
		}
	}
	if eff := in.At(0, -1, base); eff.Compute != base {
		t.Errorf("negative step: %+v, want untouched", eff)
	}
	if math.IsNaN(in.At(1, 1, 0).EndSlowdown) {
		t.Errorf("zero base gave NaN EndSlowdown")
	}
}
