package straggler

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// affineReport builds the report of step in which rank r, a member,
// computed plan's share (or until the budget) at tau[r] per sample after a
// fixed delay[r]: compute = delay + samples·tau. A budget cuts the rank's
// arrival short of its delay where cutsDelay (as the synthetic bench's
// timer sleep does), else the rank arrives when its delay is over.
func affineReport(plan Plan, tau, delay []time.Duration, cutsDelay bool) Report {
	n := len(tau)
	rep := Report{Step: plan.Step, Current: make([]RankReport, n), Child: make([]ChildReport, n)}
	for r := 0; r < n; r++ {
		if !plan.IsMember(r) {
			continue
		}
		samples, cut := plan.Shares[r], false
		if plan.Budget > 0 {
			samples, cut = max(0, int((plan.Budget-delay[r])/tau[r])), true
		}
		compute := delay[r] + time.Duration(samples)*tau[r]
		arrival := compute
		if cut {
			arrival = max(plan.Budget, delay[r])
			if cutsDelay {
				arrival = plan.Budget
			}
		}
		rep.Current[r] = RankReport{Present: true, Samples: samples, Compute: compute, Arrival: arrival, Cut: cut, Wait: 5 * time.Millisecond}
		rep.Applied += samples
	}
	return rep
}

func observeAffine(t *testing.T, p *Policy, steps int, tau, delay []time.Duration, cutsDelay bool) {
	t.Helper()
	for s := 0; s < steps; s++ {
		if _, err := p.Observe(affineReport(p.Plan(), tau, delay, cutsDelay)); err != nil {
			t.Fatal(err)
		}
	}
}

func sum(xs []int) int {
	out := 0
	for _, x := range xs {
		out += x
	}
	return out
}

func TestAffineTimeWaterFillsOverIntercepts(t *testing.T) {
	cases := []struct {
		m    int
		a, b []float64
		want float64
	}{
		{256, []float64{0, 0, 0, 0}, []float64{2, 2, 2, 2}, 128},             // BalancedTime
		{256, []float64{0, 128, 0, 0}, []float64{2, 2, 2, 2}, 160},           // (M·b + a)/n: the delayed rank takes part
		{256, []float64{0, 128, 0, 0, 0, 0, 0, 0}, filledF(8, 2), 512.0 / 7}, // its delay alone exceeds the others' time
		{90, []float64{0, 0, 0}, []float64{1, 2, 6}, 54},                     // proportional: 54 + 27 + 9 samples
	}
	for i, c := range cases {
		if got := AffineTime(c.m, c.a, c.b); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("case %d: AffineTime(%d, %v, %v) = %v, want %v", i, c.m, c.a, c.b, got, c.want)
		}
	}
	shares := AffineShares(256, []float64{0, 128, 0, 0}, []float64{2, 2, 2, 2}, 1, nil)
	if !slices.Equal(shares, []int{80, 16, 80, 80}) {
		t.Errorf("AffineShares: %v, want [80 16 80 80] (every rank finishes at 160)", shares)
	}
	out := []bool{false, true, false, false}
	if shares := AffineShares(256, []float64{0, 128, 0, 0}, []float64{2, 2, 2, 2}, 1, out); shares[1] != 0 || sum(shares) != 256 {
		t.Errorf("AffineShares with rank 1 out: %v, want rank 1 at 0 and 256 in all", shares)
	}
}

func filledF(n int, v float64) []float64 { return filled(n, v) }

// A rank with a fixed delay that the others can absorb (4 ranks, 256
// samples at 2 ms, +128 ms on rank 1: balanced 128 ms, with the delay
// 160 ms) gets the intercept-aware share — the 16 samples that finish
// with the others at 160 ms — and stays a member: not the least share
// that time ∝ samples drives it to, where it is still 128 ms late.
func TestAFixedDelayGetsTheInterceptAwareShare(t *testing.T) {
	p := newPolicy(t, NameShares, 4, 256)
	tau := durations(2, 2, 2, 2)
	delay := durations(0, 128, 0, 0)
	observeAffine(t, p, 12, tau, delay, false)
	plan := p.Plan()
	if plan.Mode.evicts() || !plan.IsMember(1) {
		t.Fatalf("plan %s: want rank 1 kept in the ring", plan.Dump())
	}
	a, b, ok := p.obs.fits[1].model()
	if !ok || math.Abs(a-128e6) > 1e6 || math.Abs(b-2e6) > 0.05e6 {
		t.Fatalf("rank 1's fit: a %v b %v ok %v, want 128 ms + 2 ms/sample", a, b, ok)
	}
	if _, _, ok := p.obs.fits[0].model(); ok {
		t.Fatal("rank 0, no delay, fitted a material intercept")
	}
	if !slices.Equal(plan.Shares, []int{80, 16, 80, 80}) {
		t.Fatalf("shares %v, want [80 16 80 80]: %s", plan.Shares, plan.Dump())
	}
	for r, a := range plan.Predicted {
		if d := a - 160*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("rank %d predicted at %v, want every rank at 160 ms: %s", r, a, plan.Dump())
		}
	}
}

