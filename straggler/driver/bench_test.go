package driver

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func mustInjector(t testing.TB, spec string, n int) *inject.Injector {
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

// The synthetic job under a 3× slow rank: the adaptive policy applies every
// computed sample and beats BSP per applied batch.
func TestSyntheticJobAdaptiveBeatsBSPOnASlowRank(t *testing.T) {
	in := mustInjector(t, "slow=2:3x", 4)
	run := func(policy string) SyntheticResult {
		res, err := RunSynthetic(context.Background(), SyntheticConfig{Ranks: 4, Policy: policy, Injector: in, Warmup: 3, Steps: 8,
			GlobalBatch: 64, PerSample: time.Millisecond, GradBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Applied != res.Computed {
			t.Fatalf("%s: applied %d samples, computed %d", policy, res.Applied, res.Computed)
		}
		t.Logf("%s: %v per batch, applied %d over %d steps", policy, res.PerBatch, res.Applied, res.Steps)
		return res
	}
	bsp, ad := run(policy.NameBSP), run(policy.NameAdaptive)
	// BSP: 48ms compute per step; adaptive: ≈ 19ms. Leave room for a
	// loaded machine.
	if float64(ad.PerBatch) > 0.75*float64(bsp.PerBatch) {
		t.Fatalf("adaptive %v per batch, BSP %v: want adaptive well under BSP", ad.PerBatch, bsp.PerBatch)
	}
}

// TestBenchTable runs `ringtail bench straggler` from a test when
// RINGTAIL_BENCH_STRAGGLER is set to the flags, e.g.
//
//	RINGTAIL_BENCH_STRAGGLER="ranks=4 patterns=slow-3x,powerlaw-4 grad=4194304" go test -run TestBenchTable -v ./straggler/driver
func TestBenchTable(t *testing.T) {
	env := os.Getenv("RINGTAIL_BENCH_STRAGGLER")
	if env == "" {
		t.Skip("set RINGTAIL_BENCH_STRAGGLER to run")
	}
	cfg := BenchConfig{Ranks: []int{4}, Steps: 30, Warmup: 3, GlobalBatch: 256, PerSample: 2 * time.Millisecond, GradBytes: 16 << 20, Seed: 1}
	for _, kv := range strings.Fields(env) {
		k, v, _ := strings.Cut(kv, "=")
		atoi := func() int {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		switch k {
		case "ranks":
			cfg.Ranks = nil
			for _, f := range strings.Split(v, ",") {
				n, _ := strconv.Atoi(f)
				cfg.Ranks = append(cfg.Ranks, n)
			}
		case "patterns":
			cfg.Patterns = strings.Split(v, ",")
		case "grad":
			cfg.GradBytes = atoi()
		case "steps":
			cfg.Steps = atoi()
		case "batch":
			cfg.GlobalBatch = atoi()
		case "policy":
			cfg.Policy = v
		case "sample":
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			cfg.PerSample = d
		}
	}
	err := RunBench(context.Background(), cfg, func(r BenchRow) error {
		b, _ := json.Marshal(r)
		t.Logf("%s", b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
