// Package sim is ringtail's discrete-event simulator of data-parallel
// training under stragglers: simulated ranks with a per-sample compute time
// slowed by the straggler/inject patterns, a ring all-reduce costed as
// 2(k−1)·(α + β·bytes/k), point-to-point transfers as α + β·bytes, and the
// very decision code the ranks run — straggler.Policy — deciding every
// step's plan from reports built exactly as the driver's reduced buffer
// carries them (present members, children's gradients folded with their
// versions, each rank's time in the previous reduction), with children
// computing at their own pace as the live driver's do.
//
// It owns Network (the link model), Run (one simulated run of a policy),
// Compare (BSP, a policy and FlexRR's Ideal under one pattern) and the rows
// `ringtail sim` prints. It shows the policy's behaviour and its decision
// cost at 64–4096 ranks, which a 2-core machine cannot run for real.
//
// Time is virtual: the simulator reads no clock, starts no goroutines and
// uses no global random source, so a run is a deterministic function of its
// Config. The one exception is measuring what a decision costs, which
// needs a real clock: Config.Clock injects it (nil: not measured).
//
// The decisions come from straggler, which imports nothing that does
// I/O; the patterns from straggler/workload and
// straggler/inject (whose Injector is pure; only its Runner, unused here,
// touches the process). This package must never import net, os, the root
// package, the transport or NVML bindings itself.
package sim
