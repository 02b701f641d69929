package ringtail

import (
	"github.com/ringtail-ml/ringtail/observe"
)

var (
	_ observe.StepRecorder     = (*Comm)(nil)
	_ observe.ProgressRecorder = (*Comm)(nil)
)

// Observing reports whether the communicator records metrics, a timeline
// or the dashboard's event stream (Config.MetricsAddr or Config.Timeline
// is set): a training loop can skip building StepEvents when not.
func (c *Comm) Observing() bool { return c.rec != nil }

// RecordStep records one training step (the plan it ran under, every
// rank's arrival, what was predicted, evicted, shared and folded late) to
// the metrics, the timeline and the dashboard; it does nothing when the
// communicator is not Observing. The straggler driver calls it once per
// step.
func (c *Comm) RecordStep(ev observe.StepEvent) {
	if c.rec != nil {
		c.rec.RecordStep(ev)
	}
}

// RecordProgress records a point of the training loop's progress (step,
// epoch, training loss, held-out accuracy, throughput: observe.Progress)
// to the metrics, the timeline and the dashboard, whose training curve
// draws the points; it does nothing when the communicator is not
// Observing. Usually rank 0 reports, once an epoch or evaluation.
func (c *Comm) RecordProgress(p observe.Progress) {
	if c.rec != nil {
		c.rec.RecordProgress(p)
	}
}

// MetricsAddr returns the address this rank serves /metrics on ("" when
// off), with the port resolved when Config.MetricsAddr asked for port 0.
func (c *Comm) MetricsAddr() string {
	if c.rec == nil {
		return ""
	}
	return c.rec.Addr()
}
