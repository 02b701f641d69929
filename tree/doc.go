// Package tree builds latency-optimal programs for small messages —
// recursive-doubling allreduce and barrier, binomial-tree broadcast — and
// is the home of the straggler parent trees (evicted ranks attached as
// children of ring members).
//
// Recursive doubling gives every rank identical bits: each exchange folds
// the partner's partial into one's own as own op partner, and the partner
// computes partner op own, which IEEE 754 addition, multiplication, min and
// max make bit-identical.
//
// This package is pure: it must never import net, time, the transport or
// the executor.
package tree
