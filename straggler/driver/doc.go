// Package driver runs ringtail's straggler policy on the data plane: one
// Driver per rank turns each training step's gradient reduction into the
// step's plan — the plain ring (BSP), or STAR's ring with evicted children
// and parents that wait t_w — and hands every rank the same plan for the
// next step without a leader.
//
// It owns:
//   - Driver (driver.go, mailbox.go): executes a policy.Plan with the Comm's
//     AllReduce / AllReduceAmong and eager contributions, so that the one
//     Sum-allreduce of a step also distributes every rank's report exactly
//     (policy.Layout: each slot is written by one rank only), every rank
//     feeds its own policy.Policy identical reports and computes the
//     byte-identical plan of the next step; folds late gradients with
//     bounded staleness (bound 1: a gradient that misses its parent's wait
//     is folded at the next step, and that step waits for it) and never
//     drops one; Flush applies what is still pending;
//   - Sync (sync.go), the adapter examples/train's GradientSync plugs in;
//   - the synthetic data-parallel job behind `ringtail bench straggler`
//     (synthetic.go, bench.go), which runs ranks in-process over real
//     sockets and reports seconds per global batch of applied samples for
//     BSP, a policy and FlexRR's Ideal.
//
// The decisions themselves are pure and live in straggler/driver/policy
// (ringtail sim runs the same code); the injected work model the bench and
// the simulator share is straggler/driver/workload.
//
// A Driver is owned by one goroutine (the rank's training loop) and is not
// safe for concurrent use; it starts no goroutines, and every wait is
// bounded by the caller's context and Config.OpTimeout.
//
// This package must never import ringtail's internal packages or NVML
// bindings.
package driver
