// Package ring builds bandwidth-optimal ring programs: allreduce as
// reduce-scatter then allgather, reduce-scatter, allgather, and a pipelined
// chain broadcast, over any ring order and any number of channels.
//
// Reduction order (so every rank ends with identical bits): the ring is the
// given order of ranks; with channel part split into n segments, segment k
// starts at ring position k and travels forward, each position folding its
// own contribution in as dst = own op incoming. The owner of segment k
// after the reduce-scatter is position k−1, whose value is
// g[k−1] op (… op (g[k+1] op g[k])); the allgather then copies those bits
// to every rank unchanged. Avg divides once, at the owner, before the
// allgather.
//
// This package is pure: it must never import net, time, the transport or
// the executor.
package ring
