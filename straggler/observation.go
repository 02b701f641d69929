package straggler

import (
	"fmt"
	"math"
	"time"
)

// Observation is one rank's report of one step.
type Observation struct {
	// Rank is the reporting rank, in [0, Config.World).
	Rank int
	// Step is the training step the report is about.
	Step int
	// Arrival is the time from the start of the step to the rank entering
	// the collective: under DDP this, not the iteration time (which the
	// barrier equalises), is what tells a straggler apart.
	Arrival time.Duration
	// Wait is the time the rank spent inside the collective: waiting for
	// the others plus the transfer itself.
	Wait time.Duration
	// Bytes is the number of bytes the rank sent in the collective.
	Bytes int64
	// CPU is the rank's host CPU utilisation over the step, in [0, 1]
	// (1 = its whole allotment busy).
	CPU float64
	// Net is the rank's network utilisation over the step, in [0, 1] of
	// its link capacity.
	Net float64
	// GPU holds optional device readings.
	GPU GPUReading
}

// GPUReading is an optional device sample taken during the step.
type GPUReading struct {
	// Valid says whether the reading was taken.
	Valid bool
	// Util is the GPU utilisation in [0, 1].
	Util float64
	// SMClockMHz is the streaming-multiprocessor clock.
	SMClockMHz float64
}

// Validate checks the observation's fields against a world of size world.
func (o Observation) Validate(world int) error {
	switch {
	case o.Rank < 0 || o.Rank >= world:
		return fmt.Errorf("rank %d not in [0,%d): %w", o.Rank, world, ErrBadObservation)
	case o.Step < 0:
		return fmt.Errorf("rank %d: negative step %d: %w", o.Rank, o.Step, ErrBadObservation)
	case o.Arrival < 0 || o.Wait < 0 || o.Bytes < 0:
		return fmt.Errorf("rank %d step %d: negative arrival, wait or bytes: %w", o.Rank, o.Step, ErrBadObservation)
	case !unit(o.CPU) || !unit(o.Net) || (o.GPU.Valid && (!unit(o.GPU.Util) || !(o.GPU.SMClockMHz >= 0) || math.IsInf(o.GPU.SMClockMHz, 0))):
		return fmt.Errorf("rank %d step %d: utilisation outside [0,1] or bad SM clock: %w", o.Rank, o.Step, ErrBadObservation)
	}
	return nil
}

func unit(f float64) bool { return f >= 0 && f <= 1 }
