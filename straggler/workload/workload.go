package workload

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// Pattern is one injection pattern of the straggler benchmark.
type Pattern struct {
	// Name is the short name used in tables and --patterns.
	Name string `json:"pattern"`
	// Spec is the straggler/inject spec ("" injects nothing).
	Spec string `json:"spec"`
}

// DefaultPatterns returns the benchmark's patterns for a world of ranks:
// no straggler (FlexRR's 0% delay); FlexRR's slow-worker pattern (p = 0.01
// per delay point) at 50/100/200/400% delay; its power law at α = 4, 7, 11;
// AntDT's transient stragglers at intensity 0.1/0.3/0.5/0.8 (30% of ranks
// per 30-step cycle, 15 steps on); an AntDT persistent straggler (rank 1,
// a constant extra delay of one equal-share compute per step); and one
// deterministic 3× slow rank (a slower device).
func DefaultPatterns(ranks, globalBatch int, perSample time.Duration, seed uint64) []Pattern {
	sd := ";seed=" + strconv.FormatUint(seed, 10)
	equal := time.Duration(float64(globalBatch) / float64(ranks) * float64(perSample)).Round(time.Millisecond)
	ps := []Pattern{{"none", ""}}
	for _, d := range []int{50, 100, 200, 400} {
		ps = append(ps, Pattern{fmt.Sprintf("flexrr-%d%%", d), fmt.Sprintf("flexrr-slow=0.01:%d%%", d) + sd})
	}
	for _, a := range []int{4, 7, 11} {
		ps = append(ps, Pattern{fmt.Sprintf("powerlaw-%d", a), fmt.Sprintf("powerlaw=%d", a) + sd})
	}
	for _, i := range []string{"0.1", "0.3", "0.5", "0.8"} {
		ps = append(ps, Pattern{"transient-" + i, "transient=" + i + sd})
	}
	if ranks >= 2 {
		ps = append(ps, Pattern{"persistent", "persistent=1:+" + equal.String()})
	}
	if ranks >= 3 {
		ps = append(ps, Pattern{"slow-3x", "slow=2:3x"})
	}
	return ps
}

// Compute returns the time rank takes for n samples at step under the
// injector (nil: n × perSample).
func Compute(in *inject.Injector, rank, step, n int, perSample time.Duration) time.Duration {
	base := time.Duration(n) * perSample
	if in == nil {
		return base
	}
	return in.At(rank, step, base).Compute
}

// SamplesWithin returns how many whole samples rank finishes at step within
// budget under the injector: the largest n with Compute(n) ≤ budget.
func SamplesWithin(in *inject.Injector, rank, step int, budget, perSample time.Duration) int {
	lo, hi := 0, 1
	for Compute(in, rank, step, hi, perSample) <= budget {
		lo, hi = hi, 2*hi
		if hi > 1<<30 {
			return lo
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if Compute(in, rank, step, mid, perSample) <= budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// IdealCompute is FlexRR's Ideal compute time of step: all of the global
// batch's work perfectly balanced over the ranks, each working all the time
// at the speed the injector gives it in that step, with no waiting. Rank r
// needs c_r(n) = a_r + b_r·n for n samples (every injected pattern is
// affine in the work: factors scale b_r, a constant extra delay is a_r,
// the time the rank is unavailable), so the Ideal is the T with
// Σ_r max(0, T − a_r)/b_r = M. Without constant delays this is
// N / Σ_r 1/c_r of an equal share M/N.
func IdealCompute(in *inject.Injector, ranks, step, globalBatch int, perSample time.Duration) time.Duration {
	share := float64(globalBatch) / float64(ranks)
	base := time.Duration(share * float64(perSample))
	type line struct{ a, b float64 }
	ls := make([]line, ranks)
	for r := range ls {
		c0, c := 0.0, float64(base)
		if in != nil {
			c0 = float64(in.At(r, step, 0).Compute)
			c = float64(in.At(r, step, base).Compute)
		}
		ls[r] = line{a: c0, b: max(c-c0, 1) / share}
	}
	slices.SortFunc(ls, func(x, y line) int { return cmp.Compare(x.a, y.a) })
	sumAB, sumInvB := 0.0, 0.0
	t := 0.0
	for k, l := range ls {
		sumAB += l.a / l.b
		sumInvB += 1 / l.b
		t = (float64(globalBatch) + sumAB) / sumInvB
		if k+1 == len(ls) || t <= ls[k+1].a {
			break
		}
	}
	return time.Duration(t)
}
