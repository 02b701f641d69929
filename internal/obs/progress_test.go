package obs

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/observe"
)

// A progress point reaches the event stream (an unmeasured loss as null),
// the metrics and the timeline's counter track; the dashboard relays it.
func TestProgressReachesStreamMetricsTimelineAndDashboard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.json")
	r := newTestRecorder(t, 0, 2, path)
	d, err := NewDashboard(DashboardConfig{Listen: "127.0.0.1:0", Targets: []string{r.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r.RecordProgress(observe.Progress{Step: 23, Epoch: 1, Elapsed: 3 * time.Second, Loss: 1.75, Accuracy: 0.8,
		SamplesPerSec: 460, StepTime: 135 * time.Millisecond})
	r.RecordProgress(observe.Progress{Step: 30, Epoch: 1.25, Loss: math.NaN(), Accuracy: 0.85})
	for _, url := range []string{"http://" + r.Addr() + "/events", d.URL() + "api/events"} {
		var got []map[string]any
		readEvents(t, url, func(kind string, m map[string]any) bool {
			if kind == "progress" {
				got = append(got, m)
			}
			return len(got) == 2
		})
		p, q := got[0], got[1]
		if p["step"] != 23.0 || p["epoch"] != 1.0 || p["elapsed_ms"] != 3000.0 || p["loss"] != 1.75 || p["accuracy"] != 0.8 ||
			p["samples_per_sec"] != 460.0 || p["step_ms"] != 135.0 {
			t.Errorf("%s: first point %v", url, p)
		}
		if q["loss"] != nil || q["accuracy"] != 0.85 || q["epoch"] != 1.25 || !(q["elapsed_ms"].(float64) > 0) {
			t.Errorf("%s: second point %v (an unmeasured loss is null; no elapsed time is the recorder's clock)", url, q)
		}
	}
	fams := scrape(t, r.Addr())
	for name, want := range map[string]float64{MetricTrainStep: 30, MetricTrainEpoch: 1.25, MetricTrainLoss: 1.75, MetricTrainAccuracy: 0.85, MetricTrainSamples: 460} {
		if v := value(t, fams, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var counters int
	for _, e := range readTrace(t, path) {
		if e["ph"] == "C" && e["name"] == "training" {
			counters++
			if args := e["args"].(map[string]any); counters == 2 && (args["accuracy"] != 0.85 || args["loss"] != nil) {
				t.Errorf("counter %v", args)
			}
		}
	}
	if counters != 2 {
		t.Errorf("%d training counter events, want 2", counters)
	}
}

// plan returns a next plan with times per sample, shares and evictions.
func stepWith(step int, perSample []float64, shares []int, evicted ...int) *stepMsg {
	return &stepMsg{Kind: "step", Step: step, Next: planMsg{Step: step + 1, PerSampleMs: perSample, Shares: shares, Evicted: evicted}}
}

// The launcher's line: a straggler set is reported once it has held for
// stragglerHold steps, again when it changes, and when it empties; a set
// flapping for fewer steps, and steps replayed, are not.
func TestStragglerWatchReportsSettledChanges(t *testing.T) {
	var w stragglerWatch
	even := []float64{6.3, 6.3, 6.4, 6.3}
	slow2 := []float64{6.3, 6.4, 18.9, 6.3}
	shares := []int{19, 19, 6, 20}
	var lines []string
	feed := func(m *stepMsg) {
		if c, ok := w.observe(m); ok {
			lines = append(lines, c.String())
		}
	}
	step := 0
	next := func(ps []float64, ev ...int) *stepMsg { step++; return stepWith(step, ps, shares, ev...) }
	for range 5 {
		feed(next(even))
	}
	for range 2 { // a blip of two steps: not reported
		feed(next(slow2))
	}
	feed(next(even))
	for range 4 {
		feed(next(slow2))
	}
	feed(stepWith(step-1, even, shares)) // replayed after a reconnect
	for range 3 {
		feed(next(slow2, 1)) // rank 1 evicted as well
	}
	for range 3 {
		feed(next(even))
	}
	want := []string{
		"step 11: rank 2 is straggling (3.0× the median time per sample, 6 of 64 samples (9%))",
		"step 15: ranks 1, 2 are straggling (rank 1: 1.0× the median time per sample, 19 of 64 samples (30%); rank 2: 3.0× the median time per sample, 6 of 64 samples (9%))",
		"step 18: no rank is straggling now",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
