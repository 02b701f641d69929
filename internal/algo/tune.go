package algo

import (
	"math/bits"
	"time"
)

// Measured choice between the plain ring and pieces. On shared memory a
// large AllReduce in pieces (ring.AllReducePieces) runs up to 2× faster
// than the plain ring when the ranks have the cores to themselves, and 3–10×
// slower when another program keeps the cores busy: a piece's steps
// synchronise the ranks hundreds of times per call, and each wait then
// costs a scheduling slice (docs/benchmarks.md, "Pieces under load").
// Neither is right everywhere and the load changes while a job runs, so the
// communicator runs both and keeps the faster, as STAR-MPI's online tuning
// of collectives does.

// Window lengths, in timed calls of one size class: the best variant runs
// tuneWindow calls between agreements, the other tuneProbe when probed.
// The first window is the plain ring's, then pieces are probed. A
// variant's first call is not timed and adds a call to its window: it
// builds the variant's programs and touches its buffers and shared-memory
// slots for the first time, and once the host's memory is cold (a job
// that freed gigabytes just ran) such a call took up to 8× a later one,
// which decided a whole short run for the ring (docs/benchmarks.md). So a
// job decides within its first six calls of a size, and under load a
// probe of pieces costs two slow calls.
const (
	tuneWindow = 8
	tuneProbe  = 2
)

// Probe intervals, in windows of the best: the other variant is run again
// after tuneMinProbe windows, twice as long after each probe it loses, at
// most tuneMaxProbe; at once when the best's time drifts by tuneDrift
// (the load changed).
const (
	tuneMinProbe = 4
	tuneMaxProbe = 256
	tuneDrift    = 1.5
)

// TuneStep is what a Tuner wants of one call.
type TuneStep struct {
	// Pieces runs the call in pieces, or as the plain ring.
	Pieces bool
	// Timed asks for the call's duration (Observe).
	Timed bool
	// Agree asks, after the call, for an agreement: a Max allreduce of
	// Report over every rank, given to Agreed.
	Agree bool
}

// A Tuner chooses, for each size class of a communicator's large
// AllReduces, between the plain ring and pieces. Calls are grouped by
// their size's power of two and run in windows of one variant; after a
// window every rank contributes its mean time per byte (Report) to a Max
// allreduce and passes the result to Agreed. So every rank decides from the
// same numbers and makes the same choices, as it must: ranks that chose
// differently would run different programs for one call. It is pure: the
// caller reads the clock and runs the agreement. The zero value is ready.
type Tuner struct {
	classes [64]tuneClass
}

// tuneClass is the tuning of one size class.
type tuneClass struct {
	pieces bool    // the current window's variant
	seen   [2]bool // each variant has run a call (see variant)
	timed  int     // timed calls of the current window
	sum    float64

	best    bool       // the variant in use: pieces or the plain ring
	last    [2]float64 // agreed seconds per byte of each variant's latest window (0: none)
	ref     float64    // the best's agreed time when it was chosen
	wait    int        // windows of the best before the other is probed
	backoff int        // the current probe interval
}

func variant(pieces bool) int {
	if pieces {
		return 1
	}
	return 0
}

func (t *Tuner) class(bytes int) *tuneClass { return &t.classes[bits.Len(uint(max(bytes, 0)))] }

// Next returns what the next call of bytes bytes should do.
func (t *Tuner) Next(bytes int) TuneStep {
	c := t.class(bytes)
	n := tuneWindow
	if c.last[0] == 0 || c.pieces != c.best {
		n = tuneProbe // the first window, or a probe
	}
	v := variant(c.pieces)
	timed := c.seen[v]
	c.seen[v] = true
	return TuneStep{Pieces: c.pieces, Timed: timed, Agree: c.timed+1 >= n && timed}
}

// Observe records the duration of a timed call of bytes bytes.
func (t *Tuner) Observe(bytes int, d time.Duration) {
	c := t.class(bytes)
	c.sum += d.Seconds() / float64(max(bytes, 1))
	c.timed++
}

// Report is this rank's mean time per byte, in seconds, over the timed
// calls of the window that ends with a call of bytes bytes.
func (t *Tuner) Report(bytes int) float64 {
	c := t.class(bytes)
	return c.sum / float64(max(c.timed, 1))
}

// Agreed ends the window of the call of bytes bytes with the agreed (every
// rank's largest) time per byte and chooses the next window's variant; it
// reports whether the variant in use (see Choice) changed.
func (t *Tuner) Agreed(bytes int, perByte float64) bool {
	c := t.class(bytes)
	ran, was := c.pieces, c.best
	c.last[variant(ran)] = max(perByte, 1e-30) // 0 means not run
	c.timed, c.sum = 0, 0
	c.pieces = c.decide(ran, perByte)
	return c.best != was
}

// decide returns the variant of the window after one of variant ran that
// took perByte.
func (c *tuneClass) decide(ran bool, perByte float64) bool {
	other := !c.best
	switch {
	case c.last[variant(other)] == 0: // the first window: try the other
		c.backoff = tuneMinProbe
		return other
	case ran != c.best: // a probe ended
		if c.last[variant(ran)] < c.last[variant(c.best)] {
			c.best, c.backoff = ran, tuneMinProbe
		} else {
			c.backoff = min(2*c.backoff, tuneMaxProbe)
		}
		c.ref, c.wait = c.last[variant(c.best)], c.backoff
		return c.best
	case perByte > c.ref*tuneDrift || perByte*tuneDrift < c.ref:
		return other // the load changed: the other may win now
	}
	if c.wait--; c.wait <= 0 {
		return other
	}
	return c.best
}

// Choice reports the variant in use for calls of bytes bytes (pieces or
// the plain ring) and the agreed seconds per byte of each variant's
// latest window (0: not run yet).
func (t *Tuner) Choice(bytes int) (pieces bool, ring, inPieces float64) {
	c := t.class(bytes)
	return c.best, c.last[0], c.last[1]
}
