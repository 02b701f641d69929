package straggler

import (
	"errors"
	"testing"
	"time"
)

// AntDT §VI-A: with L_trans = 5, L_per = 20 and λ = 1.5, a rank that is
// twice as slow from the start becomes persistent once its long window is
// full, a rank that spikes to 3× for five steps is transient only while the
// spike fills its short window, and a rank with a slower-device prior is
// deterministic throughout.
func TestAntDTTransientVersusPersistentWorkedExample(t *testing.T) {
	m, err := NewMonitor(MonitorConfig{World: 10, ShortWindow: 5, LongWindow: 20, Lambda: 1.5,
		Prior: []float64{1.3, 1, 1, 1, 1, 1, 1, 1, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	arrival := func(rank, step int) time.Duration {
		switch {
		case rank == 7:
			return 200 * ms
		case rank == 2 && step >= 30 && step < 35:
			return 300 * ms
		}
		return 100 * ms
	}
	classAt := map[int]map[int]Class{
		10: {7: ClassTransient, 2: ClassNone, 0: ClassDeterministic},  // long window not yet full
		19: {7: ClassPersistent, 2: ClassNone, 0: ClassDeterministic}, // 20 samples: full
		34: {7: ClassPersistent, 2: ClassTransient, 1: ClassNone},     // 3/1.3 ≥ 1.5, long 1.5/1.15 < 1.5
		39: {7: ClassPersistent, 2: ClassNone, 0: ClassDeterministic}, // spike has left the short window
		60: {7: ClassPersistent, 2: ClassNone, 9: ClassNone},
	}
	for step := 0; step <= 60; step++ {
		for r := 0; r < 10; r++ {
			m.Observe(r, arrival(r, step))
		}
		want, ok := classAt[step]
		if !ok {
			continue
		}
		got := classes(m)
		for r, c := range want {
			if got[r] != c {
				t.Errorf("after step %d rank %d is %v, want %v", step, r, got[r], c)
			}
		}
	}
	if s, l, ok := means(m, 2); !ok || s != 100*ms || l != 100*ms {
		t.Errorf("rank 2 means %v/%v, want 100ms in both windows after the spike", s, l)
	}
}

// classes returns every rank's class, by rank: none for the ranks the
// plan's Classes (appendClassed) leave out.
func classes(m *Monitor) []Class {
	out := make([]Class, m.cfg.World)
	for _, rc := range m.appendClassed(nil) {
		out[rc.Rank] = rc.Class
	}
	return out
}

// means returns rank's short- and long-window mean arrival, and false
// when the rank has no data.
func means(m *Monitor, rank int) (short, long time.Duration, ok bool) {
	ns, nl := m.held(rank)
	if ns == 0 {
		return 0, 0, false
	}
	return m.shortSum[rank] / time.Duration(ns), m.longSum[rank] / time.Duration(nl), true
}

func TestSlownessRatioIsConfigurable(t *testing.T) {
	// Rank 3 of 4 at 140ms, the others at 100ms: the average is 110ms and
	// rank 3's ratio 140/110 ≈ 1.27, a straggler for λ = 1.2 but not 1.5.
	for _, c := range []struct {
		lambda float64
		want   Class
	}{{1.5, ClassNone}, {1.2, ClassTransient}} {
		m, err := NewMonitor(MonitorConfig{World: 4, ShortWindow: 3, LongWindow: 10, Lambda: c.lambda})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 4; r++ {
			a := 100 * ms
			if r == 3 {
				a = 140 * ms
			}
			m.Observe(r, a)
		}
		if got := classes(m)[3]; got != c.want {
			t.Errorf("λ=%v: rank at 1.27× the average is %v, want %v", c.lambda, got, c.want)
		}
	}
}

func TestMonitorConfigIsValidated(t *testing.T) {
	for _, cfg := range []MonitorConfig{
		{World: 0, ShortWindow: 1, LongWindow: 1, Lambda: 1.5},
		{World: 2, ShortWindow: 5, LongWindow: 4, Lambda: 1.5},
		{World: 2, ShortWindow: 1, LongWindow: 4, Lambda: 1},
		{World: 2, ShortWindow: 1, LongWindow: 4, Lambda: 1.5, Prior: []float64{1}},
		{World: 2, ShortWindow: 1, LongWindow: 4, Lambda: 1.5, Prior: []float64{1, 0}},
	} {
		if _, err := NewMonitor(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewMonitor(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
