// Package balance holds ringtail's pure load-balancing solvers for
// heterogeneous and data-imbalanced data-parallel training.
//
// It owns:
//
//   - ADJUST_BS (AntDT Eq. 3): per-rank batch sizes that minimise the slowest
//     rank's batch time for a fixed global batch, exact in integers
//     (AdjustBS);
//   - AntDT-DD (AntDT Eq. 4): per-device-class batch size and gradient
//     accumulation count (AdjustBSAccum) and the memory-derived batch limit
//     (MaxBatchFromMemory);
//   - CHRONICA's runtime prophet (FitRuntime: non-negative t = a·size + b),
//     per-step size-aware packing (PackStep, LPT), epoch-level rebalancing of
//     per-rank partitions (RebalanceEpoch).
//
// The virtual-time emulation of those schemes (the harness of ringtail
// bench balance) lives in bench/emulate.
//
// Everything here is a pure function of its arguments: no I/O, no clock, no
// goroutines, no global random source (seeds come from the caller), maps
// are never iterated, and the same input gives byte-identical output.
//
// This package must never import net, os, time, the transport, the elastic
// packages, NVML bindings, or logging; callers log what it returns.
package balance
