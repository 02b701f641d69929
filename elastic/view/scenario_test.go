package view

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The scenarios in testdata/*.txt drive one node's Decider. Each line is a
// command; a line starting with "=>" is the expected output of the command
// before it:
//
//	config self=a min=2 max=4 initial=3   (start a Decider at t=0)
//	alive a b c | dead b | evidence 1 c | failed 1 | formed 1
//	receive 2 b b,c,d                     (a proposal: gen, proposer, members)
//	tick 150ms                            (advance the clock)
//	ready                                 => propose 2 [a c d] | => none | => fail ErrBelowMinNP
//	adopt                                 (the driver adopts its last proposal)
//	view                                  => 2 [a c d] by a
//	proposer                              => a
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenario(t, f) })
	}
}

func runScenario(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		d    *Decider
		now  = time.Unix(1000, 0)
		last *Proposal
		out  string
		self string
	)
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		at := fmt.Sprintf("%s:%d", path, i+1)
		if want, ok := strings.CutPrefix(line, "=>"); ok {
			if got, want := out, strings.TrimSpace(want); got != want {
				t.Fatalf("%s: got %q, want %q", at, got, want)
			}
			continue
		}
		f := strings.Fields(line)
		if f[0] != "config" && d == nil {
			t.Fatalf("%s: config first", at)
		}
		out = ""
		switch f[0] {
		case "config":
			cfg := Config{MinNP: 1, StartTimeout: 10 * time.Second, MinWait: 5 * time.Second, EvidenceTTL: 3 * time.Second,
				JoinSettle: 200 * time.Millisecond, FormTimeout: 10 * time.Second, RetryBackoff: time.Second}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.Atoi(v)
				switch k {
				case "self":
					cfg.Self = v
				case "min":
					cfg.MinNP = n
				case "max":
					cfg.MaxNP = n
				case "initial":
					cfg.InitialNP = n
				case "minwait":
					cfg.MinWait, _ = time.ParseDuration(v)
				default:
					t.Fatalf("%s: unknown config %s", at, k)
				}
			}
			self = cfg.Self
			if d, err = New(cfg, now); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		case "alive":
			for _, n := range f[1:] {
				d.Alive(n, now)
			}
		case "dead":
			for _, n := range f[1:] {
				d.Dead(n, now)
			}
		case "evidence":
			d.Evidence(atoi(t, f[1]), f[2], now)
		case "failed":
			d.Failed(atoi(t, f[1]), now)
		case "formed":
			d.Formed(atoi(t, f[1]), now)
		case "receive":
			v := View{Gen: atoi(t, f[1]), Proposer: f[2], Members: strings.Split(f[3], ","), Coord: f[2] + ":1"}
			if err := v.Validate(); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			out = strconv.FormatBool(d.Receive(v, now))
		case "tick":
			dur, err := time.ParseDuration(f[1])
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			now = now.Add(dur)
			d.Tick(now)
		case "ready":
			r := d.Ready()
			switch {
			case r.Fail != nil:
				out = "fail " + errName(r.Fail)
			case r.Propose != nil:
				last = r.Propose
				out = fmt.Sprintf("propose %d [%s]", r.Propose.Gen, strings.Join(r.Propose.Members, " "))
			default:
				out = "none"
			}
		case "adopt":
			if last == nil {
				t.Fatalf("%s: nothing proposed", at)
			}
			out = strconv.FormatBool(d.Receive(View{Gen: last.Gen, Members: last.Members, Proposer: self, Coord: self + ":1"}, now))
		case "view":
			v := d.View()
			out = fmt.Sprintf("%d [%s] by %s", v.Gen, strings.Join(v.Members, " "), v.Proposer)
		case "proposer":
			out = d.Proposer()
		default:
			t.Fatalf("%s: unknown command %q", at, f[0])
		}
	}
}

func atoi(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func errName(err error) string {
	for _, e := range []struct {
		name string
		err  error
	}{{"ErrBelowMinNP", ErrBelowMinNP}, {"ErrStartTimeout", ErrStartTimeout}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return err.Error()
}

// Proposer (for the scenarios' proposer command) returns the node this node expects to propose the next view:
// the first live member of the adopted view, or at start-up (or once every
// member is gone) the live node with the smallest name ("" when there is
// none).
func (d *Decider) Proposer() string {
	if d.view.Gen == 0 {
		if l := d.Live(); len(l) > 0 {
			return l[0]
		}
		return ""
	}
	for _, m := range d.view.Members {
		if d.live(m) {
			return m
		}
	}
	if l := d.Live(); len(l) > 0 {
		return l[0] // every member is gone
	}
	return ""
}
