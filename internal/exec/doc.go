// Package exec is ringtail's one executor: it runs any plan.Program over a
// transport.Mesh. Local operations of a step run inline, then the step's
// sends and receives are posted to the links' writer and reader goroutines,
// which stream them in chunks (the reader folds each received chunk in as
// it arrives, overlapping the reduction with the transfer); a channel's
// next step starts when its current step is done, and channels run
// concurrently. The hot loop does not allocate.
//
// A context deadline or cancellation, or any link failure, ends the run
// with a *transport.Error naming the rank waited on or blamed, and fails
// the mesh so every other rank learns of it.
//
// This package must not import the root package or any builder or policy
// package: programs arrive as data.
package exec
