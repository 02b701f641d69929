package obs

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// torchEvent is one event of a synthetic torch 1.13 (legacy profiler)
// trace: ts on the profiler's clock, which starts at the profiler.
type torchEvent struct {
	name    string
	ts, dur float64
}

func writeTorchTrace(t *testing.T, dir, name string, evs []torchEvent) string {
	t.Helper()
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf(`{"name":%q,"ph":"X","ts":%.3f,"dur":%.3f,"tid":1,"pid":"CPU functions","args":{}}`, e.name, e.ts, e.dur))
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("["+strings.Join(parts, ",\n")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mergeValid merges the rank files with the torch traces, checks the
// result against the trace-event format and returns the report and the
// merged events.
func mergeValid(t *testing.T, files []string, torch ...TorchTrace) (MergeReport, []map[string]any) {
	t.Helper()
	var out strings.Builder
	rep, err := Merge(&out, files, torch...)
	if err != nil {
		t.Fatal(err)
	}
	var merged struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal([]byte(out.String()), &merged); err != nil {
		t.Fatal(err)
	}
	if err := ValidateTrace(merged.TraceEvents); err != nil {
		t.Fatal(err)
	}
	return rep, merged.TraceEvents
}

// mergedTorch is mergeValid returning the merged events that came from a
// torch trace.
func mergedTorch(t *testing.T, files []string, torch ...TorchTrace) (MergeReport, []map[string]any) {
	t.Helper()
	rep, events := mergeValid(t, files, torch...)
	var fromTorch []map[string]any
	for _, ev := range events {
		if tid, _ := num(ev["tid"]); tid >= 1000 {
			fromTorch = append(fromTorch, ev)
		}
	}
	return rep, fromTorch
}

// startOf returns the merged start of the torch event named name.
func startOf(t *testing.T, evs []map[string]any, name string) float64 {
	t.Helper()
	for _, ev := range evs {
		if ev["name"] == name {
			ts, _ := num(ev["ts"])
			return ts
		}
	}
	t.Fatalf("no torch event %q in the merge", name)
	return 0
}

// The backend's clock event ties the torch trace's clock to the rank's
// timeline exactly: each all_reduce lands 20 µs before its call.
func TestMergeLaysATorchTraceOnItsRankByTheClockEvent(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	// Two ranks, rank 1's timeline base taken 4 ms later than rank 0's;
	// every call starts at end−50 µs after base on both.
	ends := []float64{1000, 2300, 2900, 4700}
	p0 := writeRank(t, dir, 0, base, 0, ends)
	p1 := writeRank(t, dir, 1, base, 4*time.Millisecond, ends)
	// Rank 1's profiler started 1.5 ms after base: its clock event, at
	// profiler ts 100, reads base+1.6 ms on the wall clock.
	const profStart = 1500.0
	clock := fmt.Sprintf("%s%d", TorchClockEvent, base.Add(1600*time.Microsecond).UnixNano())
	evs := []torchEvent{{clock, 100, 0}, {"aten::mm", 150, 30}}
	for i, end := range ends[1:] {
		// The backend opens the event 20 µs before the call starts and
		// ends it when the work completes, 10 µs after the call ends.
		evs = append(evs, torchEvent{"ringtail:all_reduce", end - 50 - 20 - profStart, 50 + 30})
		evs = append(evs, torchEvent{fmt.Sprintf("step %d", i), end - 50 - 20 - profStart - 5, 90})
	}
	tr := writeTorchTrace(t, dir, "torch1.json", evs)
	rep, got := mergedTorch(t, []string{p0, p1}, TorchTrace{Rank: 1, Path: tr})
	al := rep.Torch["1"]
	if al.Method != "clock" || al.Anchors != 3 || al.Matched != 3 {
		t.Fatalf("alignment %+v, want the clock method with 3 of 3 anchors matched", al)
	}
	if len(got) != len(evs)+1 { // and the thread's name
		t.Fatalf("%d torch events in the merge, want %d", len(got), len(evs)+1)
	}
	// The first all_reduce (the call ending at 2300 µs, starting at 2250)
	// opens at 2230 µs on the merged clock.
	if s := startOf(t, got, "ringtail:all_reduce"); math.Abs(s-2230) > 0.01 {
		t.Errorf("the first all_reduce starts at %.3f µs on the merged clock, want 2230", s)
	}
	for _, ev := range got {
		if pid, _ := num(ev["pid"]); pid != 1 {
			t.Errorf("torch event %v not in rank 1's process", ev)
		}
	}
}

// Without the clock event (a Gloo trace, or a profiler that began after
// the backend's first call of it), the communication events place the
// trace: the translation that meets the most calls of their names.
func TestMergeAlignsATorchTraceWithoutAClockOnItsCalls(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	ends := []float64{1000, 2300, 2900, 4700, 5200, 7100, 7400}
	p0 := writeRank(t, dir, 0, base, 0, ends)
	const profStart = 12345.5
	jitter := []float64{1, -2, 3, 0, -1}
	var evs []torchEvent
	for i, end := range ends[1:6] {
		evs = append(evs, torchEvent{"gloo:all_reduce", end - 50 - 20 + jitter[i] - profStart + 20000, 80})
		evs = append(evs, torchEvent{"aten::add", end - 50 - 200 - profStart + 20000, 10})
	}
	tr := writeTorchTrace(t, dir, "torch0.json", evs)
	rep, got := mergedTorch(t, []string{p0}, TorchTrace{Rank: 0, Path: tr})
	al := rep.Torch["0"]
	if al.Method != "calls" || al.Anchors != 5 || al.Matched != 5 {
		t.Fatalf("alignment %+v, want the calls method with 5 of 5 anchors matched", al)
	}
	// The median lead of 20 µs (jitter ±3) is taken out: each event lands
	// on its call.
	if s := startOf(t, got, "gloo:all_reduce"); math.Abs(s-2250) > 3 {
		t.Errorf("the first all_reduce starts at %.3f µs, want its call's 2250 ± 3", s)
	}
}

func TestMergeRefusesTorchTracesItCannotPlace(t *testing.T) {
	dir := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	p0 := writeRank(t, dir, 0, base, 0, []float64{1000, 2000})
	good := writeTorchTrace(t, dir, "good.json", []torchEvent{{"ringtail:all_reduce", 10, 60}})
	none := writeTorchTrace(t, dir, "none.json", []torchEvent{{"aten::mm", 10, 60}})
	other := writeTorchTrace(t, dir, "other.json", []torchEvent{{"ringtail:broadcast", 10, 60}})
	for name, torch := range map[string][]TorchTrace{
		"a rank without a timeline":       {{Rank: 3, Path: good}},
		"two traces of one rank":          {{Rank: 0, Path: good}, {Rank: 0, Path: good}},
		"no communication event":          {{Rank: 0, Path: none}},
		"no call of its names":            {{Rank: 0, Path: other}},
		"a trace that is not there":       {{Rank: 0, Path: filepath.Join(dir, "nope.json")}},
		"a trace that is not JSON at all": {{Rank: 0, Path: p0 + ".missing"}},
	} {
		if _, err := Merge(io.Discard, []string{p0}, torch...); err == nil {
			t.Errorf("%s: merged", name)
		}
	}
}
