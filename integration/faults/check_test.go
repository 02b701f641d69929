package faults

import (
	"errors"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/integration/faults/event"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The checks are pure: these cases hold them to the expectations of
// docs/reliability.md without starting a job.

var t0 = time.Unix(1_000_000, 0)

func ev(kind string, rank int, after time.Duration, blamed int, err string) event.Event {
	return event.Event{Ev: kind, Rank: rank, Blamed: blamed, Err: err, UnixNano: t0.Add(after).UnixNano()}
}

func scenario(f Fault, np, target int) Scenario {
	return Scenario{Fault: f, Transport: TransportShm, NP: np, Target: target, At: 10, Steps: 50, PeerTimeout: 2 * time.Second}
}

func classes(v Verdict) []string {
	var out []string
	for _, p := range v.Problems {
		out = append(out, p.Class)
	}
	return out
}

func TestCheckKill(t *testing.T) {
	good := Result{
		Scenario: scenario(FaultKill, 3, 1), FaultAt: t0, Exit: 137,
		Events: []event.Event{ev(event.Failed, 0, 5*time.Millisecond, 1, "peer died"), ev(event.Failed, 2, 7*time.Millisecond, 1, "peer died")},
		Stderr: "ringtail run: rank 1 was killed by signal 9 (killed); stopping 2 others\n",
	}
	if v := Check(good, time.Second); !v.OK() || len(v.Detect) != 2 {
		t.Fatalf("a correct kill run: %+v", v)
	}

	blamesSurvivor := good
	blamesSurvivor.Events = []event.Event{ev(event.Failed, 0, 5*time.Millisecond, 2, "peer died"), ev(event.Failed, 2, 7*time.Millisecond, 1, "x")}
	blamesSurvivor.Stderr = "ringtail run: rank 0 exited with status 1; stopping 2 others\n"
	blamesSurvivor.Exit = 1
	v := Check(blamesSurvivor, time.Second)
	if !v.Has(ProblemBlame) || !v.Has(ProblemLauncher) || v.Has(ProblemHang) {
		t.Fatalf("a survivor blamed and named: %v", classes(v))
	}

	late := good
	late.Events = []event.Event{ev(event.Failed, 0, 5*time.Millisecond, 1, ""), ev(event.Failed, 2, 3500*time.Millisecond, 1, "")}
	if v := Check(late, time.Second); !v.Has(ProblemHang) || len(v.Problems) != 1 {
		t.Fatalf("a survivor failing 3.5 s after the kill with a 2 s peer timeout: %v", classes(v))
	}

	stuck := good
	stuck.Events = []event.Event{ev(event.Failed, 0, 5*time.Millisecond, 1, ""), ev(event.Terminated, 2, 10*time.Millisecond, 0, "")}
	if v := Check(stuck, time.Second); !v.Has(ProblemHang) {
		t.Fatalf("a survivor that never failed: %v", classes(v))
	}
}

func TestCheckFreeze(t *testing.T) {
	short := Result{Scenario: scenario(FaultFreezeShort, 2, 0), FaultAt: t0, Exit: 0,
		Events: []event.Event{ev(event.Done, 0, time.Second, 0, ""), ev(event.Done, 1, time.Second, 0, "")}}
	if v := Check(short, time.Second); !v.OK() {
		t.Fatalf("a job surviving a short freeze: %v", classes(v))
	}
	short.Events[1] = ev(event.Failed, 1, 800*time.Millisecond, 0, "silent")
	short.Exit = 1
	if v := Check(short, time.Second); !v.Has(ProblemFreeze) {
		t.Fatalf("a short freeze that failed the job: %v", classes(v))
	}

	long := Result{Scenario: scenario(FaultFreezeLong, 2, 0), FaultAt: t0, Exit: 1,
		Events: []event.Event{ev(event.Failed, 1, 2100*time.Millisecond, 0, "silent")},
		Stderr: "ringtail run: rank 1 exited with status 1; stopping 1 others\n"}
	if v := Check(long, time.Second); !v.OK() {
		t.Fatalf("a correct long freeze: %v", v.Problems)
	}
	long.Events[0] = ev(event.Failed, 1, 1200*time.Millisecond, 0, "silent")
	if v := Check(long, time.Second); !v.Has(ProblemPremature) {
		t.Fatalf("death declared 1.2 s into a freeze with a 2 s peer timeout: %v", classes(v))
	}
}

func TestCheckMismatch(t *testing.T) {
	r := Result{Scenario: scenario(FaultRoot, 3, 2), FaultAt: t0, Exit: 1,
		Events: []event.Event{
			ev(event.Failed, 0, time.Millisecond, -1, "ringtail rank 0: mismatch: ranks 0, 1 call Broadcast(root 0) but rank 2 calls Broadcast(root 1)"),
			ev(event.Failed, 1, time.Millisecond, 2, "mismatch"),
			ev(event.Failed, 2, time.Millisecond, 2, "mismatch"),
		},
		Stderr: "ringtail run: rank 2 exited with status 1; stopping 2 others\n"}
	if v := Check(r, time.Second); !v.OK() {
		t.Fatalf("a correctly reported mismatch: %v", v.Problems)
	}

	half := r
	half.Events = []event.Event{ev(event.Failed, 0, time.Millisecond, 2, ""), ev(event.Done, 1, time.Millisecond, 0, ""), ev(event.Failed, 2, time.Millisecond, 2, "")}
	if v := Check(half, time.Second); !v.Has(ProblemHalf) {
		t.Fatalf("a rank succeeding where others failed: %v", classes(v))
	}

	silent := Result{Scenario: scenario(FaultSkip, 2, 1), FaultAt: t0, Exit: 3,
		Events: []event.Event{ev(event.Wrong, 0, time.Millisecond, 0, "element 0 is 3, want 4"), ev(event.Wrong, 1, time.Millisecond, 0, "x")},
		Stderr: "ringtail run: rank 0 exited with status 3; stopping 1 others\n"}
	if v := Check(silent, time.Second); !v.Has(ProblemWrong) || v.Has(ProblemLauncher) {
		t.Fatalf("silent wrong results: %v", classes(v))
	}

	inconsistent := r
	inconsistent.Exit = 137
	if v := Check(inconsistent, time.Second); !v.Has(ProblemLauncher) {
		t.Fatalf("an exit status that is not the named rank's: %v", classes(v))
	}

	hung := r
	hung.HarnessKilled, hung.Exit = true, -1
	if v := Check(hung, time.Second); !v.Has(ProblemHang) {
		t.Fatalf("a job the harness had to kill: %v", classes(v))
	}
}

func TestCheckSetupIsNotAVerdict(t *testing.T) {
	r := Result{Scenario: scenario(FaultKill, 2, 0), Exit: 4, Events: []event.Event{ev(event.Setup, 1, 0, 0, "rendezvous: refused")}}
	if v := Check(r, time.Second); len(v.Problems) != 1 || !v.Has(ProblemSetup) {
		t.Fatalf("%v", v.Problems)
	}
}

func TestMentionsRank(t *testing.T) {
	for _, c := range []struct {
		err  string
		rank int
		want bool
	}{
		{"ringtail rank 2: mismatch: rank 3 calls AllReduce(count 5)", 3, true},
		{"ringtail rank 3: mismatch: rank 1 disagrees", 3, false},
		{"ringtail rank 0: mismatch: ranks 1, 4 and 6 call Broadcast(root 0)", 4, true},
		{"ringtail rank 0: mismatch: ranks 1, 4 and 6 call Broadcast(root 0)", 0, false},
	} {
		if got := mentionsRank(c.err, c.rank); got != c.want {
			t.Errorf("mentionsRank(%q, %d) = %v", c.err, c.rank, got)
		}
	}
}

func TestParseLauncher(t *testing.T) {
	if l := ParseLauncher("[1] x\nringtail run: rank 3 was killed by signal 9 (killed); stopping 1 others\n"); l.Named != 3 || l.Status != 137 {
		t.Fatal(l)
	}
	if l := ParseLauncher("ringtail run: rank 0 exited with status 3; stopping 1 others\n"); l.Named != 0 || l.Status != 3 {
		t.Fatal(l)
	}
	if l := ParseLauncher("nothing"); l.Named != -1 {
		t.Fatal(l)
	}
}

func TestMatrixCoversEveryFaultOnBothTransports(t *testing.T) {
	scs := Matrix(MatrixConfig{Runs: 2 * len(Faults), Seed: 7})
	seen := map[string]bool{}
	for _, s := range scs {
		seen[string(s.Fault)+"/"+string(s.Transport)] = true
		if s.Target < 0 || s.Target >= s.NP || s.At >= s.Steps || s.NP < 2 || s.NP > 8 {
			t.Fatalf("bad scenario %+v", s)
		}
	}
	if len(seen) != 2*len(Faults) {
		t.Fatalf("covered %d fault/transport pairs: %v", len(seen), seen)
	}
	again := Matrix(MatrixConfig{Runs: 2 * len(Faults), Seed: 7})
	for i := range scs {
		if scs[i] != again[i] {
			t.Fatal("the matrix is not a function of its seed")
		}
	}
}

func TestParseLine(t *testing.T) {
	e, ok, err := event.ParseLine(`[3] {"ev":"failed","rank":3,"blamed":1,"t":5}`)
	if err != nil || !ok || e.Rank != 3 || e.Blamed != 1 || e.Ev != event.Failed {
		t.Fatal(e, ok, err)
	}
	if _, ok, _ := event.ParseLine("[3] plain text"); ok {
		t.Fatal("text parsed as an event")
	}
	if _, _, err := event.ParseLine(`[3] {"ev":"done","rank":2,"t":5}`); err == nil {
		t.Fatal("a rank reporting for another was accepted")
	}
}

// dumpsOf makes the flight-recorder dumps of ranks, each failed with f.
func dumpsOf(t *testing.T, np int, ranks []int, f *flight.Failure) []*flight.Dump {
	var out []*flight.Dump
	for _, r := range ranks {
		fl, err := flight.New(flight.Config{Rank: r, World: np, JobID: "j"})
		if err != nil {
			t.Fatal(err)
		}
		fl.Begin(&wire.Desc{Collective: wire.AllReduce, Group: wire.World, Call: 1, Count: 8}, "ring", "")
		fl.End(errors.New(f.Kind))
		out = append(out, fl.Snapshot("failure", f, time.Second, 0))
	}
	return out
}

// A failed run must leave a dump on every rank that could write one, and
// the dumps must blame the fault's target.
func TestCheckHoldsAFailedRunToItsDumps(t *testing.T) {
	good := Result{
		Scenario: scenario(FaultKill, 3, 1), FaultAt: t0, Exit: 137, DumpsRead: true,
		Events: []event.Event{ev(event.Failed, 0, 5*time.Millisecond, 1, "peer died"), ev(event.Failed, 2, 7*time.Millisecond, 1, "peer died")},
		Stderr: "ringtail run: rank 1 was killed by signal 9 (killed); stopping 2 others\n",
		Dumps:  dumpsOf(t, 3, []int{0, 2}, &flight.Failure{Kind: "peer died", Rank: 1, Reporter: 0}),
	}
	if v := Check(good, time.Second); !v.OK() {
		t.Fatalf("dumps of the survivors that blame the killed rank: %v", v.Problems)
	}
	missing := good
	missing.Dumps = good.Dumps[:1]
	if v := Check(missing, time.Second); !v.Has(ProblemUnexplained) {
		t.Fatalf("a survivor without a dump: %v", classes(v))
	}
	wrong := good
	wrong.Dumps = dumpsOf(t, 3, []int{0, 2}, &flight.Failure{Kind: "peer died", Rank: 2, Reporter: 0})
	if v := Check(wrong, time.Second); !v.Has(ProblemUnexplained) {
		t.Fatalf("dumps blaming a survivor: %v", classes(v))
	}
}
