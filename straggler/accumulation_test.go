package straggler

import (
	"errors"
	"slices"
	"testing"
)

// The NVML mock's mix through the shares policy: ranks 0 and 1 are P100s
// (B̂max 7), 2 and 3 V100s (B̂max 11), at most 2 passes. While the P100s
// are 3× slower the uncapped shares would give each V100 24 samples;
// under memory each holds 2×11 and the P100s take the rest. When the
// speeds even out the policy re-plans, the P100s now at their limit of
// 2×7. When the P100s are 20× slower the policy excludes them, and the
// V100s take all 64 rows: more passes than MaxAccum, none above the cap.
// No plan's micro-batch exceeds a device's cap.
func TestSharesRespectEachDevicesMemoryAsSpeedsDrift(t *testing.T) {
	cfg, err := Preset(NameShares, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	caps := []int{7, 7, 11, 11}
	cfg.Memory = &Memory{MicroCap: caps, MaxAccum: 2}
	cfg.Prior = []float64{3, 3, 1, 1}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, plan Plan) {
		t.Helper()
		total := 0
		for r, m := range p.Config().Micro(plan) {
			if m.Batch > caps[r] || m.Share != plan.Shares[r] || m.Accum > 2 && plan.Mode != ModeExclude {
				t.Fatalf("%s: rank %d runs %+v under cap %d (plan %s)", when, r, m, caps[r], plan.Dump())
			}
			total += m.Share
		}
		if total != 64 {
			t.Fatalf("%s: shares %v sum to %d", when, plan.Shares, total)
		}
	}
	check("step 0 (device priors)", p.Plan())
	slow := durations(3, 3, 1, 1)
	for s := 0; s < 6; s++ {
		plan, err := p.Observe(report(p.Plan(), slow, nil))
		if err != nil {
			t.Fatal(err)
		}
		check("P100s 3× slower", plan)
	}
	if sh := p.Plan().Shares; !slices.Equal(sh, []int{10, 10, 22, 22}) || p.Plan().Mode == ModeExclude {
		t.Fatalf("plan %s with the P100s 3× slower, want the ring, the V100s at their 2×11 and the P100s 10 each", p.Plan().Dump())
	}
	free, err := ProportionalShares(64, []float64{3e6, 3e6, 1e6, 1e6}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if free[2] <= 22 {
		t.Fatalf("uncapped shares %v: the test needs the cap to bind", free)
	}
	even := durations(1, 1, 1, 1)
	for s := 0; s < 6; s++ {
		plan, err := p.Observe(report(p.Plan(), even, nil))
		if err != nil {
			t.Fatal(err)
		}
		check("even speeds", plan)
	}
	if sh := p.Plan().Shares; !slices.Equal(sh, []int{14, 14, 18, 18}) {
		t.Fatalf("shares %v at even speeds, want the P100s at their 2×7 and the V100s 18", sh)
	}
	excluded := false
	for s := 0; s < 8; s++ {
		plan, err := p.Observe(report(p.Plan(), durations(20, 20, 1, 1), nil))
		if err != nil {
			t.Fatal(err)
		}
		check("P100s 20× slower", plan)
		excluded = excluded || plan.Mode == ModeExclude && plan.Shares[2]+plan.Shares[3] == 64
	}
	if !excluded {
		t.Fatalf("plan %s: want the P100s excluded at 20× slower", p.Plan().Dump())
	}
}

// Caps that cannot hold the global batch in MaxAccum passes, or not one
// per rank, are refused when the policy is made, not at step 40.
func TestMemoryThatCannotHoldTheBatchIsRefused(t *testing.T) {
	for _, m := range []*Memory{
		{MicroCap: []int{7, 7, 12, 12}, MaxAccum: 1},
		{MicroCap: []int{7, 7, 12}},
		{MicroCap: []int{7, 7, 12, 12}, MaxAccum: -1},
	} {
		cfg, err := Preset(NameShares, 4, 64)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Memory = m
		if _, err := NewPolicy(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("memory %+v: err %v, want ErrInvalidConfig", m, err)
		}
	}
}

// Without a memory plan every share is one pass; MicroOf splits a short
// batch's rows under the rank's cap.
func TestMicroWithoutAndWithCaps(t *testing.T) {
	cfg := Config{World: 2, GlobalBatch: 10}
	plan := Plan{Shares: []int{3, 7}}
	if got := cfg.Micro(plan); got[0].Accum != 1 || got[1].Batch != 7 {
		t.Fatalf("no memory: %+v", got)
	}
	cfg.Memory = &Memory{MicroCap: []int{2, 0}}
	if got := cfg.Micro(plan); got[0].Accum != 2 || got[0].Batch != 2 || got[1].Accum != 1 {
		t.Fatalf("caps 2, unbounded: %+v", got)
	}
	if m := cfg.MicroOf(0, 5); m.Batch != 2 || m.Accum != 3 {
		t.Fatalf("5 rows under cap 2: %+v", m)
	}
}
