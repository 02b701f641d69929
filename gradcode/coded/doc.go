// Package coded runs gradient-coded allreduce over a ringtail communicator:
// each step, every rank computes the gradients of the partitions a
// gradcode.Plan assigns it, encodes them into one coded payload, and the
// gradient sum is decoded from the first n−s payloads to arrive, so no step
// waits for more than n−s ranks.
//
// Protocol (leader fold). The leader of a step is the lowest-numbered rank
// not known dead (Comm.Dead). Every other rank Contributes its payload to
// the leader, tagged with the step; the leader takes the first n−s arrivals
// (its own included, counted when its compute finishes; for plans with
// groups, the first arrivals that contain a whole group), decodes them with
// Plan.Decode, folds Σ a_i·payload_i in float64 and Contributes the sum to
// every other live rank in ascending rank order. A rank whose compute has
// not finished when the sum arrives abandons it (its compute context is
// cancelled). If the leader dies, the next lowest live rank takes over and
// ranks that have not received the sum resend their payload to it; because
// the sum is sent in ascending order, the new leader holds the sum whenever
// any live rank does, and answers such resends from a short history of sums.
// Payloads for an old step are released on arrival.
//
// It owns the step state machine only: planning lives in gradcode, the wire
// in the root package. It must never import cmd/ or straggler/ packages;
// throughput telemetry reaches it through ThroughputSource.
package coded
