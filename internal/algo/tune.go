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
// costs a scheduling slice (docs/benchmarks-collectives.md, "Pieces under load").
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
// which decided a whole short run for the ring (docs/benchmarks-16bit.md). So a
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

// maxVariants bounds the candidates a Tuner chooses among in a size class.
const maxVariants = 4

// TuneStep is what a Tuner wants of one call.
type TuneStep struct {
	// Variant is the candidate the call runs (an index into the size
	// class's candidates, in the order the caller gave them).
	Variant int
	// Timed asks for the call's duration (Observe).
	Timed bool
	// Agree asks, after the call, for an agreement: a Max allreduce of
	// Report over every rank, given to Agreed.
	Agree bool
}

// A Tuner chooses, for each size class of a communicator's large
// AllReduces, among up to maxVariants candidate programs (the plain ring
// and pieces on one host; the ring, the two-level and the offloaded
// allreduce across hosts). Calls are grouped by their size's power of two
// and run in windows of one candidate; after a window every rank
// contributes its mean time per byte (Report) to a Max allreduce and
// passes the result to Agreed. So every rank decides from the same
// numbers and makes the same choices, as it must: ranks that chose
// differently would run different programs for one call. The first
// windows run every candidate once, in the caller's order (the cost
// model's, best first); then the fastest runs, and the others are probed
// in turn, ever more rarely, and at once when the time in use drifts. It
// is pure: the caller reads the clock and runs the agreement. The zero
// value is ready.
type Tuner struct {
	classes [64]tuneClass
}

// tuneClass is the tuning of one size class.
type tuneClass struct {
	n     int               // candidates (0: the class is new)
	cur   int               // the current window's candidate
	seen  [maxVariants]bool // each candidate has run a call (see Next)
	timed int               // timed calls of the current window
	sum   float64

	best    int                  // the candidate in use
	last    [maxVariants]float64 // agreed seconds per byte of each candidate's latest window (0: none)
	ref     float64              // the best's agreed time when it was chosen
	wait    int                  // windows of the best before another is probed
	backoff int                  // the current probe interval
	probe   int                  // the candidate probed last
	drifted bool                 // the last agreement saw the best's time drift
}

func (t *Tuner) class(bytes int) *tuneClass { return &t.classes[bits.Len(uint(max(bytes, 0)))] }

// Reset forgets what the Tuner measured for calls of bytes bytes and sets
// their class up for n candidates (1..maxVariants): the candidates
// changed.
func (t *Tuner) Reset(bytes, n int) {
	*t.class(bytes) = tuneClass{n: min(max(n, 1), maxVariants)}
}

// Next returns what the next call of bytes bytes should do. A class never
// Reset has two candidates.
func (t *Tuner) Next(bytes int) TuneStep {
	c := t.class(bytes)
	if c.n == 0 {
		c.n = 2
	}
	n := tuneWindow
	if c.last[c.cur] == 0 || c.cur != c.best {
		n = tuneProbe // a candidate's first window, or a probe
	}
	timed := c.seen[c.cur]
	c.seen[c.cur] = true
	return TuneStep{Variant: c.cur, Timed: timed, Agree: c.timed+1 >= n && timed}
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
// rank's largest) time per byte and chooses the next window's candidate;
// it reports whether the candidate in use (see Choice) changed.
func (t *Tuner) Agreed(bytes int, perByte float64) bool {
	c := t.class(bytes)
	ran, was := c.cur, c.best
	c.last[ran] = max(perByte, 1e-30) // 0 means not run
	c.timed, c.sum = 0, 0
	c.cur = c.decide(ran, perByte)
	return c.best != was
}

// decide returns the candidate of the window after one of ran that took
// perByte.
func (c *tuneClass) decide(ran int, perByte float64) int {
	c.drifted = false
	if u := c.unrun(); u >= 0 { // the first windows: every candidate runs once
		if ran != c.best && c.last[ran] < c.last[c.best] {
			c.best = ran
		}
		c.backoff = tuneMinProbe
		return u
	}
	switch {
	case ran != c.best: // a probe (or the last first window) ended
		if c.last[ran] < c.last[c.best] {
			c.best, c.backoff = ran, tuneMinProbe
		} else {
			c.backoff = min(2*c.backoff, tuneMaxProbe)
		}
		c.ref, c.wait = c.last[c.best], c.backoff
		return c.best
	case perByte > c.ref*tuneDrift || perByte*tuneDrift < c.ref:
		c.drifted = true
		return c.other() // the load changed: another may win now
	}
	if c.wait--; c.wait <= 0 {
		return c.other()
	}
	return c.best
}

// unrun returns the first candidate that has not run a window, or −1.
func (c *tuneClass) unrun() int {
	for v := range c.n {
		if c.last[v] == 0 {
			return v
		}
	}
	return -1
}

// other returns the next candidate to probe: the others in turn.
func (c *tuneClass) other() int {
	for range c.n {
		if c.probe = (c.probe + 1) % c.n; c.probe != c.best {
			return c.probe
		}
	}
	return c.best
}

// Choice reports the candidate in use for calls of bytes bytes and the
// agreed seconds per byte of each candidate's latest window (0: not run
// yet).
func (t *Tuner) Choice(bytes int) (best int, perByte [maxVariants]float64) {
	c := t.class(bytes)
	return c.best, c.last
}

// Drifted reports whether the last agreement on calls of bytes bytes saw
// the time of the candidate in use drift (the load or the links changed).
func (t *Tuner) Drifted(bytes int) bool { return t.class(bytes).drifted }
