// Package plan defines a collective as data: for each rank, one or more
// channels, each an ordered list of steps, each step a set of operations
// (send a region to a rank, receive a region from a rank and copy or reduce
// it in, copy a region locally, divide a region for Avg).
//
// Builders (ring, tree, gradcode) produce Programs with pure code; the one
// executor in internal/exec runs any Program over any transport. Within a
// step, local operations (Copy, Scale) run first, in order, then every
// network operation of the step runs concurrently; a channel's next step
// starts when all of its current step's operations are done. Channels run
// independently. Offsets and lengths are in elements, so one Program serves
// every element type.
//
// This package is pure: it must never import net, time, the transport or
// the executor.
package plan
