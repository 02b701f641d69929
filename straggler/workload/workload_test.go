package workload

import (
	"testing"
	"time"

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

func TestSamplesWithinIsTheLargestCountThatFits(t *testing.T) {
	in := mustInjector(t, "slow=1:3x;persistent=2:+10ms", 3)
	for _, c := range []struct {
		rank   int
		budget time.Duration
		want   int
	}{{0, 10 * time.Millisecond, 10}, {0, 10*time.Millisecond - 1, 9}, {1, 10 * time.Millisecond, 3}, {2, 9 * time.Millisecond, 0}, {2, 15 * time.Millisecond, 5}} {
		if got := SamplesWithin(in, c.rank, 0, c.budget, time.Millisecond); got != c.want {
			t.Errorf("rank %d budget %v: %d samples, want %d", c.rank, c.budget, got, c.want)
		}
	}
	// Ideal compute of one 3× slow rank of 4 is 1.2× the equal share.
	in4 := mustInjector(t, "slow=2:3x", 4)
	if got := IdealCompute(in4, 4, 0, 64, time.Millisecond); got != 19200*time.Microsecond {
		t.Errorf("Ideal compute %v, want 19.2ms", got)
	}
	// A rank unavailable for 16ms of every step (AntDT persistent +16ms)
	// of 4 ranks at 1ms/sample: 3T + (T − 16) = 64 → T = 20ms; with
	// +100ms it never helps: 3T = 64.
	if got := IdealCompute(mustInjector(t, "persistent=1:+16ms", 4), 4, 0, 64, time.Millisecond); got != 20*time.Millisecond {
		t.Errorf("Ideal compute with a 16ms stall %v, want 20ms", got)
	}
	if got := IdealCompute(mustInjector(t, "persistent=1:+100ms", 4), 4, 0, 64, time.Millisecond); got.Round(time.Microsecond) != 21333*time.Microsecond {
		t.Errorf("Ideal compute with a 100ms stall %v, want 21.333ms", got)
	}
}
