package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]zerolog.Level{
		"": zerolog.WarnLevel, "trace": zerolog.TraceLevel, "debug": zerolog.DebugLevel, " INFO ": zerolog.InfoLevel,
		"warn": zerolog.WarnLevel, "warning": zerolog.WarnLevel, "error": zerolog.ErrorLevel, "off": zerolog.Disabled,
	} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"verbose", "3", "fatal"} {
		if _, err := ParseLevel(bad); err == nil || !strings.Contains(err.Error(), EnvLevel) {
			t.Errorf("ParseLevel(%q): %v, want an error naming %s", bad, err, EnvLevel)
		}
	}
}

func lookupOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// By default (a pipe, not a terminal) the logger writes JSON at warn.
func TestFromLookupDefaultsToWarnJSON(t *testing.T) {
	var buf bytes.Buffer
	log, err := FromLookup(lookupOf(nil), &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("hidden")
	log.Warn().Str("peer", "10.0.0.1:5").Msg("refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %q, want only the warning", buf.String())
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	if ev["level"] != "warn" || ev["message"] != "refused" || ev["peer"] != "10.0.0.1:5" || ev["time"] == nil {
		t.Fatalf("event %v", ev)
	}
}

func TestFromLookupLevelAndFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := FromLookup(lookupOf(map[string]string{EnvLevel: "debug", EnvFormat: "console"}), &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("shown")
	log.Trace().Msg("hidden")
	if out := buf.String(); !strings.Contains(out, "DBG") || !strings.Contains(out, "shown") || strings.Contains(out, "hidden") || strings.HasPrefix(out, "{") {
		t.Fatalf("console output %q", out)
	}
}

// A malformed variable is an error, and the logger returned uses the
// default so the caller can report it.
func TestFromLookupRejectsBadValues(t *testing.T) {
	var buf bytes.Buffer
	log, err := FromLookup(lookupOf(map[string]string{EnvLevel: "loud", EnvFormat: "xml"}), &buf)
	if err == nil || !strings.Contains(err.Error(), EnvLevel) || !strings.Contains(err.Error(), EnvFormat) {
		t.Fatalf("error %v, want both variables named", err)
	}
	log.Warn().Msg("still works")
	if !strings.Contains(buf.String(), "still works") {
		t.Fatalf("output %q", buf.String())
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// Limited writes Burst events per period, counts the rest, and reports the
// count with the next event it writes and on Flush.
func TestLimited(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimited(zerolog.New(&buf), LimitedOptions{Level: zerolog.WarnLevel, Burst: 2, Period: time.Second, Now: clock.now})
	for i := range 10 {
		l.Event().Int("i", i).Msg("refused")
	}
	clock.t = clock.t.Add(time.Second)
	l.Event().Int("i", 10).Msg("refused")
	l.Event().Int("i", 11).Msg("refused")
	l.Event().Int("i", 12).Msg("refused")
	l.Flush("refusals suppressed")
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 5 {
		t.Fatalf("%d lines: %v", len(got), got)
	}
	want := []struct {
		i          float64
		suppressed float64
	}{{0, 0}, {1, 0}, {10, 8}, {11, 0}}
	for k, w := range want {
		if got[k]["i"] != w.i || (w.suppressed > 0) != (got[k]["suppressed"] != nil) || (w.suppressed > 0 && got[k]["suppressed"] != w.suppressed) {
			t.Errorf("line %d: %v, want i=%v suppressed=%v", k, got[k], w.i, w.suppressed)
		}
		if got[k]["level"] != "warn" {
			t.Errorf("line %d level %v", k, got[k]["level"])
		}
	}
	if got[4]["message"] != "refusals suppressed" || got[4]["suppressed"] != float64(1) {
		t.Errorf("flush line %v", got[4])
	}
	if l.Total() != 13 {
		t.Errorf("total %d, want 13", l.Total())
	}
}

// Issue 31: a launcher's stream mixed JSON (the ranks', writing to its
// pipes) with console lines. ForJob gives launcher and ranks one format:
// console unless json is asked for.
func TestForJobGivesTheRanksTheLaunchersFormat(t *testing.T) {
	var buf bytes.Buffer
	log, env, err := ForJob(lookupOf(map[string]string{}), &buf, false, false)
	if err != nil || env != "RINGTAIL_LOG_FORMAT=console" {
		t.Fatalf("env %q, %v", env, err)
	}
	log.Warn().Msg("hello")
	if strings.HasPrefix(buf.String(), "{") || !strings.Contains(buf.String(), "WRN hello") {
		t.Fatalf("not a console line: %q", buf.String())
	}
	buf.Reset()
	log, env, err = ForJob(lookupOf(map[string]string{EnvFormat: "json"}), &buf, true, true)
	if err != nil || env != "RINGTAIL_LOG_FORMAT=json" {
		t.Fatalf("env %q, %v", env, err)
	}
	log.Debug().Msg("verbose")
	if !strings.HasPrefix(buf.String(), `{"level":"debug"`) {
		t.Fatalf("not a JSON debug line: %q", buf.String())
	}
}
