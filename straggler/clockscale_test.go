package straggler

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// withClocks sets every present member's reported GPU clock.
func withClocks(rep Report, mhz []float64) Report {
	for r := range rep.Current {
		if rep.Current[r].Present {
			rep.Current[r].SMClockMHz = mhz[r]
		}
	}
	return rep
}

// The default predictor uses the GPU clock the ranks report: when rank 2
// is throttled from 1530 to 765 MHz and its samples take twice as long,
// the very next plan predicts the doubled time (the plain EWMA, with the
// same reports but no clocks, moves only alpha of the way) and gives the
// rank a smaller share at once. At a constant clock the plans are those
// of reports without clocks, byte for byte.
func TestTheDefaultPredictorScalesByTheGPUClock(t *testing.T) {
	clocked := newPolicy(t, NameShares, 4, 64)
	plain := newPolicy(t, NameShares, 4, 64)
	full := []float64{1530, 1530, 1530, 1530}
	tau := durations(1, 1, 1, 1)
	for s := 0; s < 5; s++ {
		a, err := clocked.Observe(withClocks(report(clocked.Plan(), tau, nil), full))
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.Observe(report(plain.Plan(), tau, nil))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Dump(), b.Dump()) {
			t.Fatalf("step %d at a constant clock:\n%s\nwithout clocks:\n%s", s, a.Dump(), b.Dump())
		}
	}
	throttled := []float64{1530, 1530, 765, 1530}
	slow := durations(1, 1, 2, 1)
	a, err := clocked.Observe(withClocks(report(clocked.Plan(), slow, nil), throttled))
	if err != nil {
		t.Fatal(err)
	}
	b, err := plain.Observe(report(plain.Plan(), slow, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := float64(a.PerSample[2]) / float64(time.Millisecond); math.Abs(got-2) > 0.01 {
		t.Fatalf("throttled rank 2 predicted %.3f ms a sample, want 2 (its clock halved)", got)
	}
	if got := float64(b.PerSample[2]) / float64(time.Millisecond); got > 1.9 {
		t.Fatalf("the plain EWMA predicted %.3f ms: the test needs it slower to follow", got)
	}
	if a.Shares[2] >= b.Shares[2] {
		t.Fatalf("shares %v with the clock, %v without: want rank 2 given fewer at once", a.Shares, b.Shares)
	}
	// Back at full clock and speed, the clock says so at once too.
	a, err = clocked.Observe(withClocks(report(clocked.Plan(), tau, nil), full))
	if err != nil {
		t.Fatal(err)
	}
	if got := float64(a.PerSample[2]) / float64(time.Millisecond); math.Abs(got-1) > 0.01 {
		t.Fatalf("rank 2 back at full clock predicted %.3f ms a sample, want 1", got)
	}
}
