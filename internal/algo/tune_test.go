package algo

import (
	"testing"
	"time"
)

// tuneRun drives a Tuner as one rank would for calls calls of bytes
// bytes, each taking costOf(pieces) nanoseconds per byte (asked of every
// call, timed or not, as every call takes its time), the agreement being
// this rank's own report (a Max over one rank). It returns each call's
// variant.
func tuneRun(tu *Tuner, bytes, calls int, cost func(pieces bool) float64) []bool {
	ran := make([]bool, 0, calls)
	for range calls {
		st := tu.Next(bytes)
		pieces := st.Variant == 1
		ran = append(ran, pieces)
		ns := cost(pieces)
		if st.Timed {
			tu.Observe(bytes, time.Duration(ns*float64(bytes)))
		}
		if st.Agree {
			tu.Agreed(bytes, tu.Report(bytes))
		}
	}
	return ran
}

// inPieces reports whether the tuner's choice for bytes is pieces (the
// second candidate).
func inPieces(tu *Tuner, bytes int) bool {
	best, _ := tu.Choice(bytes)
	return best == 1
}

func count(ran []bool, pieces bool) int {
	n := 0
	for _, p := range ran {
		if p == pieces {
			n++
		}
	}
	return n
}

// tuneCase is a pair of costs (ns per byte) and the variant that must win.
type tuneCase struct {
	name         string
	ring, pieces float64
	want         bool
}

// costOf returns a cost function: ns per byte of the plain ring and of
// pieces.
func costOf(ring, pieces float64) func(bool) float64 {
	return func(p bool) float64 {
		if p {
			return pieces
		}
		return ring
	}
}

// The first calls of a size try the plain ring, then pieces; the faster
// stays, and the slower is probed again ever more rarely.
func TestTunerKeepsTheFasterVariant(t *testing.T) {
	const bytes = 16 << 20
	for _, tc := range []tuneCase{{"quiet cores: pieces", 0.4, 0.2, true}, {"busy cores: the ring", 0.8, 6, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var tu Tuner
			ran := tuneRun(&tu, bytes, 10000, costOf(tc.ring, tc.pieces))
			const first = 1 + tuneProbe // a variant's first window: one untimed call more
			for i := range 2 * first {
				if ran[i] != (i >= first) {
					t.Fatalf("first windows ran %v, want %d calls of the ring then %d in pieces", ran[:2*first], first, first)
				}
			}
			if got := inPieces(&tu, bytes); got != tc.want {
				t.Fatalf("chose pieces %t, want %t", got, tc.want)
			}
			if other := count(ran[2*first:], !tc.want); other > 100 {
				t.Fatalf("%d of 10000 calls ran the slower variant, want at most 100 (probes backing off)", other)
			}
			if tail := count(ran[5000:], !tc.want); tail > 2*tuneProbe {
				t.Fatalf("%d of the last 5000 calls ran the slower variant, want the probes of the longest interval only", tail)
			}
		})
	}
}

// A variant's first call builds its programs and first touches its
// memory, and may take many times what later calls take; it is not timed,
// so it cannot decide the choice (a short job would keep the slower
// variant for the whole run).
func TestTunerDoesNotTimeAVariantsFirstCall(t *testing.T) {
	const bytes = 64 << 20
	for _, tc := range []tuneCase{{"pieces faster", 0.6, 0.28, true}, {"the ring faster", 0.28, 0.6, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var tu Tuner
			ran := map[bool]bool{}
			firstSlow := func(p bool) float64 { // each variant's first call 8× the later ones
				c := costOf(tc.ring, tc.pieces)(p)
				if !ran[p] {
					ran[p], c = true, 8*c
				}
				return c
			}
			calls := tuneRun(&tu, bytes, 25, firstSlow)
			if got := inPieces(&tu, bytes); got != tc.want {
				t.Fatalf("chose pieces %t after %v, want %t", got, calls, tc.want)
			}
			if n := count(calls[len(calls)-10:], tc.want); n != 10 {
				t.Fatalf("the last 10 of 25 calls ran %v, want the faster variant", calls[len(calls)-10:])
			}
		})
	}
}

