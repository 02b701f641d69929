// Package faults is ringtail's fault harness: it starts real jobs with
// `ringtail run` (separate rank processes running the harness's own
// worker, integration/faults/worker), injects one fault per run, and
// checks the outcome.
//
// Faults: kill -9 of a rank mid-run; SIGSTOP/SIGCONT of a rank for 0.5×
// and 2× the peer timeout; a rank that skips one collective; a rank that
// calls one collective with another root, dtype, count or reduction op;
// and connection floods (idle and garbage connections from strangers)
// against a rank's data-plane listener, the rendezvous coordinator and
// the elastic shard service. Jobs run over shared memory or TCP with 2 to
// 8 ranks.
//
// Every run's outcome is checked (check.go, pure): each surviving rank's
// error names the culprit; `ringtail run` exits with the first failing
// rank's status and names it; no rank fails later than the peer timeout
// (plus a slack) after the fault; no collective returns a wrong result
// without an error (the worker checks every result against a locally
// computed reference); a 0.5× freeze never fails the job; a flood keeps
// the target's RSS growth under a budget while a real job completes.
//
// The harness runs as a Go test behind the "faults" build tag (make
// faults); docs/reliability.md has the commands and the results.
package faults
