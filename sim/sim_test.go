package sim

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func injector(t testing.TB, spec string, n int) *inject.Injector {
	t.Helper()
	s, err := inject.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(s, n)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestRingModel(t *testing.T) {
	net := Network{Alpha: 10 * time.Microsecond, BytesPerSec: 1e9}
	// 4 ranks, 4 MB: 6 steps of 10 µs + 1 ms.
	if got := net.Ring(4, 4_000_000); got != 6*1010*time.Microsecond {
		t.Fatalf("Ring(4, 4MB) = %v", got)
	}
	if net.Ring(1, 1<<20) != 0 {
		t.Fatal("a ring of one rank costs time")
	}
}

func TestSimIsDeterministicAndConservesSamples(t *testing.T) {
	cfg := Config{Ranks: 16, Policy: policy.NameSTAR, Injector: injector(t, "slow=3,9:4x;powerlaw=7;seed=5", 16),
		Warmup: 3, Steps: 40, GlobalBatch: 512, PerSample: time.Millisecond, GradBytes: 4 << 20}
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Wall != b.Wall || a.Applied != b.Applied || !bytes.Equal(a.LastPlan.Dump(), b.LastPlan.Dump()) {
		t.Fatalf("two runs of one config differ: %+v vs %+v", a, b)
	}
	if a.EvictSteps == 0 || a.Late == 0 {
		t.Fatalf("STAR with two 4× slow ranks: %d evicting steps, %d late samples; the carry path is not exercised", a.EvictSteps, a.Late)
	}
	// Samples computed in the warmup but folded late in the first measured
	// step would break the equality; none are late there with these
	// seeds, but allow for it by comparing with the flush included.
	if a.Applied < a.Computed || a.Applied > a.Computed+int64(cfg.GlobalBatch) {
		t.Fatalf("applied %d samples, computed %d", a.Applied, a.Computed)
	}
}

func TestDecisionCostIsMeasuredWithTheInjectedClock(t *testing.T) {
	var now time.Time
	clock := func() time.Time { now = now.Add(250 * time.Microsecond); return now }
	res, err := Run(Config{Ranks: 8, Policy: policy.NameAdaptive, Steps: 5, GlobalBatch: 64, PerSample: time.Millisecond,
		GradBytes: 1024, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions != 5 || res.DecisionMean != 250*time.Microsecond || res.DecisionMax != 250*time.Microsecond {
		t.Fatalf("decisions %d mean %v max %v, want 5 × 250µs", res.Decisions, res.DecisionMean, res.DecisionMax)
	}
}

// The simulator must order BSP and the adaptive policy as real runs do on
// the same patterns. A small real run (4 in-process ranks over sockets,
// straggler/driver's synthetic job) and the simulation of the same job are
// compared pattern by pattern; the patterns are chosen so that the real
// gap is far outside a loaded machine's noise.
func TestSimOrdersPoliciesLikeARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real ranks")
	}
	const n, warm, steps, batch = 4, 3, 8, 64
	const perSample, grad = time.Millisecond, 256 << 10
	for _, spec := range []string{"slow=2:3x", "powerlaw=4;seed=3"} {
		in := injector(t, spec, n)
		real := map[string]time.Duration{}
		simulated := map[string]time.Duration{}
		for _, name := range []string{policy.NameBSP, policy.NameAdaptive} {
			r, err := driver.RunSynthetic(context.Background(), driver.SyntheticConfig{Ranks: n, Policy: name, Injector: in,
				Warmup: warm, Steps: steps, GlobalBatch: batch, PerSample: perSample, GradBytes: grad})
			if err != nil {
				t.Fatal(err)
			}
			s, err := Run(Config{Ranks: n, Policy: name, Injector: in, Warmup: warm, Steps: steps, GlobalBatch: batch,
				PerSample: perSample, GradBytes: grad})
			if err != nil {
				t.Fatal(err)
			}
			real[name], simulated[name] = r.PerBatch, s.PerBatch
		}
		t.Logf("%s: real bsp %v adaptive %v; sim bsp %v adaptive %v", spec,
			real[policy.NameBSP], real[policy.NameAdaptive], simulated[policy.NameBSP], simulated[policy.NameAdaptive])
		realFaster := real[policy.NameAdaptive] < real[policy.NameBSP]
		simFaster := simulated[policy.NameAdaptive] < simulated[policy.NameBSP]
		if realFaster != simFaster {
			t.Fatalf("%s: real run says adaptive faster = %v, simulation %v", spec, realFaster, simFaster)
		}
		if !simFaster {
			t.Fatalf("%s: neither finds adaptive faster than BSP; the comparison proves nothing", spec)
		}
	}
}
