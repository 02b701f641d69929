// Package driver runs ringtail's straggler core on the data plane: one
// Driver per rank turns each training step's gradient reduction into the
// step's plan — the plain ring (BSP), the exact mode (Comm.AllReduceLate:
// the others reduce-scatter while a predicted-late rank computes), or
// STAR's parent trees (Comm.AllReduceTree: evicted children compute at
// their own pace and post gradients their parents fold with bounded
// staleness) — and hands every rank the same plan for the next step
// without a leader.
//
// It owns:
//   - Driver (driver.go): executes a straggler.Plan. The one
//     Sum-reduction of a member step also carries every rank's report
//     (straggler.Layout: each member slot is written by one rank only,
//     child slots are additive), so every member feeds its own
//     straggler.Policy identical reports and computes the byte-identical
//     plan of the next step. Children post gradients from two alternating
//     buffers (at most two unacknowledged), take the newest state their
//     parent posts, and replay the reports the parent forwards so their
//     policy decides what the members decide; a child whose edge reaches
//     the staleness bound is waited for (Must). Gradients are never
//     dropped: Flush drains what is still pending;
//   - Sync (sync.go), the adapter examples/train's GradientSync plugs in.
//
// The protocol itself — what a member or a child does each step — is
// straggler.Node's; the Driver is its I/O loop. The synthetic job behind
// `ringtail bench straggler` is a harness of its own (bench/synthetic).
//
// The decisions themselves are pure and live in straggler/ (ringtail sim
// runs the same code); the injected work model the bench and the
// simulator share is straggler/workload.
//
// A Driver is owned by one goroutine (the rank's training loop) and is not
// safe for concurrent use; it starts no goroutines, and every wait is
// bounded by the caller's context and Config.OpTimeout.
//
// This package must never import ringtail's internal packages or NVML
// bindings.
package driver
