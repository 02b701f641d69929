// Package policy is the straggler driver's pure decision code: what the
// ranks of a job and ringtail sim both run.
//
// It owns:
//   - Layout, the driver's reduction buffer ([payload | samples | per-rank
//     report slots | late-report slots]) and Report, what a reduced buffer
//     says about a step;
//   - Policy: the Report of step s in, the Plan of step s+1 out — batch
//     shares proportional to predicted speed (AntDT ADJUST_BS through
//     balance.AdjustBS, with hysteresis), an optional compute budget,
//     STAR Eq. 3 mode choice on the arrivals predicted under those shares
//     (straggler.ChooseMode), parents (topology.AssignParents), Carry, and
//     AntDT classes (straggler.Monitor); the presets bsp, adaptive, shares
//     and star;
//
// Everything here is a pure function of its inputs: no clock, no I/O, no
// goroutines, no global random source, ranks visited in index order, and
// the same reports give byte-identical plans (purity_test.go checks the
// imports and calls). It must never import net, os, the root package,
// the transport, zerolog, NVML bindings or straggler/inject (the work
// model the benchmark and simulator share is straggler/driver/workload).
package policy
