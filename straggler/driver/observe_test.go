package driver

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
	"github.com/ringtail-ml/ringtail/straggler"
)

func TestStepEventFromAResult(t *testing.T) {
	ms := time.Millisecond
	plan := straggler.Plan{Step: 4, Mode: straggler.ModeEvict, Members: []int{0, 1, 3}, Evicted: []int{2}, Late: -1,
		Parents: []straggler.Edge{{Child: 2, Parent: 1}}, WaitUntil: 150 * ms, Shares: []int{20, 20, 4, 20},
		Predicted: []time.Duration{100 * ms, 100 * ms, 300 * ms, 100 * ms}, Stragglers: []int{2}}
	next := plan
	next.Step = 5
	res := Result{Step: 4, Role: straggler.RoleParent, Applied: 64, Folded: 1, Wait: 40 * ms, Plan: plan, Next: next,
		Report: straggler.Report{Step: 4, Applied: 64,
			Current: []straggler.RankReport{{Present: true, Arrival: 101 * ms, Compute: 99 * ms}, {Present: true, Arrival: 98 * ms, Compute: 97 * ms}, {}, {Present: true, Arrival: 103 * ms, Compute: 100 * ms}},
			Child:   []straggler.ChildReport{{}, {}, {Count: 1, Samples: 4, Compute: 300 * ms, Versions: 3}, {}}}}
	end := time.Unix(1000, 0)
	ev := StepEvent(1, 4, res, end)
	if ev.Step != 4 || ev.Rank != 1 || ev.Role != "parent" || ev.Plan.Mode != "evict" || ev.Next.Step != 5 {
		t.Fatalf("%+v", ev)
	}
	if want := []time.Duration{101 * ms, 98 * ms, -1, 103 * ms}; !equal(ev.Arrivals, want) {
		t.Errorf("arrivals %v, want %v", ev.Arrivals, want)
	}
	if want := []int{0, 0, 1, 0}; !equal(ev.Staleness, want) {
		t.Errorf("staleness %v, want %v", ev.Staleness, want)
	}
	if len(ev.Plan.Parents) != 1 || ev.Plan.Parents[0].Parent != 1 || ev.Plan.WaitUntil != 150*ms {
		t.Errorf("plan %+v", ev.Plan)
	}
	if !ev.Arrived.Equal(end.Add(-40*ms)) || !ev.Began.Equal(end.Add(-138*ms)) || ev.Compute != 97*ms {
		t.Errorf("times: began %v arrived %v compute %v", ev.Began, ev.Arrived, ev.Compute)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestObservedDriverRecordsSteps runs the driver on communicators with
// metrics on: each step reaches the rank's /metrics.
func TestObservedDriverRecordsSteps(t *testing.T) {
	const n, steps = 2, 4
	comms := commtest.Start(t, n, func(c *ringtail.Config) { c.MetricsAddr = "127.0.0.1:0" })
	// BSP: the plumbing is under test, not the policy (a loaded machine's
	// noise could evict a rank, and a child records no steps).
	pol, err := straggler.Preset(straggler.NameBSP, n, 16)
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, comms, pol, steps, 100*time.Microsecond, func(int, int) float64 { return 1 })
	for r, c := range comms {
		resp, err := http.Get("http://" + c.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"ringtail_step 3\n", `ringtail_steps_total{mode="ring"} 4`, `ringtail_step_share_samples{rank="1"}`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("rank %d: metrics lack %q:\n%s", r, want, grepSteps(string(body)))
			}
		}
	}
}

// grepSteps keeps the step metrics of an exposition, for failure messages.
func grepSteps(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "ringtail_step") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
