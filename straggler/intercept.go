package straggler

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// A rank late whatever its share: a fixed delay per step (a slow loader, a
// periodic pause, AntDT's persistent straggler "+D") is not a slower
// per-sample speed. Its compute is c(n) = a + b·n, and the shares that
// assume c ∝ n read the intercept a as slowness: they move samples away
// from it, which makes its a/n look larger still, and a share of zero
// still costs a. The policy fits both parameters from the (samples,
// compute) pairs its member reports carry, and where a rank's intercept
// is material, solves the shares with it (T = a_r + b_r·s_r, Σ s_r = M)
// and offers the ranks whose intercept alone exceeds T to the mode choice
// for exclusion (their rows go to the members; the update stays exact).

// affineForgetting is the forgetting factor of a rank's affine fit: a
// memory of about ten reports, so that a delay that comes and goes (a
// periodic pause, a loader that catches up) is followed within a few
// steps.
const affineForgetting = 0.9

// affineMinSpread is the least weighted standard deviation of a rank's
// compute times, as a fraction of their mean, for its fit to identify
// the intercept apart from the slope; with less, the last identified
// intercept is held and only the slope is refitted. affineMinFit is the
// least R² of the fit: a rank whose speed varies at random (the power law)
// scatters its points, where a fixed delay lays them on a line.
const (
	affineMinSpread = 0.05
	affineMinFit    = 0.9
)

// affineMaterial is the least share of a rank's compute its intercept
// must be for the policy to model it: below it, the intercept is noise
// (timer slack, per-step bookkeeping) and the rank is modelled by its
// per-sample time alone, as before.
const affineMaterial = 0.1

// affineFit is one rank's least-squares fit of compute = a + b·samples over
// its member reports, exponentially forgotten. It regresses the samples on
// the compute time, n = (c − a)/b, not the other way: under a budget the
// compute is what the policy chose and the samples what the rank's speed
// made of it, so noise is in n, and a rank whose speed varies with a
// pinned compute leaves c without spread (no fit) rather than inventing
// an intercept.
type affineFit struct {
	w, sc, sn, scc, snn, scn float64 // forgotten sums of 1, c, n, c², n², c·n
	a, b                     float64 // the last identified intercept (≥ 0) and slope, ns
	identified               bool
}

// observe adds one report: n samples in c ns.
func (f *affineFit) observe(n int, c float64) {
	y := float64(n)
	l := affineForgetting
	f.w, f.sc, f.sn = l*f.w+1, l*f.sc+c, l*f.sn+y
	f.scc, f.snn, f.scn = l*f.scc+c*c, l*f.snn+y*y, l*f.scn+c*y
	if f.w < 1.5 {
		return // one report: nothing to separate
	}
	mc, mn := f.sc/f.w, f.sn/f.w
	vc, vn := f.scc/f.w-mc*mc, f.snn/f.w-mn*mn
	cov := f.scn/f.w - mc*mn
	if spread := affineMinSpread * mc; vc < spread*spread || !(vn > 0) || cov*cov < affineMinFit*vc*vn {
		return
	}
	k := cov / vc // samples per ns
	if !(k > 0) {
		return // a rank whose work shrinks as it computes longer: no model
	}
	f.a, f.b, f.identified = max(0, mc-mn/k), 1/k, true
}

// model returns the rank's intercept and per-sample time in ns, and
// whether the intercept is material (at least affineMaterial of the
// rank's recent mean compute). The intercept is the one last identified;
// the slope is refitted to the recent mean through it (shares that have
// settled do not vary enough to identify both), or the last identified
// slope when the rank has lately computed no samples.
func (f *affineFit) model() (a, b float64, ok bool) {
	if !f.identified || f.w == 0 {
		return 0, 0, false
	}
	mc, mn := f.sc/f.w, f.sn/f.w
	if !(f.a > affineMaterial*mc) {
		return 0, 0, false
	}
	b = f.b
	if mn >= 1 {
		b = (mc - f.a) / mn
	}
	if !(b > 0) {
		return 0, 0, false
	}
	return f.a, b, true
}

