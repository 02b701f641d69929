package elastic

import (
	"context"
	"os"
	"testing"
	"time"
)

// RecoveryBench with real processes: kill -9 of rank 0 (the proposer) and
// of a middle rank; the survivors must be stepping on the re-formed ring
// within the 2 s target (the measured numbers are in docs/elastic.md).
func TestRecoveryBenchProcesses(t *testing.T) {
	for _, victim := range []int{0, 1} {
		r, err := RunRecovery(context.Background(), RecoveryConfig{Ranks: 3, Victim: victim, Elems: 1 << 16, Stderr: os.Stderr})
		if err != nil {
			t.Fatalf("victim %d: %v", victim, err)
		}
		t.Logf("victim rank %d: recovery %v (detect %v, first step %v), generation %d → %d",
			victim, r.Recovery, r.Detect, r.FirstStep, r.GenBefore, r.GenAfter)
		if r.GenAfter != r.GenBefore+1 {
			t.Errorf("victim %d: generation %d → %d, want one new generation", victim, r.GenBefore, r.GenAfter)
		}
		if r.Recovery <= 0 || r.Recovery > 2*time.Second {
			t.Errorf("victim %d: recovery %v outside (0, 2s]", victim, r.Recovery)
		}
	}
}

func TestRecoveryBenchRejectsBadConfig(t *testing.T) {
	for _, c := range []RecoveryConfig{{Ranks: 1}, {Ranks: 3, Victim: 3}, {Ranks: 3, Victim: -1}} {
		if _, err := RunRecovery(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
