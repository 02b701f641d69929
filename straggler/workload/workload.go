package workload

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
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
// budget under the injector: the largest n with Compute(n) ≤ budget. Every
// injected pattern is affine in the work (Compute(n) = a + b·n), so n is
// ⌊(budget − a)/b⌋ from two evaluations, corrected by a step or two for
// the rounding of durations: cheap enough for a simulation of 16,384 ranks.
func SamplesWithin(in *inject.Injector, rank, step int, budget, perSample time.Duration) int {
	const probe = 64
	a := Compute(in, rank, step, 0, perSample)
	if a > budget {
		return 0
	}
	b := float64(Compute(in, rank, step, probe, perSample)-a) / probe
	if !(b > 0) {
		return 1 << 30 // free samples: as many as anyone could ask for
	}
	n := int(math.Min(float64(budget-a)/b, 1<<30))
	for n > 0 && Compute(in, rank, step, n, perSample) > budget {
		n--
	}
	for n < 1<<30 && Compute(in, rank, step, n+1, perSample) <= budget {
		n++
	}
	return n
}

// IdealCompute is FlexRR's Ideal compute time of step: all of the global
// batch's work perfectly balanced over the ranks, each working all the time
// at the speed the injector gives it in that step, with no waiting. Rank r
// needs c_r(n) = a_r + b_r·n for n samples (every injected pattern is
// affine in the work: factors scale b_r, a persistent extra delay per
// iteration is a_r). A constant delay per iteration is amortized — a rank
// could run one long iteration where others run many, and an evicted child
// does pay it once per iteration of its own, not per step — so the Ideal
// is a lower bound no schedule beats: M / Σ_r 1/b_r. (Charging a_r every
// step, as before, let STAR's eviction beat "Ideal" on the persistent
// pattern.)
func IdealCompute(in *inject.Injector, ranks, step, globalBatch int, perSample time.Duration) time.Duration {
	share := float64(globalBatch) / float64(ranks)
	base := time.Duration(share * float64(perSample))
	rate := 0.0
	for r := range ranks {
		c0, c := 0.0, float64(base)
		if in != nil {
			c0 = float64(in.At(r, step, 0).Compute)
			c = float64(in.At(r, step, base).Compute)
		}
		rate += share / max(c-c0, 1)
	}
	return time.Duration(float64(globalBatch) / rate)
}

// ExactCompute is the least compute time of step for a schedule that
// applies the whole global batch fresh every step (synchronous SGD's
// update): each rank that takes samples pays its per-step intercept a_r
// (a persistent extra delay) before them, so the step's work is
// water-filled over the ranks' intercepts and speeds — the T with
// Σ_r max(0, (T − a_r)/b_r) = M, ranks whose delay alone exceeds T taking
// no samples (straggler.AffineTime). It equals IdealCompute where no rank
// has an intercept; with one, it is the floor of exact schedules, above
// IdealCompute, which only a schedule whose ranks run fewer, longer
// iterations than the step (stale gradients) could go below.
func ExactCompute(in *inject.Injector, ranks, step, globalBatch int, perSample time.Duration) time.Duration {
	share := float64(globalBatch) / float64(ranks)
	base := time.Duration(share * float64(perSample))
	a, b := make([]float64, ranks), make([]float64, ranks)
	for r := range ranks {
		c0, c := 0.0, float64(base)
		if in != nil {
			c0 = float64(in.At(r, step, 0).Compute)
			c = float64(in.At(r, step, base).Compute)
		}
		a[r], b[r] = c0, max(c-c0, 1)/share
	}
	return time.Duration(math.Round(straggler.AffineTime(globalBatch, a, b)))
}

// NetworkStraggler is the rank whose link the network patterns shape: rank
// 2 (the compute slow-3x's straggler), or the last rank of a smaller world.
func NetworkStraggler(ranks int) int { return min(2, ranks-1) }

// NetworkStall is the stall of the stall pattern: well under a peer
// timeout (ringtail's default is 10 s), so it costs a slow step, no error.
const NetworkStall = time.Second

// NetworkPatterns returns the benchmark's network straggler patterns for a
// world of ranks whose links all run at rate bits/s (0: unshaped): the
// link of one rank (NetworkStraggler) at 1/10 of the others' rate
// (slow-link-10x; only with a rate), with 10 ms added each way
// (delay-10ms), dropping 1% of its packets each way (lossy-1%), or held
// for NetworkStall at stallStep (stall-1s). Each spec holds only link
// clauses and names every rank's link that has an option, so that it is
// the whole bed's setting: a test bed applies it (internal/testbed), and
// one process, where ranks share memory instead of links, cannot. A world
// of one rank has no links: no patterns.
func NetworkPatterns(ranks int, rate int64, stallStep int) []Pattern {
	if ranks < 2 {
		return nil
	}
	s := NetworkStraggler(ranks)
	var others []string
	for r := range ranks {
		if r != s {
			others = append(others, strconv.Itoa(r))
		}
	}
	base := ""
	if rate > 0 {
		base = ":rate=" + inject.FormatRate(rate)
	}
	spec := func(straggler string) string {
		out := "link=" + strconv.Itoa(s) + base + straggler
		if base != "" {
			out = "link=" + strings.Join(others, ",") + base + ";" + out
		}
		return out
	}
	var ps []Pattern
	if rate > 0 {
		ps = append(ps, Pattern{"slow-link-10x", "link=" + strings.Join(others, ",") + base + ";link=" + strconv.Itoa(s) + ":rate=" + inject.FormatRate(max(rate/10, 8000))})
	}
	return append(ps,
		Pattern{"delay-10ms", spec(":delay=10ms")},
		Pattern{"lossy-1%", spec(":loss=1%")},
		Pattern{"stall-1s", spec(":stall=" + NetworkStall.String() + "@step" + strconv.Itoa(stallStep))})
}

// BaseLinks is the link spec of a pattern without link clauses on a test
// bed whose links all run at rate bits/s: every rank's link at the rate,
// or "" (unshaped) when rate is 0.
func BaseLinks(ranks int, rate int64) string {
	if rate <= 0 || ranks < 1 {
		return ""
	}
	all := make([]string, ranks)
	for r := range all {
		all[r] = strconv.Itoa(r)
	}
	return "link=" + strings.Join(all, ",") + ":rate=" + inject.FormatRate(rate)
}

// Select returns the patterns of all named by names, in the order named;
// empty names select all. An unknown name is an error that lists the
// names there are.
func Select(all []Pattern, names []string) ([]Pattern, error) {
	if len(names) == 0 {
		return all, nil
	}
	sel := make([]Pattern, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(all, func(p Pattern) bool { return p.Name == name })
		if i < 0 {
			have := make([]string, len(all))
			for j, p := range all {
				have[j] = p.Name
			}
			return nil, fmt.Errorf("unknown pattern %q (have %s)", name, strings.Join(have, ", "))
		}
		sel = append(sel, all[i])
	}
	return sel, nil
}