// AffineTime is the time in which ranks whose compute of n samples takes
// a_r + b_r·n ns compute m samples together, each working from its
// intercept on, with no waiting: the T with Σ_r max(0, (T − a_r)/b_r) = m
// (water-filling). Ranks with a_r ≥ T take no part. With every a_r = 0 it
// is BalancedTime's m / Σ_r 1/b_r.
func AffineTime(m int, a, b []float64) float64 {
	// The ranks without an intercept all take part: summed in one pass;
	// only those with one are sorted (at 16,384 ranks, a few of them).
	rate, base := 0.0, 0.0 // Σ 1/b_r and Σ a_r/b_r over the ranks taking part
	var order []int
	for r := range a {
		if a[r] > 0 {
			order = append(order, r)
			continue
		}
		rate += 1 / math.Max(b[r], 1e-9)
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(a[x], a[y]) })
	t := math.Inf(1)
	if rate > 0 {
		t = float64(m) / rate
	}
	for _, r := range order {
		if t <= a[r] {
			break // it and every later rank would only finish after t
		}
		rate += 1 / math.Max(b[r], 1e-9)
		base += a[r] / math.Max(b[r], 1e-9)
		t = (float64(m) + base) / rate
	}
	return t
}

// AffineShares splits m samples over ranks with intercepts a and per-sample
// times b (ns) so that the latest finish, max_r a_r + b_r·s_r over the
// ranks given samples, is as small as integers allow: the water-filling
// shares of AffineTime, rounded down, the rest given one at a time to the
// rank that would finish it first. Ranks in out get nothing; the others
// at least minShare.
func AffineShares(m int, a, b []float64, minShare int, out []bool) []int {
	n := len(a)
	in := make([]int, 0, n)
	for r := 0; r < n; r++ {
		if out == nil || !out[r] {
			in = append(in, r)
		}
	}
	shares := make([]int, n)
	if len(in) == 0 {
		return shares
	}
	ai, bi := make([]float64, len(in)), make([]float64, len(in))
	for i, r := range in {
		ai[i], bi[i] = a[r], b[r]
	}
	t := AffineTime(m, ai, bi)
	sum := 0
	for _, r := range in {
		s := 0
		if t > a[r] {
			s = int(math.Floor((t - a[r]) / math.Max(b[r], 1e-9)))
		}
		shares[r] = min(max(s, minShare), m)
		sum += shares[r]
	}
	// The rounding leaves fewer than one sample per rank to place (more
	// only where minShare lifted shares): one pass in order of who would
	// finish the next sample first, or give one back first.
	// Each rank's key is computed once and ties go to the lower rank, the
	// order a stable sort of in (ranks ascending) by the key gives, at a
	// fraction of its cost at 16,384 ranks.
	finish := func(r, s int) float64 { return a[r] + b[r]*float64(s) }
	if sum < m {
		byKey(in, m-sum, func(r int) float64 { return finish(r, shares[r]+1) })
		for i := 0; sum < m; i++ {
			shares[in[i%len(in)]]++
			sum++
		}
	}
	if sum > m {
		byKey(in, len(in), func(r int) float64 { return -finish(r, shares[r]) })
		for i, took := 0, true; sum > m; i++ {
			if i%len(in) == 0 {
				if !took {
					break // minShare × members exceeds m: Validate refuses such configs
				}
				took = false
			}
			if r := in[i%len(in)]; shares[r] > minShare {
				shares[r]--
				sum--
				took = true
			}
		}
	}
	return shares
}

// affineModel is one decision's view of the ranks' compute with their
// intercepts (nil when no rank's intercept is material: the proportional
// model then decides alone, as it did before intercepts were fitted).
type affineModel struct {
	a, b []float64 // per rank: intercept and per-sample time, ns (a = 0, b = τ where immaterial)
	t    float64   // AffineTime of the global batch over every rank
	out  []bool    // ranks whose intercept alone is at least t: late whatever their share
}

