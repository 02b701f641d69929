// Package cost is ringtail's one model of what a collective costs: the
// price of a program (the ring, pieces, recursive doubling, the chain
// broadcast, the late-rank allreduce, the two-level and the offloaded
// allreduce, among any members) from the same inputs — the per-message
// latency and the per-link bandwidth (defaults, or a probe's measured
// matrix), the hosts the ranks run on (flows out of a host share its
// link), the channels and what one stream carries, and the transport's
// chunk. The algorithm choice (internal/algo), the straggler policy and
// the simulator price collectives with it, as NCCL's getAlgoInfo prices
// every algorithm from one table, so that they can never disagree about
// what a ring costs.
//
// A price is a model, not a measurement: it ranks programs where their
// costs differ by the data they move (a slow link, a shared host link);
// where they differ by what the CPUs' caches do (pieces on shared memory)
// the model cannot see it and algo.Tuner measures.
//
// It is pure: no I/O, no clock, no goroutines. It must not import net,
// os, the transport or any ringtail package.
package cost
