//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunObservabilityFlags(t *testing.T) {
	dir := t.TempDir()
	timeline := filepath.Join(dir, "trace.json")
	// The ranks get the variables; --timeline merges what they wrote
	// (here: hand-written rank files) at exit.
	script := `echo "$RINGTAIL_METRICS_ADDR|$RINGTAIL_TIMELINE"; f="${RINGTAIL_TIMELINE%.json}.rank$RANK.json"; ` +
		`printf '[{"name":"process_name","ph":"M","pid":%s,"tid":0,"args":{"name":"r","clock_base_unix_ns":1000}},{"name":"AllReduce","cat":"collective","ph":"X","ts":5,"dur":3,"pid":%s,"tid":1,"args":{"group":0,"call":1}}]' "$RANK" "$RANK" > "$f"`
	code, stdout, stderr := launchCLI(t, context.Background(), "-np", "2", "--metrics-port", "29400", "--timeline", timeline, "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"[0] 127.0.0.1:29400|" + timeline + "\n", "[1] 127.0.0.1:29401|" + timeline + "\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if !strings.Contains(stderr, "metrics at http://127.0.0.1:29400/metrics") || !strings.Contains(stderr, "timeline of 2 ranks in "+timeline) {
		t.Errorf("stderr does not say where to look:\n%s", stderr)
	}
	data, err := os.ReadFile(timeline)
	if err != nil {
		t.Fatal(err)
	}
	var merged struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &merged); err != nil || len(merged.TraceEvents) != 4 {
		t.Fatalf("merged trace: %v, %d events", err, len(merged.TraceEvents))
	}
}

func TestRunObservabilityRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "1", "--dashboard", "nope", "--", "true"}, "--dashboard"},
		{[]string{"-np", "1", "--timeline", "/no/such/dir/t.json", "--", "true"}, "--timeline"},
		{[]string{"-np", "1", "--metrics-port", "70000", "--", "true"}, "--metrics-port"},
	} {
		code, _, stderr := launchCLI(t, context.Background(), tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, stderr)
		}
	}
}

func TestDashboardAndTimelineCommandsCheckTheirArguments(t *testing.T) {
	var out, errb strings.Builder
	for _, args := range [][]string{
		{"dashboard", "--ranks", "nohost"},
		{"dashboard", "--listen", "bad", "--ranks", "127.0.0.1:1"},
		{"dashboard", "--timeline", "/no/such/file.json"},
		{"timeline"},
		{"timeline", "merge"},
		{"timeline", "merge", "-o", filepath.Join(t.TempDir(), "out.json")},
	} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d", args, code)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("not a trace"), 0o644)
	if code := run([]string{"timeline", "merge", "-o", filepath.Join(t.TempDir(), "out.json"), bad}, &out, &errb); code != 1 {
		t.Errorf("merging a bad file: exit %d", code)
	}
	if code := run([]string{"dashboard", "--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Usage: ringtail dashboard") {
		t.Errorf("dashboard --help: exit %d", code)
	}
}
