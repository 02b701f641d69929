package ringtail

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/obs"
	"github.com/ringtail-ml/ringtail/observe"
)

// TestObservedJob runs two ranks with metrics and a timeline on: the
// metrics endpoint answers during the run, each rank's timeline is a valid
// trace with the ring's phases, and the merged trace is too.
func TestObservedJob(t *testing.T) {
	dir := t.TempDir()
	timeline := filepath.Join(dir, "trace.json")
	comms := startComms(t, 2, func(c *Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.Timeline = timeline
	})
	ctx := context.Background()
	big := make([][]float32, 2)
	for r := range big {
		big[r] = make([]float32, 64<<10)
	}
	errs := each(comms, func(r int, c *Comm) error {
		for range 3 {
			if err := c.AllReduce(ctx, Float32s(big[r]), Sum); err != nil {
				return err
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		now := time.Now()
		c.RecordStep(observe.StepEvent{Step: 0, Rank: r, Role: "member", Plan: observe.Plan{Step: 0, Mode: "ring", Members: []int{0, 1}, Shares: []int{32, 32}},
			Next: observe.Plan{Step: 1, Mode: "ring"}, Arrivals: []time.Duration{time.Millisecond, 2 * time.Millisecond},
			Began: now.Add(-3 * time.Millisecond), Arrived: now.Add(-time.Millisecond), Ended: now, Compute: time.Millisecond})
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, c := range comms {
		if !c.Observing() || c.MetricsAddr() == "" {
			t.Fatalf("rank %d: not observing", r)
		}
		resp, err := http.Get("http://" + c.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`ringtail_calls_total{collective="AllReduce"} 4`, // 3 + the transport agreement
			`ringtail_calls_total{collective="Barrier"} 1`, `ringtail_step_share_samples{rank="1"} 32`, `ringtail_link_transport{channel="0",peer=`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("rank %d: metrics lack %s", r, want)
			}
		}
	}
	for _, c := range comms {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for r := range 2 {
		f := obs.RankTimelinePath(timeline, r, 2)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := obs.ReadTrace(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := obs.ValidateTrace(evs); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		seen := map[string]bool{}
		for _, e := range evs {
			seen[e["name"].(string)] = true
		}
		for _, want := range []string{"AllReduce", "Barrier", "reduce-scatter", "allgather", "step 0", "compute", "plan step 1: ring"} {
			if !seen[want] {
				t.Errorf("rank %d: no %q event", r, want)
			}
		}
		files = append(files, f)
	}
	out, err := os.Create(filepath.Join(dir, "merged.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rep, err := obs.Merge(out, files)
	if err != nil {
		t.Fatal(err)
	}
	// One host, one clock: the merge keeps it.
	if rep.OffsetsUs["1"] != 0 || len(rep.Ranks) != 2 || rep.Events < 20 {
		t.Errorf("merge report %+v", rep)
	}
}

func TestObservabilityConfig(t *testing.T) {
	env := map[string]string{EnvMetricsAddr: "0.0.0.0:9400+", EnvTimeline: filepath.Join(t.TempDir(), "t.json"), EnvLocalRank: "2", EnvLocalWorldSize: "4"}
	cfg, err := ConfigFromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr != env[EnvMetricsAddr] || cfg.Timeline != env[EnvTimeline] {
		t.Fatalf("%q %q", cfg.MetricsAddr, cfg.Timeline)
	}
	for name, mutate := range map[string]func(*Config){
		"addr":                    func(c *Config) { c.MetricsAddr = "9400" },
		"port":                    func(c *Config) { c.MetricsAddr = ":65535+"; c.LocalRank, c.LocalWorldSize = 1, 2 },
		"timeline":                func(c *Config) { c.Timeline = "/no/such/dir/t.json" },
		"timeline is a directory": func(c *Config) { c.Timeline = t.TempDir() },
	} {
		c := DefaultConfig(0, 1)
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var c Comm
	if c.Observing() || c.MetricsAddr() != "" {
		t.Error("an unobserved communicator observes")
	}
	c.RecordStep(observe.StepEvent{}) // a no-op
}
