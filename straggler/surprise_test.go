package straggler

import (
	"math"
	"testing"
	"time"
)

// surprisePlan is a plan of 4 ranks with 16 rows each, predicted at 1 ms a
// row and 2 ms of overhead after the compute.
func surprisePlan() (Plan, []float64) {
	ms := time.Millisecond
	return Plan{Shares: []int{16, 16, 16, 16}, Predicted: []time.Duration{18 * ms, 18 * ms, 18 * ms, 18 * ms}},
		[]float64{float64(2 * ms), float64(2 * ms), float64(2 * ms), float64(2 * ms)}
}

// A step's surprise is how much later than predicted the slowest rank
// would have finished its share at the rate it showed — whatever rows
// reassignment gave it — and nothing that is not a prediction missed
// counts.
func TestSurpriseMeasuresTheRatesNotTheRowsComputed(t *testing.T) {
	ms := time.Millisecond
	member := func(samples int, compute time.Duration) RankReport {
		return RankReport{Present: true, Samples: samples, Compute: compute, Arrival: compute + 2*ms}
	}
	cases := []struct {
		name string
		reps []RankReport
		want float64
	}{
		{"as predicted", []RankReport{member(16, 16*ms), member(16, 16*ms), member(16, 16*ms), member(16, 16*ms)}, 0},
		{"faster than predicted", []RankReport{member(16, 8*ms), member(16, 12*ms), member(16, 16*ms), member(16, 10*ms)}, 0},
		// Rank 1 computed 4 of its rows at 10 ms each while the others
		// took the rest at the predicted rate: it would have taken 160 ms.
		{"reassigned from a slow rank", []RankReport{member(20, 20*ms), member(4, 40*ms), member(20, 20*ms), member(20, 20*ms)}, 160.0/16 - 1},
		// Every unit of rank 2 moved during its 30 ms late start: its
		// wait and then its share as predicted.
		{"every unit moved", []RankReport{member(22, 22*ms), member(21, 21*ms), {Present: true, Compute: 30 * ms, Arrival: 30 * ms}, member(21, 21*ms)}, 46.0/16 - 1},
		// A rank absent from the step (a child) is not measured.
		{"absent rank", []RankReport{member(16, 16*ms), {}, member(16, 16*ms), member(16, 20*ms)}, 20.0/16 - 1},
	}
	for _, c := range cases {
		plan, over := surprisePlan()
		s := surprise{}
		s.observe(Report{Current: c.reps}, plan, over)
		if math.Abs(s.value()-c.want) > 1e-9 || s.n != 1 {
			t.Errorf("%s: surprise %v after %d steps, want %v after 1", c.name, s.value(), s.n, c.want)
		}
	}

	// Steps without predictions, or under a budget, add nothing.
	plan, over := surprisePlan()
	late := []RankReport{member(16, 16*ms), member(16, 64*ms), member(16, 16*ms), member(16, 16*ms)}
	s := surprise{}
	budget := plan
	budget.Budget = 16 * ms
	s.observe(Report{Current: late}, budget, over)
	unknown := plan
	unknown.Predicted = []time.Duration{0, 0, 0, 0}
	s.observe(Report{Current: late}, unknown, over)
	if s.n != 0 || s.value() != 0 {
		t.Fatalf("a budget's and an unpredicted step's reports moved the surprise to %v (%d steps)", s.value(), s.n)
	}
	// The steps are smoothed: 3, then 3 + 0.2·(0 − 3) in the short
	// memory, the mean 1.5 in the long one; the larger counts.
	s.observe(Report{Current: late}, plan, over)
	s.observe(Report{Current: []RankReport{member(16, 16*ms), member(16, 16*ms), member(16, 16*ms), member(16, 16*ms)}}, plan, over)
	if math.Abs(s.value()-2.4) > 1e-12 || math.Abs(s.long-1.5) > 1e-12 {
		t.Fatalf("smoothed surprise %v (long %v), want 2.4 (1.5)", s.value(), s.long)
	}
}

// Reassignment turns on at the threshold and off below half of it; a
// negative threshold is every step, and so is every step before the
// predictions are trusted.
func TestReassignTurnsOnAtTheThresholdAndOffBelowHalfOfIt(t *testing.T) {
	cases := []struct {
		on        bool
		value, at float64
		want      bool
	}{
		{false, 0.079, 0.08, false}, {false, 0.08, 0.08, true}, {true, 0.05, 0.08, true},
		{true, 0.04, 0.08, true}, {true, 0.039, 0.08, false}, {false, 0, -1, true}, {true, 0, -1, true},
	}
	for _, c := range cases {
		if got := reassignNext(c.on, true, c.value, c.at); got != c.want {
			t.Errorf("on %v, surprise %v, threshold %v: %v, want %v", c.on, c.value, c.at, got, c.want)
		}
		if !reassignNext(c.on, false, c.value, c.at) {
			t.Errorf("on %v, surprise %v, threshold %v: predictions not yet trusted, and no reassignment", c.on, c.value, c.at)
		}
	}
}

// Rare heavy misses keep reassignment on between them (the long memory's
// mean), where the short memory alone would turn it off before each
// episode's first late step; one early miss alone does not hold it on.
func TestSurpriseKeepsTheMeanOfRareMisses(t *testing.T) {
	ms := time.Millisecond
	on := []RankReport{{Present: true, Samples: 16, Compute: 16 * ms}, {Present: true, Samples: 16, Compute: 16 * ms},
		{Present: true, Samples: 16, Compute: 16 * ms}, {Present: true, Samples: 16, Compute: 16 * ms}}
	late := append([]RankReport(nil), on...)
	late[2].Compute = 64 * ms // 4× slow: a surprise of 3
	plan, over := surprisePlan()
	s := surprise{}
	for step := range 200 {
		rep := on
		if step%25 == 0 {
			rep = late
		}
		s.observe(Report{Current: rep}, plan, over)
		if step >= 50 && s.value() < DefaultReassignAt {
			t.Fatalf("step %d: surprise %v (short %v, long %v) under a 4× episode every 25 steps, want ≥ %v", step, s.value(), s.mean, s.long, DefaultReassignAt)
		}
	}
	if s.mean >= DefaultReassignAt/2 {
		t.Fatalf("the short memory alone (%v) should have let the episodes go", s.mean)
	}
	one := surprise{}
	one.observe(Report{Current: late}, plan, over)
	for range 79 {
		one.observe(Report{Current: on}, plan, over)
	}
	if one.value() >= DefaultReassignAt/2 {
		t.Fatalf("one early miss of 3 still holds the surprise at %v after 80 steps", one.value())
	}
}
