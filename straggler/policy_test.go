package straggler

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/topology"
)

// report builds the report of step in which rank r computed plan's share
// at tau[r] per sample (or until the budget) and arrived extra[r] later.
func report(plan Plan, tau []time.Duration, extra []time.Duration) Report {
	n := len(tau)
	rep := Report{Step: plan.Step, Current: make([]RankReport, n), Child: make([]ChildReport, n)}
	for r := 0; r < n; r++ {
		if !plan.IsMember(r) {
			continue
		}
		samples, compute, cut := plan.Shares[r], time.Duration(plan.Shares[r])*tau[r], false
		busy := compute
		if plan.Budget > 0 {
			samples, cut = int(plan.Budget/tau[r]), true
			compute, busy = time.Duration(samples)*tau[r], plan.Budget
		}
		var ex time.Duration
		if extra != nil {
			ex = extra[r]
		}
		rep.Current[r] = RankReport{Present: true, Samples: samples, Compute: compute, Arrival: busy + ex, Cut: cut, Wait: 5 * time.Millisecond}
		rep.Applied += samples
	}
	return rep
}

func durations(ms ...float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}

func newPolicy(t testing.TB, name string, n, m int) *Policy {
	t.Helper()
	cfg, err := Preset(name, n, m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEqualSharesMatchTheTrainShard(t *testing.T) {
	if got := EqualShares(10, 4); !slices.Equal(got, []int{3, 3, 2, 2}) {
		t.Fatalf("EqualShares(10, 4) = %v", got)
	}
	if got := EqualShares(2, 4); !slices.Equal(got, []int{1, 1, 0, 0}) {
		t.Fatalf("EqualShares(2, 4) = %v", got)
	}
}

// A 3× slow rank of 4 (AntDT ADJUST_BS): speeds 1, 1, 1/3, 1 sum to 10/3,
// so rank 2 takes 64·0.1 = 6.4 samples and the others 19.2; the budget is
// 64 / (10/3) = 19.2 sample-times, the 1.2× of "capacity lost 1/6".
func TestSharesAndBudgetForOneThreeTimesSlowRank(t *testing.T) {
	tau := []float64{1e6, 1e6, 3e6, 1e6}
	shares, err := ProportionalShares(64, tau, 1)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Max(shares)-slices.Min(shares[:2]) > 1 || shares[2] < 6 || shares[2] > 7 || shares[0]+shares[1]+shares[2]+shares[3] != 64 {
		t.Fatalf("shares %v, want ≈ [19 19 6–7 19] summing to 64", shares)
	}
	if got, want := BalancedTime(64, tau, 0), 19200*time.Microsecond; got != want {
		t.Fatalf("balanced time %v, want %v", got, want)
	}
	if got := BalancedTime(64, tau, 0.1); got != 21120*time.Microsecond {
		t.Fatalf("balanced time with 10%% slack %v", got)
	}
}

func TestPolicyLearnsSpeedsAndKeepsTheRingWhenSharesBalance(t *testing.T) {
	p := newPolicy(t, NameAdaptive, 4, 64)
	tau := durations(1, 1, 3, 1)
	if p.Plan().Budget != 0 || p.Plan().Step != 0 || !slices.Equal(p.Plan().Shares, []int{16, 16, 16, 16}) {
		t.Fatalf("initial plan %s", p.Plan().Dump())
	}
	var plan Plan
	for s := 0; s < 6; s++ {
		var err error
		if plan, err = p.Observe(report(p.Plan(), tau, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if plan.Step != 6 || plan.DecidedAt != 5 {
		t.Fatalf("plan of step %d decided at %d", plan.Step, plan.DecidedAt)
	}
	if plan.Mode != ModeRing || plan.Shares[2] > 7 || plan.Budget != 19200*time.Microsecond {
		t.Fatalf("plan %s: want the ring, rank 2 given ≤ 7 samples, budget ≈ 19.2ms", plan.Dump())
	}
	// Shares hide the straggler from the arrival times, not from AntDT's
	// classification, which looks at equal-share arrivals.
	if len(plan.Classes) != 1 || plan.Classes[0].Rank != 2 || plan.Classes[0].Class != ClassTransient {
		t.Fatalf("classes %v, want rank 2 transient (persistent needs a full long window)", plan.Classes)
	}
}

// What shares cannot fix — a rank that reaches the reduction late whatever
// its batch (here 60 ms after its compute ends) — is evicted, with STAR's
// eviction (shares and stale children, no exact eviction): it computes at
// its own pace as a child and its gradients are folded within the
// staleness bound.
func TestPolicyEvictsWhatSharesCannotFix(t *testing.T) {
	p := sharesWithStaleEviction(t, 4, 64)
	tau := durations(1, 1, 1, 1)
	extra := durations(0, 60, 0, 0)
	for s := 0; s < 3; s++ {
		if _, err := p.Observe(report(p.Plan(), tau, extra)); err != nil {
			t.Fatal(err)
		}
	}
	plan := p.Plan()
	if plan.Mode != ModeEvict || !slices.Equal(plan.Evicted, []int{1}) || !slices.Equal(plan.Members, []int{0, 2, 3}) {
		t.Fatalf("plan %s: want rank 1 evicted", plan.Dump())
	}
	parent, ok := plan.ParentOf(1)
	if !ok || !slices.Contains(plan.Members, parent) || len(plan.Children(parent)) != 1 {
		t.Fatalf("rank 1's parent %d (%v) not a member with one child: %s", parent, ok, plan.Dump())
	}
	if plan.Staleness < 1 || plan.Parents[0].Must {
		t.Fatalf("plan %s: want a staleness bound ≥ 1 and no wait yet", plan.Dump())
	}
	// No gradient of rank 1 folded for Staleness steps: its parent must
	// wait for one.
	k := plan.Staleness
	for s := 0; s < k; s++ {
		if _, err := p.Observe(report(p.Plan(), tau, extra)); err != nil {
			t.Fatal(err)
		}
	}
	if plan = p.Plan(); plan.Mode != ModeEvict || !plan.Parents[0].Must {
		t.Fatalf("after %d steps without rank 1's gradient: %s, want its edge Must", k, plan.Dump())
	}
	// A folded gradient resets the bound.
	rep := report(p.Plan(), tau, extra)
	rep.Child[1] = ChildReport{Count: 1, Samples: 16, Compute: 16 * time.Millisecond, Cycle: 80 * time.Millisecond, Versions: rep.Step - 2}
	if _, err := p.Observe(rep); err != nil {
		t.Fatal(err)
	}
	if plan = p.Plan(); plan.Mode != ModeEvict || plan.Parents[0].Must {
		t.Fatalf("after a folded gradient: %s, want no wait", plan.Dump())
	}
}

// A rank whose compute is on time but whose link is ten times slower slows
// every ring it is in: with the probed bandwidths, the policy evicts it
// (and no compute-speed measure could have seen it).
func TestPolicyEvictsARankBehindASlowLink(t *testing.T) {
	const n, grad = 4, 16 << 20
	bw := make(topology.Matrix, n)
	for i := range bw {
		bw[i] = make([]float64, n)
		for j := range bw[i] {
			bw[i][j] = 1e9
			if i == 3 || j == 3 {
				bw[i][j] = 1e8
			}
		}
	}
	cfg, err := Preset(NameShares, n, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bandwidth, cfg.GradBytes = bw, grad
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tau := durations(6, 6, 6, 6) // 16 samples: ~100 ms of compute
	for s := 0; s < 3; s++ {
		rep := report(p.Plan(), tau, nil)
		for r := range rep.Current {
			rep.Current[r].Wait = 260 * time.Millisecond // the ring through the slow link
		}
		if _, err := p.Observe(rep); err != nil {
			t.Fatal(err)
		}
	}
	plan := p.Plan()
	if plan.Mode != ModeExclude || !slices.Equal(plan.Evicted, []int{3}) || plan.Shares[3] != 0 {
		t.Fatalf("plan %s: want rank 3, behind the slow link, excluded", plan.Dump())
	}
}

// The shares preset leaves a rank that is late whatever its batch out of
// the ring the exact way: its rows go to the members (every step applies
// the whole global batch, fresh), it computes nothing, and after a trial
// period it is offered back — here it is on time again, and rejoins.
func TestTheSharesPresetExcludesWhatSharesCannotFixAndOffersItBack(t *testing.T) {
	p := newPolicy(t, NameShares, 4, 64)
	tau := durations(1, 1, 1, 1)
	extra := durations(0, 60, 0, 0)
	for s := 0; s < 3; s++ {
		if _, err := p.Observe(report(p.Plan(), tau, extra)); err != nil {
			t.Fatal(err)
		}
	}
	plan := p.Plan()
	if plan.Mode != ModeExclude || !slices.Equal(plan.Evicted, []int{1}) || !slices.Equal(plan.Members, []int{0, 2, 3}) {
		t.Fatalf("plan %s: want rank 1 excluded", plan.Dump())
	}
	sum := 0
	for _, b := range plan.Shares {
		sum += b
	}
	if plan.Shares[1] != 0 || sum != 64 || plan.Staleness != 0 || len(plan.Parents) != 1 || plan.Parents[0].Must {
		t.Fatalf("plan %s: want rank 1's rows given to the members, a parent that waits for nothing", plan.Dump())
	}
	// Excluded ranks send nothing; the members report alone. On time
	// again, rank 1 is offered back after the trial period and stays.
	back := -1
	for s := 0; s < 2*minTrial && back < 0; s++ {
		if _, err := p.Observe(report(p.Plan(), tau, nil)); err != nil {
			t.Fatal(err)
		}
		if p.Plan().IsMember(1) {
			back = p.Plan().Step
		}
	}
	if back < 0 {
		t.Fatalf("rank 1 never offered back in %d steps: %s", 2*minTrial, p.Plan().Dump())
	}
	for s := 0; s < 3; s++ {
		if _, err := p.Observe(report(p.Plan(), tau, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if plan := p.Plan(); plan.Mode.evicts() || !plan.IsMember(1) {
		t.Fatalf("rank 1, on time again, back at step %d, is out again: %s", back, plan.Dump())
	}
}

// A probe's absolute bandwidths can be wrong by orders of magnitude (on
// one host, shared-memory links move a probe faster than the latency's
// noise): with a matrix that calls rank 1's links a million times slower
// than they are (8 bytes over a noisy millisecond), while rings measure
// a few milliseconds, the policy still evicts the rank that computes three times slower, not rank 1.
func TestPolicyTrustsMeasuredRingsOverAbsoluteProbeNumbers(t *testing.T) {
	const n = 4
	bw := make(topology.Matrix, n)
	for i := range bw {
		bw[i] = make([]float64, n)
		for j := range bw[i] {
			bw[i][j] = 2e9
			if i == 1 || j == 1 {
				bw[i][j] = 2e3
			}
		}
	}
	cfg, err := Preset(NameSTAR, n, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bandwidth, cfg.GradBytes = bw, 20<<10
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tau := durations(6, 6, 6, 18)
	for s := 0; s < 4; s++ {
		if _, err := p.Observe(report(p.Plan(), tau, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if plan := p.Plan(); plan.Mode != ModeEvict || !slices.Equal(plan.Evicted, []int{3}) {
		t.Fatalf("plan %s: want rank 3, the slow one, evicted", plan.Dump())
	}
}

// The exact mode: one rank late by about a ring time is cheaper to overlap
// than to wait for, with no staleness.
func TestPolicyOverlapsAPredictablyLateRank(t *testing.T) {
	p := newPolicy(t, NameExact, 8, 256)
	tau := durations(1, 1, 1, 1, 1, 1, 1, 1)
	extra := durations(0, 0, 0, 0, 0, 30, 0, 0)
	for s := 0; s < 3; s++ {
		rep := report(p.Plan(), tau, extra)
		for r := range rep.Current {
			rep.Current[r].Wait = 30 * time.Millisecond
		}
		if _, err := p.Observe(rep); err != nil {
			t.Fatal(err)
		}
	}
	plan := p.Plan()
	if plan.Mode != ModeOverlap || plan.Late != 5 || len(plan.Members) != 8 {
		t.Fatalf("plan %s: want the exact overlap waiting for rank 5", plan.Dump())
	}
}

func TestPolicyRejectsReportsOutOfOrder(t *testing.T) {
	p := newPolicy(t, NameAdaptive, 2, 8)
	rep := report(p.Plan(), durations(1, 1), nil)
	rep.Step = 1
	if _, err := p.Observe(rep); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("report of step 1 before step 0: %v", err)
	}
	if _, err := Preset("fastest", 2, 8); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("unknown preset: %v", err)
	}
	if _, err := NewPolicy(Config{World: 4, GlobalBatch: 8, Budget: true}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("budget without shares: %v", err)
	}
	for _, at := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := NewPolicy(Config{World: 4, GlobalBatch: 8, Shares: true, Reassign: true, ReassignAt: at}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("reassign-at %v: %v", at, err)
		}
	}
}

// Every rank feeds its own Policy the same reports (they come out of one
// reduction) and must get byte-identical plans; a policy fed a different
// report must not.
func TestPoliciesFedTheSameReportsDecideByteIdenticalPlans(t *testing.T) {
	const n, steps = 8, 40
	rng := rand.New(rand.NewPCG(1, 2))
	ps := []*Policy{newPolicy(t, NameAdaptive, n, 256), newPolicy(t, NameAdaptive, n, 256), newPolicy(t, NameAdaptive, n, 256)}
	for s := 0; s < steps; s++ {
		tau := make([]time.Duration, n)
		extra := make([]time.Duration, n)
		for r := range tau {
			tau[r] = time.Duration((1 + 3*rng.Float64()*rng.Float64()) * float64(time.Millisecond))
			extra[r] = time.Duration(rng.IntN(40)) * time.Millisecond
		}
		rep := report(ps[0].Plan(), tau, extra)
		var dumps [][]byte
		for i, p := range ps {
			r := rep
			if i == 2 && s == steps/2 {
				r.Current = slices.Clone(rep.Current)
				r.Current[5].Arrival += 200 * time.Millisecond
			}
			plan, err := p.Observe(r)
			if err != nil {
				t.Fatal(err)
			}
			dumps = append(dumps, plan.Dump())
		}
		if !bytes.Equal(dumps[0], dumps[1]) {
			t.Fatalf("step %d: identical reports gave different plans:\n%s\n%s", s, dumps[0], dumps[1])
		}
		if s == steps/2 && bytes.Equal(dumps[0], dumps[2]) {
			t.Fatalf("step %d: a different report gave the same plan; the comparison proves nothing", s)
		}
	}
}

// A rank that finished no sample within its budget took more than the
// budget for one: it is taken at twice the budget, not left unmeasured.
func TestACutReportWithNoSampleStillMeasuresTheRank(t *testing.T) {
	p := newPolicy(t, NameAdaptive, 2, 8)
	if _, err := p.Observe(report(p.Plan(), durations(1, 1), nil)); err != nil {
		t.Fatal(err)
	}
	if p.Plan().Budget != 4*time.Millisecond {
		t.Fatalf("plan %s: want a 4ms budget", p.Plan().Dump())
	}
	rep := Report{Step: 1, Current: []RankReport{
		{Present: true, Samples: 4, Compute: 4 * time.Millisecond, Arrival: 4 * time.Millisecond, Cut: true},
		{Present: true, Samples: 0, Compute: 0, Arrival: 4 * time.Millisecond, Cut: true},
	}, Child: make([]ChildReport, 2)}
	plan, err := p.Observe(rep)
	if err != nil {
		t.Fatal(err)
	}
	// EWMA (α = 0.5) of 1ms and 8ms: 4.5ms per sample.
	if plan.PerSample[1] != 4500*time.Microsecond || plan.Shares[1] != 1 || plan.Shares[0] != 7 {
		t.Fatalf("plan %s: want rank 1 at 4.5ms/sample, its minimum share of 1", plan.Dump())
	}
}

func TestLayoutRoundTripsAndSumsExactly(t *testing.T) {
	l := Layout{Payload: 3, World: 3}
	want := []RankReport{
		{Present: true, Samples: 17, Compute: 1234567 * time.Microsecond, Arrival: 1300000 * time.Microsecond, Wait: 9 * time.Millisecond, CPU: 0.5, GPU: 0.97, SMClockMHz: 1380},
		{},
		{Present: true, Samples: 0, Compute: 40 * time.Millisecond, Arrival: 41 * time.Millisecond, Cut: true},
	}
	sum := make([]float32, l.Len())
	add := func(b []float32) {
		for i := range b {
			sum[i] += b[i]
		}
	}
	for r, rr := range want {
		b := make([]float32, l.Len())
		l.WriteMember(b, r, rr)
		add(b)
	}
	// Rank 1 is a child: two of its gradients are folded this step.
	for i, v := range []int{4, 5} {
		b := make([]float32, l.Len())
		l.WriteChild(b, 1, 8+i, 30*time.Millisecond, 90*time.Millisecond, v)
		add(b)
	}
	rep, err := l.Read(sum, 7)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 17+8+9 || rep.Step != 7 || rep.ChildSamples() != 17 {
		t.Fatalf("report %+v", rep)
	}
	for r := range want {
		if rep.Current[r] != want[r] {
			t.Fatalf("rank %d: got %+v, want %+v", r, rep.Current[r], want[r])
		}
	}
	c := rep.Child[1]
	if c.Count != 2 || c.Compute != 60*time.Millisecond || c.Cycle != 180*time.Millisecond || c.Staleness(7) != 2.5 {
		t.Fatalf("child report %+v (staleness %v)", c, c.Staleness(7))
	}
	if _, err := l.Read(sum[1:], 7); err == nil {
		t.Fatal("a short buffer decoded")
	}
}

// Steps past 2²⁴ are beyond a float32's integers: the child slots still
// carry the versions of the gradients folded exactly, so their staleness
// is exact too.
func TestLayoutCarriesVersionsPast2To24Exactly(t *testing.T) {
	l := Layout{Payload: 1, World: 2}
	const step = 1<<24 + 7
	sum := make([]float32, l.Len())
	for _, v := range []int{1<<24 + 5, 1<<24 + 6, 1<<24 + 3} {
		b := make([]float32, l.Len())
		l.WriteChild(b, 1, 4, time.Millisecond, time.Millisecond, v)
		for i := range b {
			sum[i] += b[i]
		}
	}
	rep, err := l.Read(sum, step)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Child[1]
	if c.Count != 3 || c.Versions != 3<<24+14 || math.Abs(c.Staleness(step)-(7-14.0/3)) > 1e-6 {
		t.Fatalf("child report %+v: versions %d, want %d; staleness %v, want %v", c, c.Versions, 3<<24+14, c.Staleness(step), 7-14.0/3)
	}
}

func benchmarkDecide(b *testing.B, n int, name string) {
	p := newPolicy(b, name, n, 64*n)
	rng := rand.New(rand.NewPCG(3, 4))
	reps := make([]Report, 16)
	for i := range reps {
		tau := make([]time.Duration, n)
		for r := range tau {
			tau[r] = time.Duration((0.95 + 0.1*rng.Float64()) * float64(time.Millisecond)) // ±5% noise
			if r%20 == 0 {
				tau[r] *= 3 // 5% persistently slow ranks
			}
		}
		reps[i] = report(p.Plan(), tau, nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := reps[i%len(reps)]
		rep.Step = p.Plan().Step
		if _, err := p.Observe(rep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(p.Plan().Evicted)), "evicted")
}

func BenchmarkDecideAdaptive64(b *testing.B)   { benchmarkDecide(b, 64, NameAdaptive) }
func BenchmarkDecideAdaptive1024(b *testing.B) { benchmarkDecide(b, 1024, NameAdaptive) }
func BenchmarkDecideAdaptive4096(b *testing.B) { benchmarkDecide(b, 4096, NameAdaptive) }
func BenchmarkDecideSTAR1024(b *testing.B)     { benchmarkDecide(b, 1024, NameSTAR) }

func TestShareRangeSplitsAnyBatchByShares(t *testing.T) {
	shares := []int{19, 19, 7, 19}
	next := 0
	for r := range shares {
		lo, hi := ShareRange(shares, 64, r)
		if lo != next || hi-lo != shares[r] {
			t.Fatalf("rank %d: [%d,%d), want [%d,%d)", r, lo, hi, next, next+shares[r])
		}
		next = hi
	}
	next = 0
	for r := range shares {
		lo, hi := ShareRange(shares, 10, r)
		if lo != next || hi < lo {
			t.Fatalf("short batch, rank %d: [%d,%d) after %d", r, lo, hi, next)
		}
		next = hi
	}
	if next != 10 {
		t.Fatalf("short batch covered %d of 10 rows", next)
	}
}
func BenchmarkDecideShares1024(b *testing.B) { benchmarkDecide(b, 1024, NameShares) }

// Speeds equal within noise keep the equal split; a real difference moves
// it at once.
func TestSharesIgnoreNoiseButFollowRealSpeedChanges(t *testing.T) {
	p := newPolicy(t, NameShares, 4, 64)
	for s := 0; s < 5; s++ {
		if _, err := p.Observe(report(p.Plan(), durations(1.00, 1.01, 0.99, 1.005), nil)); err != nil {
			t.Fatal(err)
		}
		if sh := p.Plan().Shares; !slices.Equal(sh, []int{16, 16, 16, 16}) {
			t.Fatalf("step %d: shares %v under 1%% noise, want the equal split kept", s, sh)
		}
	}
	if _, err := p.Observe(report(p.Plan(), durations(1, 1, 2, 1), nil)); err != nil {
		t.Fatal(err)
	}
	if sh := p.Plan().Shares; sh[2] >= 16 {
		t.Fatalf("shares %v after rank 2 slowed down, want it given fewer", sh)
	}
}

// Device priors (nvml.PriorWeights: a P100 is 3× slower than a V100)
// seed step 0's shares, before any step was measured.
func TestDevicePriorsSeedTheFirstShares(t *testing.T) {
	cfg, err := Preset(NameShares, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prior = []float64{1, 1, 3, 1}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Plan().Shares; got[2] >= got[0] || got[0]+got[1]+got[2]+got[3] != 64 || got[2]*3 > got[0]+1 {
		t.Fatalf("step 0 shares %v: want the P100 (rank 2) at about a third of the others'", got)
	}
	cfg.Prior = nil
	if p, err = NewPolicy(cfg); err != nil || !slices.Equal(p.Plan().Shares, []int{16, 16, 16, 16}) {
		t.Fatalf("no priors: %v, %v; want equal shares", p.Plan().Shares, err)
	}
}

// noisyReport is report with gradient norms: every rank's gradient sum is
// b·G plus the sum of b per-sample noises of variance sigma² per
// coordinate, and the reduced sum their total, so the noise scale the
// reports imply is tr Σ / |G|² = dim·sigma² / |G|².
func noisyReport(plan Plan, tau, extra []time.Duration, g []float64, sigma float64, rng *rand.Rand) Report {
	rep := report(plan, tau, extra)
	sum := make([]float64, len(g))
	for r, rr := range rep.Current {
		if !rr.Present {
			continue
		}
		b := float64(rr.Samples)
		sq := 0.0
		for i, gi := range g {
			x := b*gi + math.Sqrt(b)*sigma*rng.NormFloat64()
			sum[i] += x
			sq += x * x
		}
		rep.Current[r].GradSq = sq
	}
	for _, x := range sum {
		rep.GradSq += x * x
	}
	return rep
}

// The gradient noise scale is estimated from the members' gradient norms
// and the reduced one (McCandlish et al.): 1000 coordinates, |G|² = 10,
// per-sample variance 1 per coordinate: B_simple = 100 samples.
func TestTheGradientNoiseScaleIsEstimatedFromGradientNorms(t *testing.T) {
	p := newPolicy(t, NameShares, 4, 64)
	g := make([]float64, 1000)
	for i := range g {
		g[i] = 0.1
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tau := durations(1, 1, 1, 1)
	if got := p.est.phi(); got != 64 {
		t.Fatalf("φ before any gradient norm = %v, want the global batch, 64", got)
	}
	for s := 0; s < 200; s++ {
		if _, err := p.Observe(noisyReport(p.Plan(), tau, nil, g, 1, rng)); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Plan().Phi; got < 80 || got > 125 {
		t.Fatalf("estimated φ = %.1f, want about 100", got)
	}
}

// TTA is the objective: STAR's eviction of a rank 25% late saves a fifth
// of the step but loses a quarter of the samples (its gradients are
// stale, worth 1/(1+τ)). While the gradient noise is small against the
// batch, a step's samples matter little and the faster step wins; when
// the noise scale is large, progress is proportional to samples and the
// policy refuses the stale mode for synchronous SGD's ring.
func TestThePolicyRefusesAStaleModeWhosePredictedTimeToAccuracyIsWorse(t *testing.T) {
	in := ModeInput{Arrivals: arrivalsMs(100, 100, 100, 125), Shares: equalShares(4, 16), Collective: flat(80 * ms),
		Threshold: 0.2, MaxEvict: 2, Evict: true, DiscountStale: true}
	for _, tc := range []struct {
		phi  float64
		want Mode
	}{{phi: 4, want: ModeEvict}, {phi: 10000, want: ModeRing}} {
		in.Phi = tc.phi
		ch, err := ChooseMode(in)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Mode != tc.want {
			t.Fatalf("φ=%v: chose %+v, want %v (costs %+v)", tc.phi, ch.ModeCost, tc.want, ch.Costs)
		}
	}
	// The same from the policy, φ estimated from the gradients: noise
	// scale 100 against a batch of 64 makes samples count.
	cfg, err := Preset(NameSTAR, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DiscountStale = true
	for _, tc := range []struct {
		sigma float64
		want  Mode
	}{{sigma: 0.05, want: ModeEvict}, {sigma: 3, want: ModeRing}} {
		p, err := NewPolicy(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g := make([]float64, 1000)
		for i := range g {
			g[i] = 0.1
		}
		rng := rand.New(rand.NewPCG(5, 6))
		tau, extra := durations(6, 6, 6, 6), durations(0, 0, 0, 25)
		for s := 0; s < 40; s++ {
			rep := noisyReport(p.Plan(), tau, extra, g, tc.sigma, rng)
			for r := range rep.Current {
				rep.Current[r].Wait = 70 * time.Millisecond
			}
			if _, err := p.Observe(rep); err != nil {
				t.Fatal(err)
			}
		}
		plan := p.Plan()
		if plan.Mode != tc.want {
			t.Fatalf("per-sample noise %v (φ %.0f): plan %s, want %v", tc.sigma, plan.Phi, plan.Dump(), tc.want)
		}
	}
}

// sharesCanBeat never says no where some shares beat the makespan (it
// lets the exact solve skip only what it would refuse): checked against
// ProportionalShares' optimum on random speeds and bounds.
func TestSharesCanBeatNeverRefusesWhatTheSolveFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 4))
	for range 3000 {
		n := 1 + rng.IntN(12)
		tau := make([]float64, n)
		for r := range tau {
			tau[r] = float64(1+rng.IntN(50)) * 1e5
		}
		m, minShare := n+rng.IntN(8*n), rng.IntN(2)
		best, err := ProportionalShares(m, tau, minShare)
		if err != nil {
			t.Fatal(err)
		}
		opt := makespan(best, tau)
		for _, keep := range []float64{opt, opt * (1 + 1e-12), opt * 1.01, opt * 0.99} {
			if beat := opt < keep; beat && !sharesCanBeat(m, minShare, tau, keep) {
				t.Fatalf("tau %v, %d samples (min %d): shares %v reach %v < %v, but sharesCanBeat says no", tau, m, minShare, best, opt, keep)
			}
		}
	}
}

// sharesWithStaleEviction is the shares preset with STAR's eviction (stale
// children) instead of the exact eviction.
func sharesWithStaleEviction(t *testing.T, world, batch int) *Policy {
	t.Helper()
	cfg, err := Preset(NameShares, world, batch)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Evict, cfg.Exclude = true, false
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
