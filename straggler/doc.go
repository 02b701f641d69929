// Package straggler is ringtail's one straggler core: the pure decision
// code that every rank of a job, the simulator and the benchmarks run.
// Each step it takes what the step's reduced buffer says about every rank
// (a Report) and returns the Plan of the next step:
//
//		observe → predict → choose the mode → plan
//
//	  - observe: Layout is the driver's reduction buffer ([payload | member
//	    reports | child reports]); Report is what a reduced buffer says;
//	  - predict: a Predictor per rank (RLS on the rank's telemetry, or EWMA)
//	    forecasts its per-sample time; Monitor classifies ranks (AntDT:
//	    transient, persistent, deterministic); the reduction time of any set
//	    of members comes from the probed link bandwidths and the measured
//	    reductions;
//	  - choose: shares proportional to speed (AntDT ADJUST_BS, through
//	    balance.AdjustBS) and an optional compute budget; then ChooseMode,
//	    STAR Eq. 3 extended: the plain ring, the exact overlap (the latest
//	    rank joins a reduction the others have reduce-scattered), or
//	    eviction of ranks into parents (topology.AssignParents), where each
//	    child computes at its own pace and its gradients are folded within a
//	    staleness bound;
//	  - plan: Plan, plain data, byte-identical for the same reports.
//
// Policy is two halves with one seam: the estimation (estimate.go) does
// observe and predict and keeps the ranks' forecasts; the decision
// (policy.go) chooses and plans from what the estimates view shows it.
// Above the Policy, Node (node.go) is one rank's step protocol in raft's
// shape; its scripts are testdata/node (TestNodeScripts), the Policy's
// scenarios testdata/*.txt (TestPolicyScripts).
//
// Everything here is a pure function of its inputs: no clock, no I/O, no
// goroutines, no global random source, ranks visited in index order
// (purity_test.go checks the imports and calls). It must never import net,
// os, the root package, the transport, zerolog, NVML bindings or
// straggler/inject. Executing a Plan is straggler/driver's job; the work
// model the benchmark and the simulator share is straggler/workload. See
// docs/straggler.md for the model and formulas.
package straggler
