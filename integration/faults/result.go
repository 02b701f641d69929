package faults

import (
	"regexp"
	"strconv"
	"time"

	"github.com/ringtail-ml/ringtail/integration/faults/event"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// Result is what one run produced.
type Result struct {
	Scenario Scenario
	Events   []event.Event // every rank's, in arrival order
	Exit     int           // ringtail run's exit status (-1: killed by the harness)
	Stderr   string        // ringtail run's stderr (its notices and the ranks' stderr)
	FaultAt  time.Time     // when the fault hit (zero: it never did)
	Start    time.Time
	End      time.Time
	// HarnessKilled is set when the job outlived its deadline and the
	// harness killed it: a hang.
	HarnessKilled bool
	// Err is a harness-level failure (could not start the job).
	Err error
	// Dumps are the ranks' flight-recorder dumps (RINGTAIL_FLIGHT_DIR of
	// the run: DumpDir), read once the job ended when DumpsRead.
	Dumps     []*flight.Dump
	DumpsRead bool
	DumpDir   string
}

// outcome is a rank's last word.
type outcome struct {
	ev  event.Event
	has bool
}

// outcomes returns each rank's final event (Done, Failed, Wrong or Setup).
func (r *Result) outcomes() []outcome {
	out := make([]outcome, r.Scenario.NP)
	for _, e := range r.Events {
		if e.Rank < 0 || e.Rank >= len(out) {
			continue
		}
		switch e.Ev {
		case event.Done, event.Failed, event.Wrong, event.Setup:
			out[e.Rank] = outcome{ev: e, has: true}
		}
	}
	return out
}

// terminated reports whether rank was told to stop by ringtail run.
func (r *Result) terminated(rank int) bool {
	for _, e := range r.Events {
		if e.Rank == rank && e.Ev == event.Terminated {
			return true
		}
	}
	return false
}

// Launcher is what `ringtail run` said about the failure it acted on.
type Launcher struct {
	Named  int // the rank it named (-1: none)
	Status int // the status or 128+signal it reported for that rank
}

var launcherNotice = regexp.MustCompile(`(?m)^ringtail run: rank (\d+) (?:was killed by signal (\d+)|exited with status (\d+))`)

// ParseLauncher finds ringtail run's first notice of a failed rank in its
// stderr.
func ParseLauncher(stderr string) Launcher {
	m := launcherNotice.FindStringSubmatch(stderr)
	if m == nil {
		return Launcher{Named: -1, Status: -1}
	}
	l := Launcher{}
	l.Named, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		sig, _ := strconv.Atoi(m[2])
		l.Status = 128 + sig
	} else {
		l.Status, _ = strconv.Atoi(m[3])
	}
	return l
}
