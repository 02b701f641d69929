package recovery

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
)

// TestMain lets Run re-execute this test binary as the bench's ranks.
func TestMain(m *testing.M) {
	if code, ok := RankMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// The recovery bench with real processes: kill -9 of rank 0 (the proposer) and
// of a middle rank; the survivors must be stepping on the re-formed ring.
// The 2 s target is the data plane's default silence timeout: recovery
// must not wait for it. Here that timeout is 10 minutes, so recovering at
// all (within the measurement's 5-minute limit) shows it did not; how fast
// is measured by `ringtail bench recovery` (docs/elastic.md), not asserted.
func TestRecoveryBenchProcesses(t *testing.T) {
	for _, victim := range []int{0, 1} {
		r, err := Run(context.Background(), Config{Ranks: 3, Victim: victim, Elems: 1 << 16, Stderr: os.Stderr,
			Env: []string{ringtail.EnvPeerTimeout + "=10m"}, Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatalf("victim %d: %v", victim, err)
		}
		t.Logf("victim rank %d: recovery %v (detect %v, first step %v), generation %d → %d",
			victim, r.Recovery, r.Detect, r.FirstStep, r.GenBefore, r.GenAfter)
		if r.GenAfter != r.GenBefore+1 {
			t.Errorf("victim %d: generation %d → %d, want one new generation", victim, r.GenBefore, r.GenAfter)
		}
		if r.Recovery <= 0 {
			t.Errorf("victim %d: recovery %v", victim, r.Recovery)
		}
	}
}

func TestRecoveryBenchRejectsBadConfig(t *testing.T) {
	for _, c := range []Config{{Ranks: 1}, {Ranks: 3, Victim: 3}, {Ranks: 3, Victim: -1}} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// A rank's options travel through its environment: what Env writes,
// RankOptionsFromEnv reads back.
func TestRankOptionsRoundTripThroughTheEnvironment(t *testing.T) {
	for _, o := range []RankOptions{
		{Elems: 1 << 18, Pace: 10 * time.Millisecond},
		{Elems: 7, Pace: 0, Steps: 42, Log: true},
	} {
		for _, k := range []string{EnvRole, envBenchElems, envBenchPace, envBenchSteps, envBenchLog} {
			t.Setenv(k, "") // unset, as far as RankOptionsFromEnv goes
		}
		env := o.Env()
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		if r := os.Getenv(EnvRole); r != roleBenchRank {
			t.Errorf("%v: %s=%q, want %q (RankMain would not run the rank)", env, EnvRole, r, roleBenchRank)
		}
		got, err := RankOptionsFromEnv()
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if got != o {
			t.Errorf("%v read back as %+v, want %+v", env, got, o)
		}
	}
}

func TestRankOptionsFromEnvRejectsBadValues(t *testing.T) {
	t.Setenv(envBenchElems, "0")
	t.Setenv(envBenchPace, "5")
	t.Setenv(envBenchSteps, "-1")
	_, err := RankOptionsFromEnv()
	for _, want := range []string{envBenchElems, envBenchPace, envBenchSteps} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
