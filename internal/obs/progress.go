package obs

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/ringtail-ml/ringtail/observe"
)

// progressMsg is an observe.Progress on the event stream: times in
// milliseconds, a measure not taken null.
type progressMsg struct {
	Kind          string   `json:"kind"`
	Rank          int      `json:"rank"`
	TMs           float64  `json:"t_ms"` // Unix milliseconds, when recorded
	Step          int      `json:"step"`
	Epoch         float64  `json:"epoch"`
	ElapsedMs     float64  `json:"elapsed_ms"`
	Loss          *float64 `json:"loss"`
	Accuracy      *float64 `json:"accuracy"`
	SamplesPerSec float64  `json:"samples_per_sec"`
	StepMs        float64  `json:"step_ms"`
}

// measured returns &v, or nil for NaN or ±Inf (not measured; JSON has no
// NaN).
func measured(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// RecordProgress implements observe.ProgressRecorder: the point goes to
// the metrics (ringtail_train_*), the timeline (a counter track) and the
// event stream, which the dashboard draws as the training curve.
func (r *Recorder) RecordProgress(p observe.Progress) {
	now := time.Now()
	if p.Elapsed <= 0 {
		p.Elapsed = now.Sub(r.started)
	}
	r.stepMu.Lock()
	defer r.stepMu.Unlock()
	m := r.m
	m.trainStep.Set(float64(p.Step))
	m.trainEpoch.Set(p.Epoch)
	if v := measured(p.Loss); v != nil {
		m.trainLoss.Set(*v)
	}
	if v := measured(p.Accuracy); v != nil {
		m.trainAccuracy.Set(*v)
	}
	if p.SamplesPerSec > 0 {
		m.trainThroughput.Set(p.SamplesPerSec)
	}
	msg := progressMsg{Kind: "progress", Rank: r.cfg.Rank, TMs: unixMs(now), Step: p.Step, Epoch: p.Epoch, ElapsedMs: ms(p.Elapsed),
		Loss: measured(p.Loss), Accuracy: measured(p.Accuracy), SamplesPerSec: p.SamplesPerSec, StepMs: ms(p.StepTime)}
	if b, err := json.Marshal(msg); err == nil {
		r.hub.publish(b, "")
	}
	if r.tl != nil {
		r.traceProgress(now, msg)
	}
}

// traceProgress writes the point as a counter event ("training" track:
// loss and accuracy).
func (r *Recorder) traceProgress(now time.Time, msg progressMsg) {
	if msg.Loss == nil && msg.Accuracy == nil {
		return
	}
	t := r.tl
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.begin("training", "progress", 'C', tidSteps)
	b = append(b, `,"ts":`...)
	b = t.us(b, now)
	b = append(b, `,"args":{`...)
	sep := ""
	for _, kv := range []struct {
		k string
		v *float64
	}{{"loss", msg.Loss}, {"accuracy", msg.Accuracy}} {
		if kv.v != nil {
			b = append(b, sep+`"`+kv.k+`":`...)
			b = strconv.AppendFloat(b, *kv.v, 'g', 6, 64)
			sep = ","
		}
	}
	b = append(b, `}`...)
	t.end(b)
}
