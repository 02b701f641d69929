// Package gradcode builds gradient-coding plans: which data partitions each
// worker computes, how it combines their gradients into one coded payload
// (the encoding matrix B), and how the gradient sum is recovered from the
// payloads of any sufficient set of survivors (the decoding vector).
//
// It owns three schemes:
//
//   - cyclic: Tandon et al.'s cyclic repetition, k = n partitions, worker i
//     holds {i, …, i+s} mod n;
//   - hetero: the heterogeneity-aware scheme (Alg. 1 of "Heterogeneity-aware
//     Gradient Coding for Straggler Tolerance"): loads proportional to measured
//     throughput, (s+1)·k copies laid out cyclically, B built through an
//     auxiliary matrix H with properties (P1)/(P2) (Lemma 2);
//   - group: the group-based variant (Alg. 2/3): groups of workers whose
//     partitions cover the data exactly once decode with 0/1 coefficients as
//     soon as one whole group has reported.
//
// A Plan is data: it is a deterministic function of its Config (n, s,
// throughputs, seed, …), so every rank computes the same plan without talking
// to the others. The package also holds the pure helpers around plans:
// the allocation-free Encode kernel and the Theorem-5 optimal compute time
// (the papers' explicit constructions, the reference decoder and the
// compute-time model, which only tests use, are in reference_test.go).
//
// Numerical quality is a first-class property: structured constructions
// (a proper colouring of the workers and a small well-conditioned palette for
// the auxiliary matrix) replace random H by default, decoding is a weighted
// minimum-norm least-squares solve in float64, and every plan measures its own
// decode amplification — certified over every straggler set for structured
// plans by a bound over colour classes — and says whether its coded payloads
// travel as float32 or float64 (Plan.PayloadDType). See docs/gradcode.md.
//
// gradcode is pure decision logic: it must never import net, os, time (for
// clocks), the transport, the executor under internal/, nvml, or any logger;
// it starts no goroutines and uses no global random source (randomness comes
// from Config.Seed through a local *rand.Rand).
package gradcode
