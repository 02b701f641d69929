package faults

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/integration/faults/event"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// Problem classes, one column each in the summary.
const (
	ProblemHang      = "hang"         // a rank failed later than the peer timeout (+ slack) after the fault, or the job had to be killed
	ProblemWrong     = "silent-wrong" // a collective returned success with a wrong result
	ProblemBlame     = "wrong-blame"  // a surviving rank's error does not name the culprit
	ProblemLauncher  = "launcher"     // ringtail run's status or named rank is not the failing rank's
	ProblemFreeze    = "freeze-fail"  // a 0.5× freeze (or a clean run) failed the job
	ProblemHalf      = "half-failed"  // some ranks succeeded while others failed, or a rank said nothing
	ProblemPremature = "premature"    // a frozen rank was declared dead before the peer timeout
	ProblemSetup     = "setup"        // the job did not form (not a verdict on the fault)
	// ProblemUnexplained: a failed run in which a rank that could have
	// left no flight-recorder dump, or whose dumps `ringtail debug
	// analyze` does not blame the fault's target in.
	ProblemUnexplained = "unexplained"
)

// Problems lists the classes in table order.
var Problems = []string{ProblemHang, ProblemWrong, ProblemBlame, ProblemLauncher, ProblemFreeze, ProblemHalf, ProblemPremature, ProblemSetup, ProblemUnexplained}

// Problem is one failed expectation.
type Problem struct {
	Class  string
	Detail string
}

// Verdict is the outcome of checking one run.
type Verdict struct {
	Problems []Problem
	// Detect is, for each surviving rank that failed, how long after the
	// fault it reported the failure.
	Detect []time.Duration
	// Launcher is what ringtail run named.
	Launcher Launcher
}

// OK reports whether the run met every expectation.
func (v Verdict) OK() bool { return len(v.Problems) == 0 }

// Has reports whether the verdict has a problem of class c.
func (v Verdict) Has(c string) bool {
	return slices.ContainsFunc(v.Problems, func(p Problem) bool { return p.Class == c })
}

// exit statuses of the worker (see worker/main.go).
const (
	workerFailed = 1
	workerWrong  = 3
	workerSetup  = 4
	statusKilled = 128 + 9
)

// Check holds r to the expectations of its fault. slack is how much later
// than the peer timeout after the fault a rank may report a failure (the
// time for the news to travel, and a loaded machine).
func Check(r Result, slack time.Duration) Verdict {
	var v Verdict
	add := func(class, format string, a ...any) {
		v.Problems = append(v.Problems, Problem{class, fmt.Sprintf(format, a...)})
	}
	sc := r.Scenario
	v.Launcher = ParseLauncher(r.Stderr)
	if r.Err != nil {
		add(ProblemSetup, "%v", r.Err)
		return v
	}
	outs := r.outcomes()
	for rank, o := range outs {
		if o.has && o.ev.Ev == event.Setup {
			add(ProblemSetup, "rank %d could not join: %s", rank, o.ev.Err)
		}
		if o.has && o.ev.Ev == event.Wrong {
			add(ProblemWrong, "rank %d: %s", rank, o.ev.Err)
		}
	}
	if v.Has(ProblemSetup) {
		return v
	}
	if r.HarnessKilled {
		add(ProblemHang, "the job was still running after %v; killed", r.End.Sub(r.Start).Round(time.Millisecond))
	}
	if sc.Fault != FaultNone && r.FaultAt.IsZero() {
		add(ProblemSetup, "the fault was never injected (rank %d never began step %d)", sc.Target, sc.At)
		return v
	}

	switch sc.Fault {
	case FaultNone, FaultFreezeShort:
		for rank, o := range outs {
			if !o.has || o.ev.Ev != event.Done {
				add(ProblemFreeze, "rank %d: %s", rank, describe(o))
			}
		}
		if r.Exit != 0 {
			add(ProblemFreeze, "ringtail run exited %d", r.Exit)
		}
		return v

	case FaultKill, FaultFreezeLong:
		for rank, o := range outs {
			if rank == sc.Target {
				continue // killed, or frozen: whatever it says after SIGCONT is not a survivor's word
			}
			switch {
			case !o.has && r.terminated(rank):
				add(ProblemHang, "survivor %d neither failed nor finished within ringtail run's grace after it was told to stop", rank)
			case !o.has:
				add(ProblemHalf, "survivor %d reported nothing", rank)
			case o.ev.Ev == event.Done:
				add(ProblemHalf, "survivor %d completed every step although rank %d was %s", rank, sc.Target, sc.Fault)
			case o.ev.Ev == event.Failed:
				if o.ev.Blamed != sc.Target {
					add(ProblemBlame, "survivor %d blamed rank %d, not %d: %s", rank, o.ev.Blamed, sc.Target, o.ev.Err)
				}
				d := o.ev.Time().Sub(r.FaultAt)
				v.Detect = append(v.Detect, d)
				if d > sc.PeerTimeout+slack {
					add(ProblemHang, "survivor %d failed %v after the fault (peer timeout %v)", rank, d.Round(time.Millisecond), sc.PeerTimeout)
				}
				// The frozen rank's last sign of life may precede the freeze by
				// a heartbeat interval; with heartbeats at a quarter of the
				// peer timeout, a death declared before three quarters of it
				// came too early whatever the rank sent last.
				if sc.Fault == FaultFreezeLong && d < sc.PeerTimeout*3/4 {
					add(ProblemPremature, "survivor %d declared rank %d dead %v into a freeze (peer timeout %v)", rank, sc.Target, d.Round(time.Millisecond), sc.PeerTimeout)
				}
			}
		}
		if r.Exit == 0 {
			add(ProblemLauncher, "ringtail run exited 0 although rank %d was %s", sc.Target, sc.Fault)
		}
		if sc.Fault == FaultKill {
			if v.Launcher.Named != sc.Target || v.Launcher.Status != statusKilled || r.Exit != statusKilled {
				add(ProblemLauncher, "ringtail run named rank %d (status %d) and exited %d; want rank %d, %d", v.Launcher.Named, v.Launcher.Status, r.Exit, sc.Target, statusKilled)
			}
		} else {
			checkLauncherConsistent(r, outs, v.Launcher, add)
		}

	default: // skip and mismatches: every rank must fail, the others naming the target
		for rank, o := range outs {
			switch {
			case !o.has && r.terminated(rank):
				add(ProblemHang, "rank %d neither failed nor finished within ringtail run's grace after it was told to stop", rank)
			case !o.has:
				add(ProblemHalf, "rank %d reported nothing", rank)
			case o.ev.Ev == event.Done:
				add(ProblemHalf, "rank %d completed every step although rank %d %s", rank, sc.Target, doing(sc.Fault))
			case o.ev.Ev == event.Failed:
				if rank != sc.Target && o.ev.Blamed != sc.Target && !mentionsRank(o.ev.Err, sc.Target) {
					add(ProblemBlame, "rank %d blamed rank %d, not %d: %s", rank, o.ev.Blamed, sc.Target, o.ev.Err)
				}
				d := o.ev.Time().Sub(r.FaultAt)
				v.Detect = append(v.Detect, d)
				if d > sc.PeerTimeout+slack {
					add(ProblemHang, "rank %d failed %v after the fault (peer timeout %v)", rank, d.Round(time.Millisecond), sc.PeerTimeout)
				}
			}
		}
		if r.Exit == 0 {
			add(ProblemLauncher, "ringtail run exited 0 although rank %d %s", sc.Target, doing(sc.Fault))
		}
		checkLauncherConsistent(r, outs, v.Launcher, add)
	}
	checkDumps(r, add)
	return v
}

