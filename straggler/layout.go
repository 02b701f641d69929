package straggler

import (
	"fmt"
	"math"
	"time"
)

// Slots of one rank's member report, in order, each one float32.
const (
	memberPresent = iota // 1 when the rank reduced as a member this step
	memberSamples        // samples whose gradient its buffer holds
	memberCompute        // compute time, µs
	memberArrival        // time from step start to entering the reduction, µs
	memberCut            // 1 when the compute budget cut its work short
	memberWait           // its time inside the previous step's reduction, µs
	memberCPU            // host CPU utilisation ×1000
	memberGPU            // GPU utilisation ×1000 (0: no reading)
	memberSMClock        // SM clock, MHz (0: no reading)
	memberGradSq         // squared norm of its gradient sum (0: not measured)
	memberWidth
)

// Slots of one rank's child report: every gradient a child sends carries
// one count and its own values, so the slots of several gradients folded
// in one step add up (sums, not maxima).
const (
	childCount      = iota // gradients folded
	childSamples           // samples they hold
	childCompute           // compute time, µs, summed
	childCycle             // time since the child's previous gradient, µs, summed
	childVersionsLo        // the parameter versions (steps) they were computed on, low bits (mod versionSplit), summed
	childVersionsHi        // the same versions' high bits (÷ versionSplit), summed
	childWidth
)

// versionSplit splits a version into two slots, each an integer a float32
// sum holds exactly: the low parts sum exactly for up to 2¹² gradients a
// step, the high parts for versions up to 2³⁶ ÷ gradients, where one slot
// holding the whole version would be exact only up to 2²⁴ steps.
const versionSplit = 1 << 12

// Layout is the straggler driver's reduction buffer of float32 elements:
//
//	[0, Payload)                                   the caller's payload (gradient sums, loss …)
//	Payload + r·memberWidth + k                    slot k of rank r's member report
//	Payload + World·memberWidth + r·childWidth + k slot k of rank r's child report
//	Len() − 1                                      the reduced gradient's squared norm
//
// A member writes its member slots; a child writes its child slots in
// every gradient it sends; every other slot is zero, and a parent folds a
// child's gradient whole, so the Sum of the step's reduction copies each
// member value exactly (x + 0 = x in floating point) and adds up the child
// values of the gradients folded. Times are whole microseconds, exact below
// 2²⁴ µs ≈ 16.7 s. The last slot is not reduced: it is zero in every
// contribution, and every member writes the reduced gradient's squared
// norm there after the reduction (WriteSum), identically, so that the
// reports forwarded to children carry it too.
type Layout struct {
	// Payload is the number of caller elements.
	Payload int
	// World is the number of ranks.
	World int
}

// Len returns the buffer length in elements.
func (l Layout) Len() int { return l.Payload + l.World*(memberWidth+childWidth) + 1 }

// Tail returns the number of elements after the payload.
func (l Layout) Tail() int { return l.Len() - l.Payload }

func (l Layout) member(rank int) int { return l.Payload + rank*memberWidth }

func (l Layout) child(rank int) int { return l.Payload + l.World*memberWidth + rank*childWidth }

// RankReport is one rank's member report of one step, as carried in the
// buffer.
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
	// CPU and GPU are the rank's host CPU and GPU utilisation in [0, 1];
	// SMClockMHz its GPU clock (0: no device reading).
	CPU        float64 `json:"cpu,omitempty"`
	GPU        float64 `json:"gpu,omitempty"`
	SMClockMHz float64 `json:"sm_clock_mhz,omitempty"`
	// GradSq is the squared norm of the rank's gradient sum over its
	// Samples (0: not measured): with the reduced sum's (Report.GradSq)
	// it estimates the gradient noise scale.
	GradSq float64 `json:"grad_sq,omitempty"`
}

// ChildReport sums the gradients a child's parent folded in one step.
type ChildReport struct {
	// Count is the number of gradients folded (0: none this step).
	Count int `json:"count"`
	// Samples is the samples they hold.
	Samples int `json:"samples"`
	// Compute and Cycle are the child's compute time and the time between
	// its gradients, summed over them.
	Compute time.Duration `json:"compute_ns"`
	Cycle   time.Duration `json:"cycle_ns"`
	// Versions is the sum of the parameter versions (the steps whose
	// parameters they were computed on).
	Versions int `json:"versions"`
}

// Staleness returns the mean staleness of the gradients folded at step:
// how many steps their parameters were behind the step that applied them.
func (c ChildReport) Staleness(step int) float64 {
	if c.Count == 0 {
		return 0
	}
	return float64(step) - float64(c.Versions)/float64(c.Count)
}

