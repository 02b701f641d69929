package obs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ringtail-ml/ringtail/observe"
)

// planMsg is an observe.Plan with durations in milliseconds, for the
// browser.
type planMsg struct {
	Step        int              `json:"step"`
	Mode        string           `json:"mode"`
	Members     []int            `json:"members"`
	Evicted     []int            `json:"evicted"`
	Parents     []observe.Parent `json:"parents"`
	WaitUntilMs float64          `json:"wait_until_ms"`
	BudgetMs    float64          `json:"budget_ms"`
	Shares      []int            `json:"shares"`
	PredictedMs []float64        `json:"predicted_ms"`
	PerSampleMs []float64        `json:"per_sample_ms"`
	Stragglers  []int            `json:"stragglers"`
}

// stepMsg is an observe.StepEvent on the event stream.
type stepMsg struct {
	Kind        string    `json:"kind"`
	Rank        int       `json:"rank"`
	Step        int       `json:"step"`
	Role        string    `json:"role"`
	Plan        planMsg   `json:"plan"`
	Next        planMsg   `json:"next"`
	ArrivalsMs  []float64 `json:"arrivals_ms"` // −1: not in
	ComputesMs  []float64 `json:"computes_ms"`
	Staleness   []int     `json:"staleness"`
	Applied     int       `json:"applied"`
	Late        int       `json:"late"`
	Carried     int       `json:"carried"`
	BeganMs     float64   `json:"began_ms"` // Unix milliseconds
	ArrivedMs   float64   `json:"arrived_ms"`
	EndedMs     float64   `json:"ended_ms"`
	ComputeMs   float64   `json:"compute_ms"`
	ChildWaitMs float64   `json:"child_wait_ms"`
}

func msAll(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		if d < 0 {
			out[i] = -1
		} else {
			out[i] = ms(d)
		}
	}
	return out
}

func toPlanMsg(p observe.Plan) planMsg {
	return planMsg{Step: p.Step, Mode: p.Mode, Members: p.Members, Evicted: p.Evicted, Parents: p.Parents,
		WaitUntilMs: ms(p.WaitUntil), BudgetMs: ms(p.Budget), Shares: p.Shares, PredictedMs: msAll(p.Predicted), PerSampleMs: msAll(p.PerSample), Stragglers: p.Stragglers}
}

// RecordStep implements observe.StepRecorder: the step's plan, arrivals,
// evictions, shares and staleness go to the metrics, the timeline (the
// step, its compute, the wait for children, and the decision as an
// instant event) and the event stream.
func (r *Recorder) RecordStep(ev observe.StepEvent) {
	r.stepMu.Lock()
	defer r.stepMu.Unlock()
	m := r.m
	mode := ev.Plan.Mode
	if mode == "" {
		mode = "ring"
	}
	m.step.Set(float64(ev.Step))
	m.steps.WithLabelValues(mode).Inc()
	for _, md := range []string{"ring", "evict", mode} {
		v := 0.0
		if md == mode {
			v = 1
		}
		m.mode.WithLabelValues(md).Set(v)
	}
	evicted := make([]bool, r.cfg.World)
	for _, e := range ev.Plan.Evicted {
		if e >= 0 && e < len(evicted) {
			evicted[e] = true
		}
	}
	for i, lbl := range r.ranks {
		if i < len(ev.Arrivals) && ev.Arrivals[i] >= 0 {
			m.arrival.WithLabelValues(lbl).Set(ev.Arrivals[i].Seconds())
		}
		if i < len(ev.Plan.Predicted) {
			m.predicted.WithLabelValues(lbl).Set(ev.Plan.Predicted[i].Seconds())
		}
		if i < len(ev.Plan.Shares) {
			m.share.WithLabelValues(lbl).Set(float64(ev.Plan.Shares[i]))
		}
		if i < len(ev.Staleness) {
			m.staleness.WithLabelValues(lbl).Set(float64(ev.Staleness[i]))
		}
		v := 0.0
		if evicted[i] {
			v = 1
			m.evictions.WithLabelValues(lbl).Inc()
		}
		m.evicted.WithLabelValues(lbl).Set(v)
	}
	m.waitUntil.Set(ev.Plan.WaitUntil.Seconds())
	m.applied.Add(float64(max(ev.Applied, 0)))
	m.late.Add(float64(max(ev.Late, 0)))
	if !ev.Began.IsZero() && ev.Ended.After(ev.Began) {
		m.stepDuration.Observe(ev.Ended.Sub(ev.Began).Seconds())
	}
	if r.tl != nil {
		r.traceStep(&ev, mode)
	}
	msg := stepMsg{Kind: "step", Rank: ev.Rank, Step: ev.Step, Role: ev.Role, Plan: toPlanMsg(ev.Plan), Next: toPlanMsg(ev.Next),
		ArrivalsMs: msAll(ev.Arrivals), ComputesMs: msAll(ev.Computes), Staleness: ev.Staleness,
		Applied: ev.Applied, Late: ev.Late, Carried: ev.Carried, BeganMs: unixMs(ev.Began), ArrivedMs: unixMs(ev.Arrived),
		EndedMs: unixMs(ev.Ended), ComputeMs: ms(ev.Compute), ChildWaitMs: ms(ev.ChildWait)}
	if b, err := json.Marshal(msg); err == nil {
		r.hub.publish(b, "")
	}
}

// traceStep writes a step to the timeline: the step span, its compute,
// the wait for children, and the controller's decision for the next step
// as an instant event.
func (r *Recorder) traceStep(ev *observe.StepEvent, mode string) {
	t := r.tl
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Began.IsZero() || ev.Ended.IsZero() {
		return
	}
	b := t.begin("step "+strconv.Itoa(ev.Step), "step", 'X', tidSteps)
	b = t.span(b, ev.Began, ev.Ended)
	b = append(b, `,"args":{"mode":`...)
	b = appendJSONString(b, mode)
	b = append(b, `,"role":`...)
	b = appendJSONString(b, ev.Role)
	b = append(b, `,"applied":`...)
	b = strconv.AppendInt(b, int64(ev.Applied), 10)
	b = append(b, `,"late":`...)
	b = strconv.AppendInt(b, int64(ev.Late), 10)
	b = append(b, `}`...)
	t.end(b)
	if ev.Compute > 0 {
		t.end(t.span(t.begin("compute", "compute", 'X', tidSteps), ev.Began, ev.Began.Add(ev.Compute)))
	}
	if ev.ChildWait > 0 && !ev.Arrived.IsZero() {
		t.end(t.span(t.begin("wait for children", "phase", 'X', tidSteps), ev.Arrived, ev.Arrived.Add(ev.ChildWait)))
	}
	n := ev.Next
	name := fmt.Sprintf("plan step %d: %s", n.Step, n.Mode)
	if len(n.Evicted) > 0 {
		name += fmt.Sprintf(" %v, t_w=%v", n.Evicted, n.WaitUntil.Round(time.Millisecond))
	}
	b = t.begin(name, "controller", 'i', tidSteps)
	b = append(b, `,"s":"p","ts":`...)
	b = t.us(b, ev.Ended)
	args, err := json.Marshal(toPlanMsg(n))
	if err == nil {
		b = append(b, `,"args":`...)
		b = append(b, args...)
	}
	t.end(b)
}