// checkDumps holds a failed run to its flight-recorder dumps (when the
// harness read them): every rank left one (but a killed target), and
// Analyze blames the fault's target.
func checkDumps(r Result, add func(string, string, ...any)) {
	if !r.DumpsRead {
		return
	}
	sc := r.Scenario
	have := map[int]bool{}
	for _, d := range r.Dumps {
		have[d.Rank] = true
	}
	for rank := range sc.NP {
		if !have[rank] && !(rank == sc.Target && sc.Fault == FaultKill) {
			add(ProblemUnexplained, "rank %d left no flight-recorder dump", rank)
		}
	}
	if len(r.Dumps) == 0 {
		return
	}
	rep := flight.Analyze(r.Dumps)
	if !slices.Contains(rep.Culprits, sc.Target) {
		add(ProblemUnexplained, "ringtail debug analyze blames ranks %v, not rank %d: %s", rep.Culprits, sc.Target, strings.Join(rep.Lines, " | "))
	}
}

// checkLauncherConsistent checks that ringtail run named a rank and exited
// with the status that rank's outcome implies.
func checkLauncherConsistent(r Result, outs []outcome, l Launcher, add func(string, string, ...any)) {
	if r.Exit == 0 || r.HarnessKilled {
		return
	}
	if l.Named < 0 || l.Named >= len(outs) {
		add(ProblemLauncher, "ringtail run exited %d without naming a failed rank", r.Exit)
		return
	}
	want := -1
	if o := outs[l.Named]; o.has {
		switch o.ev.Ev {
		case event.Failed:
			want = workerFailed
		case event.Wrong:
			want = workerWrong
		case event.Setup:
			want = workerSetup
		}
	}
	if l.Status != r.Exit || (want >= 0 && l.Status != want) {
		add(ProblemLauncher, "ringtail run named rank %d with status %d and exited %d; that rank's outcome implies %d", l.Named, l.Status, r.Exit, want)
	}
}

func describe(o outcome) string {
	if !o.has {
		return "no outcome"
	}
	if o.ev.Err != "" {
		return o.ev.Ev + ": " + o.ev.Err
	}
	return o.ev.Ev
}

func doing(f Fault) string {
	if f == FaultSkip {
		return "skipped a collective"
	}
	return "made a mismatched call (" + strings.TrimPrefix(string(f), "mismatch-") + ")"
}

var (
	errPrefix   = regexp.MustCompile(`^ringtail rank \d+: `)
	rankNumbers = regexp.MustCompile(`\branks?\s+((?:\d+(?:\s*(?:,|and)\s*)?)+)`)
	number      = regexp.MustCompile(`\d+`)
)

// mentionsRank reports whether an error text names rank r anywhere after
// the reporting rank's own "ringtail rank N: " prefix.
func mentionsRank(err string, r int) bool {
	body := errPrefix.ReplaceAllString(err, "")
	for _, m := range rankNumbers.FindAllStringSubmatch(body, -1) {
		for _, n := range number.FindAllString(m[1], -1) {
			if n == strconv.Itoa(r) {
				return true
			}
		}
	}
	return false
}
