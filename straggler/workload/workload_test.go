package workload

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/inject"
)

func mustInjector(t testing.TB, spec string, n int) *inject.Injector {
	t.Helper()
	s, err := inject.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(s, n)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestSamplesWithinIsTheLargestCountThatFits(t *testing.T) {
	in := mustInjector(t, "slow=1:3x;persistent=2:+10ms", 3)
	for _, c := range []struct {
		rank   int
		budget time.Duration
		want   int
	}{{0, 10 * time.Millisecond, 10}, {0, 10*time.Millisecond - 1, 9}, {1, 10 * time.Millisecond, 3}, {2, 9 * time.Millisecond, 0}, {2, 15 * time.Millisecond, 5}} {
		if got := SamplesWithin(in, c.rank, 0, c.budget, time.Millisecond); got != c.want {
			t.Errorf("rank %d budget %v: %d samples, want %d", c.rank, c.budget, got, c.want)
		}
	}
	// Ideal compute of one 3× slow rank of 4 is 1.2× the equal share.
	in4 := mustInjector(t, "slow=2:3x", 4)
	if got := IdealCompute(in4, 4, 0, 64, time.Millisecond); got != 19200*time.Microsecond {
		t.Errorf("Ideal compute %v, want 19.2ms", got)
	}
	// A rank with a constant extra delay per iteration (AntDT persistent
	// +16ms or +100ms) costs the Ideal nothing: it is amortized (a rank
	// can run one long iteration — an evicted child does), so the Ideal
	// stays a lower bound: 64 samples over 4 ranks at 1ms, 16ms.
	for _, spec := range []string{"persistent=1:+16ms", "persistent=1:+100ms"} {
		if got := IdealCompute(mustInjector(t, spec, 4), 4, 0, 64, time.Millisecond); got != 16*time.Millisecond {
			t.Errorf("Ideal compute with %s: %v, want 16ms", spec, got)
		}
	}
	// The exact floor charges the delay every step: +16ms on rank 1 of 4
	// (64 samples at 1ms) water-fills to (64 + 16)/4 = 20ms; +100ms exceeds
	// what the other three need (64/3 ms), so rank 1 takes no samples.
	for _, c := range []struct {
		spec string
		want time.Duration
	}{{"persistent=1:+16ms", 20 * time.Millisecond}, {"persistent=1:+100ms", 21333333}, {"slow=2:3x", 19200 * time.Microsecond}} {
		if got := ExactCompute(mustInjector(t, c.spec, 4), 4, 0, 64, time.Millisecond); got != c.want {
			t.Errorf("exact compute with %s: %v, want %v", c.spec, got, c.want)
		}
	}
}

// The network patterns are whole-bed link settings: every rank's link is
// named once, at the base rate, and only rank NetworkStraggler's differs,
// in the one option the pattern is about.
func TestNetworkPatternsShapeOneRanksLinkAndNameEveryLink(t *testing.T) {
	const n, rate, stallStep = 4, 1_000_000_000, 13
	pats := NetworkPatterns(n, rate, stallStep)
	want := map[string]inject.Link{
		"slow-link-10x": {Rate: rate / 10},
		"delay-10ms":    {Rate: rate, Delay: 10 * time.Millisecond},
		"lossy-1%":      {Rate: rate, Loss: 0.01},
		"stall-1s":      {Rate: rate, Stall: NetworkStall, StallStep: stallStep},
	}
	if len(pats) != len(want) {
		t.Fatalf("%d patterns, want %d: %+v", len(pats), len(want), pats)
	}
	s := NetworkStraggler(n)
	for _, p := range pats {
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected pattern %q", p.Name)
			continue
		}
		spec, err := inject.Parse(p.Spec)
		if err != nil {
			t.Fatalf("%s: %q: %v", p.Name, p.Spec, err)
		}
		if _, err := inject.New(spec, n); err != nil {
			t.Fatalf("%s: %q for %d ranks: %v", p.Name, p.Spec, n, err)
		}
		named := map[int]bool{}
		for _, l := range spec.Links {
			for _, r := range l.Ranks {
				if named[r] {
					t.Errorf("%s: rank %d's link named twice in %q", p.Name, r, p.Spec)
				}
				named[r] = true
				got := l
				got.Ranks = nil
				if r != s {
					if !reflect.DeepEqual(got, inject.Link{Rate: rate, StallStep: -1}) && !reflect.DeepEqual(got, inject.Link{Rate: rate}) {
						t.Errorf("%s: rank %d's link %+v, want only the base rate", p.Name, r, got)
					}
					continue
				}
				if w.Stall == 0 {
					w.StallStep = got.StallStep // no stall: the step is not read
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s: rank %d's link %+v, want %+v", p.Name, r, got, w)
				}
			}
		}
		if len(named) != n {
			t.Errorf("%s: %q names %d of %d links", p.Name, p.Spec, len(named), n)
		}
	}
	if got := NetworkPatterns(1, rate, stallStep); got != nil {
		t.Errorf("one rank: %+v, want no patterns (no links)", got)
	}
	for _, p := range NetworkPatterns(n, 0, stallStep) {
		if p.Name == "slow-link-10x" {
			t.Errorf("unshaped links: %q has no base rate to divide", p.Spec)
		}
	}
	if got, want := BaseLinks(n, rate), "link=0,1,2,3:rate=1gbit"; got != want {
		t.Errorf("BaseLinks = %q, want %q", got, want)
	}
	if got := BaseLinks(n, 0); got != "" {
		t.Errorf("BaseLinks unshaped = %q, want \"\"", got)
	}
}

// Patterns are selected by name in the order named; no names select all;
// an unknown name is an error that lists the names there are.
func TestPatternsAreSelectedByName(t *testing.T) {
	all := DefaultPatterns(4, 64, time.Millisecond, 1)
	got, err := Select(all, []string{"slow-3x", "none"})
	if err != nil || len(got) != 2 || got[0].Name != "slow-3x" || got[1].Name != "none" {
		t.Fatalf("Select(slow-3x, none) = %v, %v", got, err)
	}
	if got, err := Select(all, nil); err != nil || len(got) != len(all) {
		t.Fatalf("Select(nil) = %d patterns, %v; want all %d", len(got), err, len(all))
	}
	if _, err := Select(all, []string{"none", "slow-9x"}); err == nil || !strings.Contains(err.Error(), `"slow-9x"`) || !strings.Contains(err.Error(), "powerlaw-4") {
		t.Fatalf("Select(slow-9x) = %v, want an error naming it and the patterns there are", err)
	}
}
