package policy

import (
	"fmt"
	"math"
	"time"
)

// Slots of one rank's report, in order, each one float32.
const (
	slotPresent = iota // 1 when the report is there
	slotSamples        // samples whose gradient the report's buffer holds
	slotCompute        // compute time, µs
	slotArrival        // time from step start to entering the reduction, µs
	slotCut            // 1 when the compute budget cut the rank's work short
	slotWait           // the rank's time inside the previous step's reduction, µs
	slotWidth
)

// Layout is the straggler driver's reduction buffer of float32 elements:
//
//	[0, Payload)                         the caller's payload (gradient sums, loss …)
//	Payload                              samples applied (sum over reports)
//	Payload+1 + r·slotWidth + k          slot k of rank r's report of this step
//	Payload+1 + (World+r)·slotWidth + k  slot k of rank r's late report (previous step)
//
// Every slot is written by exactly one rank (late slots by the parent that
// folds the late gradient) and is zero everywhere else, so the Sum of the
// step's reduction copies each value exactly: x + 0 = x in floating point.
// Times are whole microseconds, exact below 2²⁴ µs ≈ 16.7 s.
type Layout struct {
	// Payload is the number of caller elements.
	Payload int
	// World is the number of ranks.
	World int
}

// Len returns the buffer length in elements.
func (l Layout) Len() int { return l.Payload + 1 + 2*l.World*slotWidth }

// Tail returns the number of elements after the payload.
func (l Layout) Tail() int { return l.Len() - l.Payload }

// SamplesAt returns the index of the samples-applied element.
func (l Layout) SamplesAt() int { return l.Payload }

func (l Layout) slot(late bool, rank int) int {
	g := 0
	if late {
		g = l.World
	}
	return l.Payload + 1 + (g+rank)*slotWidth
}

// RankReport is one rank's report of one step, as carried in the buffer.
type RankReport struct {
	// Present says whether the report is in the buffer.
	Present bool `json:"present"`
	// Samples is the number of samples whose gradient the rank contributed.
	Samples int `json:"samples"`
	// Compute is the time the rank spent computing them (under a budget,
	// until its last whole sample was done).
	Compute time.Duration `json:"compute_ns"`
	// Arrival is the time from the rank's step start to its entering the
	// reduction.
	Arrival time.Duration `json:"arrival_ns"`
	// Cut says the plan's compute budget ended the rank's work.
	Cut bool `json:"cut,omitempty"`
	// Wait is the rank's time inside the previous step's reduction.
	Wait time.Duration `json:"wait_ns"`
}

// Report is everything a step's reduced buffer says: the samples applied,
// the reports of the ranks whose gradient of this step is in, and the late
// reports of ranks whose gradient of the previous step was folded in now.
type Report struct {
	// Step is the step reduced.
	Step int `json:"step"`
	// Applied is the number of samples whose gradients the buffer holds.
	Applied int `json:"applied"`
	// Current holds this step's reports by rank.
	Current []RankReport `json:"current"`
	// Late holds the previous step's reports of ranks folded late.
	Late []RankReport `json:"late"`
}

func micros(d time.Duration) float32 {
	if d <= 0 {
		return 0
	}
	return float32(math.Round(float64(d) / float64(time.Microsecond)))
}

func fromMicros(f float32) time.Duration {
	return time.Duration(float64(f) * float64(time.Microsecond))
}

// Write stores rr as rank's report (late or of this step) in buf, which
// must be Len() long.
func (l Layout) Write(buf []float32, late bool, rank int, rr RankReport) {
	o := l.slot(late, rank)
	s := buf[o : o+slotWidth]
	clear(s)
	if !rr.Present {
		return
	}
	s[slotPresent] = 1
	s[slotSamples] = float32(rr.Samples)
	s[slotCompute] = micros(rr.Compute)
	s[slotArrival] = micros(rr.Arrival)
	if rr.Cut {
		s[slotCut] = 1
	}
	s[slotWait] = micros(rr.Wait)
}

// Read decodes the report of step from a reduced buffer.
func (l Layout) Read(buf []float32, step int) (Report, error) {
	if len(buf) != l.Len() {
		return Report{}, fmt.Errorf("policy: buffer of %d elements, layout wants %d", len(buf), l.Len())
	}
	rep := Report{Step: step, Applied: int(buf[l.SamplesAt()]), Current: make([]RankReport, l.World), Late: make([]RankReport, l.World)}
	for r := 0; r < l.World; r++ {
		rep.Current[r] = l.read(buf, false, r)
		rep.Late[r] = l.read(buf, true, r)
	}
	return rep, nil
}

func (l Layout) read(buf []float32, late bool, rank int) RankReport {
	o := l.slot(late, rank)
	s := buf[o : o+slotWidth]
	if s[slotPresent] == 0 {
		return RankReport{}
	}
	return RankReport{Present: true, Samples: int(s[slotSamples]), Compute: fromMicros(s[slotCompute]),
		Arrival: fromMicros(s[slotArrival]), Cut: s[slotCut] != 0, Wait: fromMicros(s[slotWait])}
}

// FoldLate adds the tail of a contribution of rank that arrived a step
// late to buf's tail: its samples count, its own report (its Current slots)
// into rank's Late slots, and its Late slots as they are (a child that was
// a parent the step before may carry a grandchild's late report; each late
// report is folded by exactly one rank, so the slots never collide).
func (l Layout) FoldLate(buf, contrib []float32, rank int) {
	buf[l.SamplesAt()] += contrib[l.SamplesAt()]
	lo := l.slot(true, 0)
	for i := lo; i < l.Len(); i++ {
		buf[i] += contrib[i]
	}
	src := contrib[l.slot(false, rank) : l.slot(false, rank)+slotWidth]
	dst := buf[l.slot(true, rank) : l.slot(true, rank)+slotWidth]
	copy(dst, src)
}
