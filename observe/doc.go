// Package observe holds what a training loop tells ringtail's
// observability: StepEvent (the plan a step ran under, every rank's
// arrival, what was predicted, evicted, shared and folded late) with the
// StepRecorder interface, and Progress (step, epoch, training loss,
// held-out accuracy, throughput: the dashboard's training curve) with the
// ProgressRecorder interface; a *ringtail.Comm implements both. The
// straggler driver fills one StepEvent per step; a job with its own loop
// can do the same. The events reach the rank's Prometheus metrics
// (RINGTAIL_METRICS_ADDR), its timeline (RINGTAIL_TIMELINE) and the live
// dashboard (`ringtail run --dashboard`); see docs/observability.md.
//
// The package is public because the driver and users build the events;
// the machinery that records them (metrics, timeline, event stream,
// dashboard) is internal (internal/obs). It holds plain data only and
// imports nothing of ringtail.
package observe
