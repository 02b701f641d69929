package tta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
)

// The benchmark on a small run: three ranks, two epochs, rank 2 three
// times slower. Synchronous SGD's curve does not depend on who is slow, so
// BSP under the pattern ends at exactly the no-straggler run's accuracy,
// and the no-straggler row's BSP run is the reference itself (ratio 1).
// Every (pattern, policy) gets a row, and the exact preset ends every rank
// with the same parameters (the trainer checks it) and reaches the target.
func TestTheBenchTrainsEveryPatternAndPolicyToTheTarget(t *testing.T) {
	cfg := Config{Ranks: []int{3}, Patterns: []string{"none", "slow-3x"}, Policies: []string{straggler.NameShares},
		Epochs: 2, TargetEpoch: 2, EvalEvery: 2, StepCompute: 4 * time.Millisecond, OpTimeout: time.Minute}
	var rows []Row
	if err := RunBench(context.Background(), cfg, func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (2 patterns × 1 policy): %+v", len(rows), rows)
	}
	for _, r := range rows {
		t.Logf("%s %s: target %.4f, none %.2fs, bsp %+v (%.2f), policy %+v (%.2f)", r.Pattern, r.Policy, r.Target, r.NoStraggler, r.BSP, r.BSPRatio, r.Adaptive, r.Ratio)
		if r.Target <= 0.1 || r.NoStraggler <= 0 {
			t.Fatalf("%s %s: target %.4f reached at %.3fs: the reference run did not learn", r.Pattern, r.Policy, r.Target, r.NoStraggler)
		}
		if r.BSP.Final != rows[0].BSP.Final || !r.BSP.Reached {
			t.Fatalf("%s: BSP ends at %.6f (reached %v), without a straggler at %.6f: synchronous SGD's curve changed with the timing",
				r.Pattern, r.BSP.Final, r.BSP.Reached, rows[0].BSP.Final)
		}
		if r.Pattern == "none" && r.BSPRatio != 1 {
			t.Fatalf("the no-straggler row's BSP ratio is %v, want 1 (it is the reference run)", r.BSPRatio)
		}
		if r.Policy == straggler.NameShares && !r.Adaptive.Reached {
			t.Fatalf("%s: the exact shares preset never reached the target %.4f (final %.4f)", r.Pattern, r.Target, r.Adaptive.Final)
		}
	}
}

// A configuration that cannot run is refused before anything trains:
// a network pattern (it needs a test bed), a target epoch past the run, a
// world of one, an unknown policy.
func TestTheBenchRefusesWhatCannotRun(t *testing.T) {
	for name, cfg := range map[string]Config{
		"network pattern":  {Ranks: []int{4}, Patterns: []string{"slow-link-10x"}},
		"target past end":  {Ranks: []int{4}, Epochs: 3, TargetEpoch: 4},
		"world of one":     {Ranks: []int{1}},
		"unknown policy":   {Ranks: []int{4}, Policies: []string{"fastest"}},
		"no world at all":  {},
		"negative compute": {Ranks: []int{2}, StepCompute: -time.Second},
	} {
		err := RunBench(context.Background(), cfg, func(Row) error { t.Fatalf("%s: a row was emitted", name); return nil })
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}
