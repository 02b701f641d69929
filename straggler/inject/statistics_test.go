package inject

import (
	"math"
	"testing"
)

// slowWorkerExpectation computes, independently of the injector, the
// expected covered fraction of a step and the probability that a step is
// touched at all, for steps ≥ 2 of the slow-worker pattern.
func slowWorkerExpectation(p float64) (coverage, touched float64) {
	survive := func(u float64) float64 { return math.Max(0, 1-u/slowWorkerMaxPeriod) } // P(L > u)
	const grid = 2000
	for g := 0; g < grid; g++ {
		x := (float64(g) + 0.5) / grid // position within the step
		notCovered := 1.0
		for j := -20; j < 10; j++ { // delay points from two steps back
			start := float64(j) / slowWorkerPoints
			if start > x {
				break
			}
			notCovered *= 1 - p*survive(x-start)
		}
		coverage += (1 - notCovered) / grid
	}
	untouched := math.Pow(1-p, slowWorkerPoints)
	for j := 1; j <= 20; j++ {
		untouched *= 1 - p*survive(float64(j)/slowWorkerPoints)
	}
	return coverage, 1 - untouched
}

func TestFlexRRSlowWorkerSlowsTheExpectedFraction(t *testing.T) {
	for _, p := range []float64{0.01, 0.1} {
		in := mustInjector(t, "seed=11;flexrr-slow="+formatFloat(p)+":100%", 64)
		wantCov, wantTouched := slowWorkerExpectation(p)
		var cov, touched, n float64
		for step := 2; step < 802; step++ {
			for r := 0; r < 64; r++ {
				eff := in.At(r, step, base)
				c := float64(eff.Compute-base) / float64(base) // d = 100%
				cov += c
				if c > 0 {
					touched++
				}
				n++
			}
		}
		cov, touched = cov/n, touched/n
		if math.Abs(cov-wantCov) > 0.1*wantCov+0.003 {
			t.Errorf("p=%v: mean slowed fraction %.4f, want %.4f", p, cov, wantCov)
		}
		if math.Abs(touched-wantTouched) > 0.1*wantTouched+0.003 {
			t.Errorf("p=%v: fraction of slowed steps %.4f, want %.4f", p, touched, wantTouched)
		}
		t.Logf("p=%v: slowed fraction %.4f (expected %.4f), slowed steps %.4f (expected %.4f)", p, cov, wantCov, touched, wantTouched)
	}
}

func TestFlexRRDelayIntensityMeansRunningThatMuchSlower(t *testing.T) {
	// With p = 1 every step is wholly covered from step 2 on: 100% delay
	// doubles the compute, 300% quadruples it.
	for _, c := range []struct {
		spec string
		want float64
	}{{"flexrr-slow=1:100%", 2}, {"flexrr-slow=1:300%", 4}} {
		in := mustInjector(t, c.spec, 2)
		for step := 2; step < 20; step++ {
			eff := in.At(1, step, base)
			if got := float64(eff.Compute) / float64(base); math.Abs(got-c.want) > 1e-6 || eff.EndSlowdown != c.want {
				t.Fatalf("%s step %d: compute ×%.6f, end slowdown %v; want ×%v", c.spec, step, got, eff.EndSlowdown, c.want)
			}
		}
	}
}

func TestTransientDisturbsAboutThirtyPercentOfRanksPerCycle(t *testing.T) {
	const world, period, on, cycles = 256, 10, 4, 40
	in := mustInjector(t, "seed=5;transient=0.5:period=10:on=4", world)
	hit := 0
	for c := 0; c < cycles; c++ {
		for r := 0; r < world; r++ {
			first := in.At(r, c*period, base)
			disturbed := first.Causes&CauseTransient != 0
			if disturbed {
				hit++
				if first.Compute != base+base/2 {
					t.Fatalf("disturbed step compute %v, want base + 0.5·sleep(1x) = %v", first.Compute, base+base/2)
				}
			}
			for s := c*period + 1; s < (c+1)*period; s++ {
				got := in.At(r, s, base).Causes&CauseTransient != 0
				if want := disturbed && s%period < on; got != want {
					t.Fatalf("rank %d step %d disturbed=%v, want %v (duty cycle %d/%d)", r, s, got, want, on, period)
				}
			}
		}
	}
	frac := float64(hit) / (world * cycles)
	if math.Abs(frac-DefaultTransientFraction) > 0.02 {
		t.Fatalf("disturbed fraction %.4f, want %.2f ± 0.02", frac, DefaultTransientFraction)
	}
	t.Logf("disturbed (rank, cycle) fraction %.4f", frac)
}

func TestPowerLawMeanMatchesItsFormula(t *testing.T) {
	for _, alpha := range []float64{4, 7, 11} {
		in := mustInjector(t, "seed=9;powerlaw="+formatFloat(alpha), 64)
		var sum, over2, n float64
		for step := 0; step < 2000; step++ {
			for r := 0; r < 64; r++ {
				f := float64(in.At(r, step, base).Compute) / float64(base)
				if f < 1 {
					t.Fatalf("α=%v: factor %v below the cut-off 1", alpha, f)
				}
				sum += f
				if f > 2 {
					over2++
				}
				n++
			}
		}
		mean := sum / n
		want := (alpha - 1) / (alpha - 2) // E[t]/t₀ of the Pareto law
		if math.Abs(mean-want) > 0.01*want {
			t.Errorf("α=%v: mean factor %.4f, want (α−1)/(α−2) = %.4f ± 1%%", alpha, mean, want)
		}
		tail, wantTail := over2/n, math.Pow(2, -(alpha-1))
		if math.Abs(tail-wantTail) > 0.1*wantTail+0.001 {
			t.Errorf("α=%v: P(t > 2t₀) = %.5f, want 2^−(α−1) = %.5f", alpha, tail, wantTail)
		}
		t.Logf("α=%v: mean %.4f (formula %.4f), P(t>2t₀) %.5f (formula %.5f)", alpha, mean, want, tail, wantTail)
	}
}
