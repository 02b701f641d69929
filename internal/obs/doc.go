// Package obs is ringtail's observability machinery, one Recorder per rank
// and one Dashboard per job:
//
//   - Recorder (recorder.go) implements exec.Tracer: every call's count,
//     bytes, latency histogram and busbw, and failures by kind and blamed
//     rank, as Prometheus metrics (metrics.go, prometheus/client_golang,
//     a registry per rank, no global state); with a timeline, each call
//     and its phases (waiting for peers, reduce-scatter, allgather) as
//     Chrome trace events (timeline.go). It records training steps
//     (observe.StepEvent, step.go) to the metrics, the timeline (step,
//     compute, wait for children, the controller's decision as an instant
//     event) and an event stream, and the training loop's progress
//     (observe.Progress, progress.go: ringtail_train_* gauges, a counter
//     track, progress events); it samples busbw and host/GPU telemetry
//     every Period (sampler.go); it serves /metrics, /events (Server-Sent
//     Events) and /info on the rank's metrics address.
//   - Dashboard (dashboard.go) follows the ranks' /events streams and
//     serves the live page (web/, embedded; no external assets) and
//     /api/events to browsers; it reports each settled change of the
//     straggler set (stragglers.go) for the launcher's terminal line.
//   - Merge (merge.go) joins the ranks' timeline files into one trace on
//     one clock.
//   - Who may read (auth.go): a server bound to loopback answers its host;
//     one bound beyond it needs the job secret and answers only requests
//     carrying the endpoint token (Token: HMAC-SHA256 of a fixed label
//     under the secret), refusing the rest with 401 and the fix.
//
// Cost: with no Recorder the engine and executor make one nil check per
// call and per step; with one, a call reads the clock twice and updates
// pre-resolved counters and a histogram without allocating (see
// BenchmarkAllReduce in the root package). Logging: the recorder takes
// a zerolog.Logger from its caller; the job-wide logger (RINGTAIL_LOG_LEVEL)
// is passed in through the root package's Config.Logger.
//
// This package must not import the root package or the policy packages;
// it imports the public observe package for the step event type.
package obs