// When the load changes, the time of the variant in use drifts and the
// other is probed at once: the choice follows the load both ways within a
// few windows, not after the probe interval has grown long.
func TestTunerFollowsTheLoad(t *testing.T) {
	const bytes = 16 << 20
	quiet, busy := costOf(0.4, 0.2), costOf(0.8, 6)
	var tu Tuner
	tuneRun(&tu, bytes, 20000, quiet) // a long quiet time: the probe interval is at its longest
	ran := tuneRun(&tu, bytes, 100, busy)
	if pieces := inPieces(&tu, bytes); pieces {
		t.Fatal("still in pieces after 100 busy calls")
	}
	// The window the change falls in may not drift far enough; the next
	// does.
	if n := count(ran, true); n > 2*tuneWindow+tuneProbe {
		t.Fatalf("%d of the first 100 busy calls ran in pieces, want at most two windows and a probe", n)
	}
	tuneRun(&tu, bytes, 20000, busy)
	ran = tuneRun(&tu, bytes, 100, quiet)
	if pieces := inPieces(&tu, bytes); !pieces {
		t.Fatal("not back to pieces after 100 quiet calls")
	}
	if n := count(ran, false); n > 2*tuneWindow+tuneProbe {
		t.Fatalf("%d of the first 100 quiet calls ran the ring, want at most two windows and a probe", n)
	}
}

// Noise that does not change which variant is faster changes the choice
// rarely: a window 40% off its mean probes the other variant, which loses,
// so the ring runs a small share of the calls and is never chosen.
func TestTunerIsSteadyUnderNoise(t *testing.T) {
	const bytes = 4 << 20
	var tu Tuner
	i := 0
	noisy := func(p bool) float64 {
		i++
		f := 1.0
		if i%7 == 0 {
			f = 1.4 // every seventh call slow
		}
		if p {
			return 0.2 * f
		}
		return 0.45 * f
	}
	ran := tuneRun(&tu, bytes, 20000, noisy)
	if pieces := inPieces(&tu, bytes); !pieces {
		t.Fatal("chose the ring")
	}
	if n := count(ran, false); n > 400 {
		t.Fatalf("the ring ran %d of 20000 calls, want at most 400", n)
	}
}

// Sizes of different powers of two are tuned apart: the choice for one
// does not follow the other's times.
func TestTunerTunesEachSizeClass(t *testing.T) {
	var tu Tuner
	small, large := 2<<20, 64<<20
	for range 200 {
		tuneRun(&tu, small, 1, costOf(0.4, 0.2))
		tuneRun(&tu, large, 1, costOf(0.3, 0.5))
	}
	if p := inPieces(&tu, small); !p {
		t.Error("2 MiB: chose the ring, measured slower")
	}
	if p := inPieces(&tu, large); p {
		t.Error("64 MiB: chose pieces, measured slower")
	}
}

// Ranks that see the same agreed times make the same choices, whatever
// their own times were: every rank's Report differs, the Max is shared.
func TestTunersAgreeFromTheSameAgreedTimes(t *testing.T) {
	const n, bytes = 4, 8 << 20
	tus := make([]Tuner, n)
	for call := range 5000 {
		var steps [n]TuneStep
		for r := range tus {
			steps[r] = tus[r].Next(bytes)
			if steps[r] != steps[0] {
				t.Fatalf("call %d: rank %d step %+v, rank 0 %+v", call, r, steps[r], steps[0])
			}
			if steps[r].Timed {
				ns := 0.2 + 0.1*float64(r) + 0.05*float64(call%3) // each rank its own times
				if steps[r].Variant != 1 {
					ns *= 2 - float64(call%500)/250 // the ring gets faster, then slower
				}
				tus[r].Observe(bytes, time.Duration(ns*bytes))
			}
		}
		if steps[0].Agree {
			var agreed float64
			for r := range tus {
				agreed = max(agreed, tus[r].Report(bytes))
			}
			for r := range tus {
				tus[r].Agreed(bytes, agreed)
			}
		}
	}
}

// The tuner's per-call methods allocate nothing.
func TestTunerDoesNotAllocate(t *testing.T) {
	var tu Tuner
	allocs := testing.AllocsPerRun(1000, func() {
		st := tu.Next(1 << 24)
		if st.Timed {
			tu.Observe(1<<24, time.Millisecond)
		}
		if st.Agree {
			tu.Agreed(1<<24, tu.Report(1<<24))
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}
