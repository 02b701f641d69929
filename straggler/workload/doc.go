// Package workload is the work model that ringtail bench straggler, ringtail
// sim and FlexRR's Ideal share: how long n samples take a rank at a step
// under a straggler/inject pattern (Compute), how many whole samples fit in
// a compute budget (SamplesWithin), what the step's work would take
// perfectly balanced over the ranks' injected speeds (IdealCompute), and the
// benchmark's patterns (DefaultPatterns; NetworkPatterns, the link specs
// a test bed applies).
//
// It is a harness, not policy: it may import straggler/inject (whose
// Injector is pure), which the decision package straggler/driver/policy
// must not. Everything here is a pure function of its arguments.
package workload