// affineModel builds the decision's affine model from the ranks' fits, in
// buffers the policy keeps (a decision at 16,384 ranks must not fault in
// fresh pages for them every step).
func (p *Policy) affineModel() *affineModel {
	found := false
	for r := range p.est.fits {
		if _, _, ok := p.est.fits[r].model(); ok {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	m := &p.modelBuf
	if m.a == nil {
		n := len(p.est.fits)
		m.a, m.b, m.out = make([]float64, n), make([]float64, n), make([]bool, n)
	}
	for r := range p.est.fits {
		a, b, ok := p.est.fits[r].model()
		if !ok {
			a, b = 0, p.est.tau[r]
		}
		m.a[r], m.b[r] = a, b
	}
	m.t = AffineTime(p.cfg.GlobalBatch, m.a, m.b)
	for r, a := range m.a {
		m.out[r] = a >= m.t
	}
	return m
}

// compute predicts rank r's compute under share (or until budget, which
// cannot cut a fixed delay short).
func (m *affineModel) compute(r, share int, budget time.Duration) time.Duration {
	if budget > 0 {
		return max(budget, time.Duration(math.Round(m.a[r])))
	}
	return time.Duration(math.Round(m.a[r] + m.b[r]*float64(share)))
}

// makespan is the latest predicted finish among the ranks given samples.
func (m *affineModel) makespan(shares []int) float64 {
	out := 0.0
	for r, s := range shares {
		if s > 0 {
			out = max(out, m.a[r]+m.b[r]*float64(s))
		}
	}
	return out
}

// shares returns the next step's shares under the affine model: the
// water-filling solve (the ranks late whatever their share get none when
// exclusion may take them out of the ring), kept from cur unless it
// shortens the latest finish by hysteresis.
func (m *affineModel) shares(cur []int, globalBatch, minShare int, exclude bool, hysteresis float64) []int {
	var out []bool
	if exclude {
		out = m.out
	}
	keep := (1 - hysteresis) * m.makespan(cur)
	if !(m.t < keep) {
		return cur // no shares finish before the water-filled time
	}
	better := AffineShares(globalBatch, m.a, m.b, minShare, out)
	if m.makespan(better) < keep {
		return better
	}
	return cur
}

// membersShares splits the global batch among members only under the
// affine model, and returns the members' balanced time stretched by
// 1+slack.
func (m *affineModel) membersShares(members []int, globalBatch, minShare int, slack float64) ([]int, time.Duration) {
	out := make([]bool, len(m.a))
	for r := range out {
		out[r] = true
	}
	a, b := make([]float64, len(members)), make([]float64, len(members))
	for i, r := range members {
		out[r] = false
		a[i], b[i] = m.a[r], m.b[r]
	}
	shares := AffineShares(globalBatch, m.a, m.b, minShare, out)
	return shares, time.Duration(math.Round(AffineTime(globalBatch, a, b) * (1 + slack)))
}

// confirmFixedLate adds to confirmed the members whose intercept alone has
// exceeded the balanced time at this decision and the one before (a fixed
// delay is a measurement, as a slow link is: such a rank need not be seen
// arriving late — a budget may cut it — to be late whatever its share),
// and counts those runs.
func (p *Policy) confirmFixedLate(confirmed []int, m *affineModel) []int {
	if m == nil {
		for r, k := range p.fixedLate {
			if k != 0 {
				p.fixedLate[r] = 0
			}
		}
		return confirmed
	}
	for r, out := range m.out {
		if !out {
			p.fixedLate[r] = 0
			continue
		}
		p.fixedLate[r]++
		if p.fixedLate[r] >= 2 && !slices.Contains(confirmed, r) {
			confirmed = append(confirmed, r)
		}
	}
	return confirmed
}

// byKey puts first the want ranks of least key(r), equal keys by lower
// rank: the first want a stable sort of ranks (ascending) by key would
// give. Where want covers every rank they come in that order; where it
// is fewer they come in no particular order (the callers use each once),
// selected in linear time. Keys are computed once per rank.
func byKey(ranks []int, want int, key func(r int) float64) {
	ks := make([]keyed, len(ranks))
	for i, r := range ranks {
		ks[i] = keyed{key(r), r}
	}
	if want >= len(ks) {
		slices.SortFunc(ks, keyed.compare)
	} else if want > 0 {
		selectLeast(ks, want)
	}
	for i := range ks {
		ranks[i] = ks[i].r
	}
}

// keyed is a rank and its key.
type keyed struct {
	k float64
	r int
}

// compare orders by key, then rank.
func (x keyed) compare(y keyed) int {
	if c := cmp.Compare(x.k, y.k); c != 0 {
		return c
	}
	return cmp.Compare(x.r, y.r)
}

// selectLeast moves the k least elements of ks (0 < k < len(ks)) to its
// front: quickselect with a median-of-three pivot, O(len) on average.
// The (key, rank) order is total, so the set is unique.
func selectLeast(ks []keyed, k int) {
	lo, hi := 0, len(ks)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// Median of three to ks[hi] as the pivot.
		if ks[mid].compare(ks[lo]) < 0 {
			ks[mid], ks[lo] = ks[lo], ks[mid]
		}
		if ks[hi].compare(ks[lo]) < 0 {
			ks[hi], ks[lo] = ks[lo], ks[hi]
		}
		if ks[mid].compare(ks[hi]) < 0 {
			ks[mid], ks[hi] = ks[hi], ks[mid]
		}
		pivot := ks[hi]
		store := lo
		for i := lo; i < hi; i++ {
			if ks[i].compare(pivot) < 0 {
				ks[i], ks[store] = ks[store], ks[i]
				store++
			}
		}
		ks[store], ks[hi] = ks[hi], ks[store]
		switch {
		case store == k || store == k-1:
			return // ks[:store] < pivot = ks[store] < ks[store+1:]
		case store > k:
			hi = store - 1
		default:
			lo = store + 1
		}
	}
}
