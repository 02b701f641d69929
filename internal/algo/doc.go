// Package algo is the one place that decides how a collective runs, as
// NCCL's getAlgoInfo does: the Planner takes what every rank agreed about
// the communicator (Facts: fastboxes on every link or not, the hosts the
// ranks run on, the links' prices, measured or by default) and what its
// Tuner measured, and says for each call which program runs (Decide) and
// on which path (Program marks the fastbox path); Build turns the choice
// into the builder's program for one rank. The communicator, --dump-plan
// and the benchmarks all go through it, so they can never disagree; the
// engine only runs what it says, times what it asks to time and runs the
// agreements and link probes it asks for, and the executor follows the
// program's path. Prices come from internal/cost, the model the straggler
// policy and the simulator share.
//
// It is pure: no I/O, no clock, no goroutines. It must not import the
// transport, the executor or the root package.
package algo