// A rank whose fixed delay alone exceeds what the others need (8 ranks:
// the other seven finish 256 samples in 73 ms, rank 1 waits 128 ms before
// its first) is late whatever its share: the default excludes it the exact
// way (its rows to the members, every sample fresh) rather than evict it
// with stale gradients — also where a budget cuts its arrival short, so
// that it is never seen late (the synthetic bench).
func TestTheDefaultExcludesARankLateWhateverItsShare(t *testing.T) {
	for _, name := range []string{NameAdaptive, NameShares} {
		for _, cuts := range []bool{false, true} {
			p := newPolicy(t, name, 8, 256)
			tau := durations(2, 2, 2, 2, 2, 2, 2, 2)
			delay := durations(0, 128, 0, 0, 0, 0, 0, 0)
			observeAffine(t, p, 12, tau, delay, cuts)
			plan := p.Plan()
			if plan.Mode != ModeExclude || !slices.Equal(plan.Evicted, []int{1}) {
				t.Fatalf("%s (budget cuts the delay: %v): plan %s: want rank 1 excluded", name, cuts, plan.Dump())
			}
			if plan.Shares[1] != 0 || sum(plan.Shares) != 256 || plan.Staleness != 0 {
				t.Fatalf("%s: plan %s: want rank 1's rows given to the members, nothing stale", name, plan.Dump())
			}
			want := 512 * time.Millisecond / 7
			if name == NameAdaptive && (plan.Budget < want-time.Millisecond || plan.Budget > want+time.Millisecond) {
				t.Fatalf("%s: budget %v, want the members' balanced %v: %s", name, plan.Budget, want, plan.Dump())
			}
		}
	}
}

// A rank three times slower per sample (slow-3x) has no intercept: it
// keeps proportional shares and its place in the ring.
func TestAProportionallySlowRankKeepsItsShares(t *testing.T) {
	for _, name := range []string{NameAdaptive, NameShares} {
		p := newPolicy(t, name, 4, 256)
		tau := durations(2, 2, 6, 2)
		observeAffine(t, p, 12, tau, make([]time.Duration, 4), false)
		plan := p.Plan()
		if plan.Mode.evicts() || !plan.IsMember(2) {
			t.Fatalf("%s: plan %s: want the slow rank kept in the ring", name, plan.Dump())
		}
		if m := p.affineModel(); m != nil {
			t.Fatalf("%s: a proportional slowdown fitted intercepts %v", name, m.a)
		}
		if name == NameShares && (plan.Shares[2] < 25 || plan.Shares[2] > 26 || sum(plan.Shares) != 256) {
			t.Fatalf("%s: shares %v, want about [77 77 25.6 77] (∝ speed)", name, plan.Shares)
		}
	}
}

// A rank whose per-sample time varies at random under a budget computes
// as long as the budget whatever its samples: that is no intercept.
func TestRandomSpeedsUnderABudgetFitNoIntercept(t *testing.T) {
	var f affineFit
	budget := 60e6
	for s := 0; s < 40; s++ {
		tau := 1e6 * (1 + float64((s*7919)%13)/4)
		n := int(budget / tau)
		f.observe(n, float64(n)*tau)
	}
	if a, b, ok := f.model(); ok {
		t.Fatalf("fit a %v b %v from random speeds under a budget", a, b)
	}
}

// byKey puts first the same ranks, in the same order where it sorts them
// all, as a stable sort by key would, ties included.
func TestByKeyMatchesAStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		n := 1 + rng.IntN(300)
		keys := make([]float64, n)
		for r := range keys {
			keys[r] = float64(rng.IntN(1 + n/4)) // many ties
		}
		key := func(r int) float64 { return keys[r] }
		want := make([]int, n)
		for r := range want {
			want[r] = r
		}
		slices.SortStableFunc(want, func(x, y int) int { return cmp.Compare(keys[x], keys[y]) })
		for _, k := range []int{0, 1, rng.IntN(n + 1), n - 1, n} {
			got := make([]int, n)
			for r := range got {
				got[r] = r
			}
			byKey(got, k, key)
			if k >= n {
				if !slices.Equal(got, want) {
					t.Fatalf("trial %d: all %d ranks: got %v, want %v", trial, n, got, want)
				}
				continue
			}
			head := slices.Clone(got[:max(k, 0)])
			slices.Sort(head)
			wantHead := slices.Clone(want[:max(k, 0)])
			slices.Sort(wantHead)
			if !slices.Equal(head, wantHead) {
				t.Fatalf("trial %d: least %d of %d: got %v, want %v", trial, k, n, head, wantHead)
			}
			all := slices.Clone(got)
			slices.Sort(all)
			for r := range all {
				if all[r] != r {
					t.Fatalf("trial %d: byKey lost or repeated ranks: %v", trial, got)
				}
			}
		}
	}
}
