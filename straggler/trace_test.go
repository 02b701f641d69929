package straggler

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// traceConfig describes a synthetic run: every rank computes for base,
// straggler/inject lengthens it as spec says, and multiplicative Gaussian
// noise blurs the result.
type traceConfig struct {
	spec       string
	world      int
	steps      int
	base       time.Duration
	collective time.Duration
	noise      float64 // relative sd of the arrival noise
	seed       uint64
}

func defaultTrace(spec string) traceConfig {
	return traceConfig{spec: spec, world: 16, steps: 600, base: 100 * time.Millisecond,
		collective: 20 * time.Millisecond, noise: 0.03, seed: 1}
}

// trace holds obs[step][rank].
type trace struct {
	cfg traceConfig
	obs [][]Observation
}

// makeTrace generates the observations ranks would report under DDP: the
// arrival is the injected compute with noise; the wait is the time until
// the last rank arrives plus the collective; CPU utilisation is what a host
// monitor sees at the end of the step (a rank sleeping half the time is
// half busy); network utilisation is noise around a constant.
func makeTrace(tb testing.TB, tc traceConfig) trace {
	tb.Helper()
	spec, err := inject.Parse(tc.spec)
	if err != nil {
		tb.Fatalf("parse %q: %v", tc.spec, err)
	}
	if spec.Seed == 0 {
		spec.Seed = tc.seed
	}
	in, err := inject.New(spec, tc.world)
	if err != nil {
		tb.Fatalf("inject %q: %v", tc.spec, err)
	}
	rng := rand.New(rand.NewPCG(tc.seed, 0xfeed))
	clamp := func(f float64) float64 { return math.Min(1, math.Max(0, f)) }
	tr := trace{cfg: tc, obs: make([][]Observation, tc.steps)}
	for s := range tr.obs {
		row := make([]Observation, tc.world)
		latest := time.Duration(0)
		for r := range row {
			eff := in.At(r, s, tc.base)
			a := time.Duration(float64(eff.Compute) * math.Max(0.5, 1+tc.noise*rng.NormFloat64()))
			row[r] = Observation{
				Rank: r, Step: s, Arrival: a, Bytes: 4 << 20,
				CPU: clamp(1/eff.EndSlowdown + 0.02*rng.NormFloat64()),
				Net: clamp(0.4 + 0.05*rng.NormFloat64()),
			}
			latest = max(latest, a)
		}
		for r := range row {
			c := time.Duration(float64(tc.collective) * math.Max(0.5, 1+0.05*rng.NormFloat64()))
			row[r].Wait = latest - row[r].Arrival + c
		}
		tr.obs[s] = row
	}
	return tr
}

// actualStragglers returns the ranks of a step whose arrival is more than
// threshold above the fastest, indexed by rank.
func actualStragglers(row []Observation, threshold float64) []bool {
	fastest := row[0].Arrival
	for _, o := range row {
		fastest = min(fastest, o.Arrival)
	}
	out := make([]bool, len(row))
	for i, o := range row {
		out[i] = float64(o.Arrival) > (1+threshold)*float64(fastest)
	}
	return out
}
