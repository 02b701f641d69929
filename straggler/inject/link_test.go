package inject

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLinkClauses(t *testing.T) {
	s, err := Parse("link=3:rate=50mbit; link=1,2:delay=20ms:jitter=5ms:loss=1%; link=0:stall=500ms@step10; link=4:stall=1s@2s:rate=1.5g")
	if err != nil {
		t.Fatal(err)
	}
	want := []Link{
		{Ranks: []int{3}, Rate: 50e6, StallStep: -1},
		{Ranks: []int{1, 2}, Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.01, StallStep: -1},
		{Ranks: []int{0}, Stall: 500 * time.Millisecond, StallStep: 10},
		{Ranks: []int{4}, Rate: 1.5e9, Stall: time.Second, StallStep: -1, StallAt: 2 * time.Second},
	}
	if !reflect.DeepEqual(s.Links, want) {
		t.Fatalf("Links = %+v\nwant %+v", s.Links, want)
	}
	back, err := Parse(s.String())
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip %q: %+v, %v", s.String(), back, err)
	}
	if l, ok := s.LinkOf(2); !ok || l.Delay != 20*time.Millisecond {
		t.Fatalf("LinkOf(2) = %+v, %v", l, ok)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{"50mbit": 50e6, "1gbit": 1e9, "1g": 1e9, "800000": 800000, "500kbit": 500e3, "2.5M": 2.5e6, "100bit": 100} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1mbit", "1tbit"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}

func TestParseLinkErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"link=3":                            "no option",
		"link=3:speed=1g":                   `unknown option "speed"`,
		"link=3:rate=1k":                    "at least 8kbit",
		"link=3:delay=5ms:jitter=10ms":      "jitter must not exceed the delay",
		"link=3:delay=1500us":               "whole milliseconds",
		"link=3:loss=100%":                  "loss must be in",
		"link=3:stall=1s":                   "want D@stepN or D@T",
		"link=3:stall=1s@stepx":             "option stall",
		"link=3:rate=1g:rate=2g":            "given twice",
		"link=1,2:rate=1g;link=2:delay=1ms": "rank 2 is in two link clauses",
	} {
		_, err := Parse(spec)
		var se *SpecError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want a SpecError mentioning %q", spec, err, want)
		}
	}
	s, _ := Parse("link=5:rate=1g")
	if err := s.Validate(4); !errors.Is(err, ErrRankOutOfRange) {
		t.Errorf("Validate(4) of a link on rank 5 = %v", err)
	}
}

func TestInjectorReportsStepStallsOnly(t *testing.T) {
	s, err := Parse("link=2:stall=500ms@step10:rate=50mbit;link=1:stall=1s@3s")
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 4 {
		for step := range 20 {
			e := in.At(rank, step, 100*time.Millisecond)
			want := time.Duration(0)
			if rank == 2 && step == 10 {
				want = 500 * time.Millisecond
			}
			if e.LinkStall != want || e.Compute != 100*time.Millisecond {
				t.Fatalf("At(%d, %d) = %+v, want LinkStall %v and the base compute", rank, step, e, want)
			}
		}
	}
}
