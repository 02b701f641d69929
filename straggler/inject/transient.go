package inject

import (
	"math"
	"strconv"
	"time"
)

// Transient is AntDT's transient straggler pattern (§VII-A4): on a duty
// cycle of Period steps, the first On steps of each cycle add
// T_delay = Intensity × sleep to the compute of each disturbed rank. A rank
// is disturbed in a cycle with probability Fraction (AntDT: 0.3, "three of
// the ten nodes"), drawn afresh for every cycle, so different ranks straggle
// in different cycles.
//
// AntDT's cycle is 15 minutes on every 30 minutes and its SleepDuration
// 1.5 s; ringtail counts in steps (period=30, on=15) and defaults the sleep
// to one unslowed compute duration (sleep=1x), so that the intensity reads as
// a relative slowdown whatever the step length. An absolute sleep
// (sleep=1500ms) reproduces AntDT literally.
type Transient struct {
	// Intensity is AntDT's straggler intensity, in (0, 1].
	Intensity float64
	// Sleep is the absolute SleepDuration; zero when SleepFactor is used.
	Sleep time.Duration
	// SleepFactor is the SleepDuration as a multiple of the unslowed
	// compute duration; zero when Sleep is used.
	SleepFactor float64
	// Period is the duty-cycle length in steps (≥ 1).
	Period int
	// On is the number of disturbed steps at the start of each cycle, in
	// [1, Period].
	On int
	// Fraction is the probability that a rank is disturbed in a cycle.
	Fraction float64
}

// Defaults of the transient pattern's options.
const (
	DefaultTransientSleepFactor = 1.0
	DefaultTransientPeriod      = 30
	DefaultTransientOn          = 15
	DefaultTransientFraction    = 0.3
)

func (t Transient) clause() string {
	sleep := t.Sleep.String()
	if t.SleepFactor != 0 {
		sleep = formatFloat(t.SleepFactor) + "x"
	}
	return "transient=" + formatFloat(t.Intensity) + ":sleep=" + sleep +
		":period=" + strconv.Itoa(t.Period) + ":on=" + strconv.Itoa(t.On) +
		":frac=" + formatFloat(t.Fraction)
}

func (t Transient) validate() error {
	switch {
	case !(t.Intensity > 0 && t.Intensity <= 1):
		return &SpecError{Clause: t.clause(), Reason: "intensity must be in (0, 1]; raise sleep= for stronger delays"}
	case (t.Sleep > 0) == (t.SleepFactor > 0) || t.Sleep < 0 || t.SleepFactor < 0 || math.IsInf(t.SleepFactor, 0):
		return &SpecError{Clause: t.clause(), Reason: "sleep must be a positive duration or a positive finite multiple Fx"}
	case t.Period < 1 || t.On < 1 || t.On > t.Period:
		return &SpecError{Clause: t.clause(), Reason: "need period ≥ 1 and 1 ≤ on ≤ period"}
	case !(t.Fraction >= 0 && t.Fraction <= 1):
		return &SpecError{Clause: t.clause(), Reason: "frac must be in [0, 1]"}
	}
	return nil
}

// extra returns the delay the pattern adds to rank's compute at step.
func (t Transient) extra(seed uint64, rank, step int, base time.Duration) time.Duration {
	if step < 0 || step%t.Period >= t.On {
		return 0
	}
	st := newStream(seed, patternTransient, rank, step/t.Period, 0)
	if st.float64() >= t.Fraction {
		return 0
	}
	sleep := t.Sleep
	if t.SleepFactor != 0 {
		sleep = time.Duration(t.SleepFactor * float64(base))
	}
	return time.Duration(t.Intensity * float64(sleep))
}