// Report is everything a step's reduced buffer says: the members' reports
// and the children's gradients folded in.
type Report struct {
	// Step is the step reduced.
	Step int `json:"step"`
	// Applied is the number of samples whose gradients the buffer holds.
	Applied int `json:"applied"`
	// Current holds the member reports by rank.
	Current []RankReport `json:"current"`
	// Child holds, by rank, the child gradients folded this step.
	Child []ChildReport `json:"child"`
	// GradSq is the squared norm of the reduced gradient sum over Applied
	// samples (0: not measured).
	GradSq float64 `json:"grad_sq,omitempty"`
}

// ChildSamples is the number of samples in the child gradients folded.
func (r Report) ChildSamples() int {
	n := 0
	for _, c := range r.Child {
		n += c.Samples
	}
	return n
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

func milli(f float64) float32 { return float32(math.Round(math.Min(math.Max(f, 0), 1) * 1000)) }

// Clear zeroes buf's report slots (the tail after the payload).
func (l Layout) Clear(buf []float32) { clear(buf[l.Payload:l.Len()]) }

// WriteMember stores rr as rank's member report in buf, which must be
// Len() long.
func (l Layout) WriteMember(buf []float32, rank int, rr RankReport) {
	o := l.member(rank)
	s := buf[o : o+memberWidth]
	clear(s)
	if !rr.Present {
		return
	}
	s[memberPresent] = 1
	s[memberSamples] = float32(rr.Samples)
	s[memberCompute] = micros(rr.Compute)
	s[memberArrival] = micros(rr.Arrival)
	if rr.Cut {
		s[memberCut] = 1
	}
	s[memberWait] = micros(rr.Wait)
	s[memberCPU] = milli(rr.CPU)
	s[memberGPU] = milli(rr.GPU)
	s[memberSMClock] = float32(math.Round(rr.SMClockMHz))
	s[memberGradSq] = float32(rr.GradSq)
}

// WriteSum stores the reduced gradient's squared norm in buf's last slot
// (after the reduction: every member computes the same value from the
// same bits).
func (l Layout) WriteSum(buf []float32, gradSq float64) { buf[l.Len()-1] = float32(gradSq) }

// SquaredNorm is Σ x² of a gradient, accumulated in float64.
func SquaredNorm(x []float32) float64 {
	s := 0.0
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s
}

// WriteChild stores one gradient's child report (Count 1) in buf.
func (l Layout) WriteChild(buf []float32, rank int, samples int, compute, cycle time.Duration, version int) {
	o := l.child(rank)
	s := buf[o : o+childWidth]
	s[childCount] = 1
	s[childSamples] = float32(samples)
	s[childCompute] = micros(compute)
	s[childCycle] = micros(cycle)
	s[childVersionsLo] = float32(version % versionSplit)
	s[childVersionsHi] = float32(version / versionSplit)
}

// Read decodes the report of step from a reduced buffer.
func (l Layout) Read(buf []float32, step int) (Report, error) {
	if len(buf) != l.Len() {
		return Report{}, fmt.Errorf("straggler: buffer of %d elements, layout wants %d", len(buf), l.Len())
	}
	rep := Report{Step: step, Current: make([]RankReport, l.World), Child: make([]ChildReport, l.World)}
	for r := 0; r < l.World; r++ {
		s := buf[l.member(r) : l.member(r)+memberWidth]
		if s[memberPresent] != 0 {
			rep.Current[r] = RankReport{Present: true, Samples: int(s[memberSamples]), Compute: fromMicros(s[memberCompute]),
				Arrival: fromMicros(s[memberArrival]), Cut: s[memberCut] != 0, Wait: fromMicros(s[memberWait]),
				CPU: float64(s[memberCPU]) / 1000, GPU: float64(s[memberGPU]) / 1000, SMClockMHz: float64(s[memberSMClock]),
				GradSq: float64(s[memberGradSq])}
			rep.Applied += rep.Current[r].Samples
		}
		c := buf[l.child(r) : l.child(r)+childWidth]
		if c[childCount] != 0 {
			rep.Child[r] = ChildReport{Count: int(c[childCount]), Samples: int(c[childSamples]), Compute: fromMicros(c[childCompute]),
				Cycle: fromMicros(c[childCycle]), Versions: int(c[childVersionsHi])*versionSplit + int(c[childVersionsLo])}
			rep.Applied += rep.Child[r].Samples
		}
	}
	rep.GradSq = float64(buf[l.Len()-1])
	return rep, nil
}
