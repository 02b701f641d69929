package inject

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseAcceptsEveryDocumentedClause(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Spec
	}{
		{"empty spec injects nothing", "", Spec{}},
		{"blanks and empty clauses are ignored", " ; ;", Spec{}},
		{"deterministic slow rank", "slow=2:3x", Spec{Slow: []Scale{{Ranks: []int{2}, Factor: 3}}}},
		{"slow ranks listed unsorted", "slow=5,1:1.5x", Spec{Slow: []Scale{{Ranks: []int{1, 5}, Factor: 1.5}}}},
		{"persistent extra delay", "persistent=1,2:+400ms", Spec{Persistent: []Persistent{{Ranks: []int{1, 2}, Extra: 400 * time.Millisecond}}}},
		{"persistent factor", "persistent=3:2x", Spec{Persistent: []Persistent{{Ranks: []int{3}, Factor: 2}}}},
		{"flexrr slow worker", "flexrr-slow=0.01:100%", Spec{SlowWorker: &SlowWorker{Prob: 0.01, DelayPercent: 100}}},
		{"power law", "powerlaw=4", Spec{PowerLaw: &PowerLaw{Alpha: 4}}},
		{"transient with defaults", "transient=0.8", Spec{Transient: &Transient{Intensity: 0.8, SleepFactor: 1, Period: 30, On: 15, Fraction: 0.3}}},
		{"transient as in AntDT", "transient=0.8:sleep=1500ms:period=30:on=15:frac=0.3",
			Spec{Transient: &Transient{Intensity: 0.8, Sleep: 1500 * time.Millisecond, Period: 30, On: 15, Fraction: 0.3}}},
		{"kill and freeze sorted by step", "freeze=1@20:2s;kill=3@10;freeze=0@20",
			Spec{Faults: []Fault{{Kind: FaultKill, Rank: 3, Step: 10}, {Kind: FaultFreeze, Rank: 0, Step: 20}, {Kind: FaultFreeze, Rank: 1, Step: 20, Freeze: 2 * time.Second}}}},
		{"several patterns with a seed", "seed=42; slow=0:2x ;powerlaw=7",
			Spec{Seed: 42, Slow: []Scale{{Ranks: []int{0}, Factor: 2}}, PowerLaw: &PowerLaw{Alpha: 7}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.in, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
			}
			again, err := Parse(got.String())
			if err != nil {
				t.Fatalf("canonical form %q does not parse: %v", got.String(), err)
			}
			if !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip through %q gave %+v, want %+v", got.String(), again, got)
			}
		})
	}
}

func TestParseRejectsBadSpecsWithTheClauseNamed(t *testing.T) {
	cases := []struct{ in, wantInMsg string }{
		{"slow=2", "want slow=R:Fx"},
		{"slow=2:0.5x", "factor must be a finite number ≥ 1"},
		{"slow=2:3", "must end in x"},
		{"slow=-1:2x", "want slow=R:Fx"},
		{"slow=1,1:2x", "listed twice"},
		{"persistent=1:+0ms", "exactly one of"},
		{"persistent=1:+abc", "want persistent="},
		{"flexrr-slow=0:100%", "probability must be in (0, 1]"},
		{"flexrr-slow=1.5:100%", "probability must be in (0, 1]"},
		{"flexrr-slow=0.1:100", "must end in %"},
		{"flexrr-slow=0.1:-5%", "delay must be"},
		{"powerlaw=2", "alpha must be a finite number > 2"},
		{"powerlaw=x", "want powerlaw=ALPHA"},
		{"transient=0", "intensity must be in (0, 1]"},
		{"transient=0.5:on=40", "1 ≤ on ≤ period"},
		{"transient=0.5:frac=2", "frac must be in [0, 1]"},
		{"transient=0.5:bogus=1", "unknown option"},
		{"kill=3", "missing '@'"},
		{"kill=3@5:1s", "kill takes no duration"},
		{"freeze=3@5:forever", "want kill=R@STEP or freeze"},
		{"kill=3@5;freeze=3@5", "two faults for the same rank and step"},
		{"seed=1;seed=2", "seed given twice"},
		{"seed=-1", "seed must be a non-negative integer"},
		{"powerlaw=4;powerlaw=5", "powerlaw given twice"},
		{"slowness=2:3x", "unknown key \"slowness\""},
		{"slow", "want key=value"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", c.in)
			continue
		}
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) error %T is not a *SpecError", c.in, err)
		}
		if !strings.Contains(err.Error(), c.wantInMsg) {
			t.Errorf("Parse(%q) = %q, want it to mention %q", c.in, err, c.wantInMsg)
		}
	}
}

func TestValidateRejectsRanksOutsideTheWorld(t *testing.T) {
	for _, in := range []string{"slow=4:2x", "persistent=1,4:+1ms", "kill=4@1", "freeze=9@1:1s"} {
		spec, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if err := spec.Validate(4); !errors.Is(err, ErrRankOutOfRange) {
			t.Errorf("Validate(4) of %q = %v, want ErrRankOutOfRange", in, err)
		}
		if _, err := New(spec, 4); !errors.Is(err, ErrRankOutOfRange) {
			t.Errorf("New(%q, 4) = %v, want ErrRankOutOfRange", in, err)
		}
		if _, err := New(spec, 16); err != nil {
			t.Errorf("New(%q, 16): %v", in, err)
		}
	}
}

func TestLookupPrefersTheFlagOverTheEnvironment(t *testing.T) {
	env := func(k string) string {
		if k == EnvVar {
			return "slow=1:2x"
		}
		return ""
	}
	fromEnv, err := Lookup("", env)
	if err != nil || len(fromEnv.Slow) != 1 || fromEnv.Slow[0].Ranks[0] != 1 {
		t.Fatalf("Lookup from env = %+v, %v; want slow=1:2x", fromEnv, err)
	}
	fromFlag, err := Lookup("kill=0@3", env)
	if err != nil || len(fromFlag.Slow) != 0 || len(fromFlag.Faults) != 1 {
		t.Fatalf("Lookup with a flag = %+v, %v; want only kill=0@3", fromFlag, err)
	}
	if _, err := Lookup("", func(string) string { return "bogus=1" }); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("Lookup of a bad env spec = %v, want an error naming it", err)
	}
}
