// Package straggler is ringtail's straggler policy: it observes when each
// rank reaches the collective, classifies ranks (AntDT), predicts their next
// arrival (STAR §IV-A), and chooses each step's all-reduce mode (STAR §IV-C,
// Eq. 3): the plain ring (BSP), or the ring with x predicted stragglers
// evicted into parents that wait t_w for them.
//
// It owns:
//   - Observation, one rank's report of one step;
//   - Monitor, short and long sliding windows per rank, the slowness ratio λ
//     and the per-rank Class (none, transient, persistent, deterministic);
//   - Predictor and its two implementations, EWMA and RLS (recursive least
//     squares on resource features, with gonum's BLAS);
//   - ChooseMode, the pure Eq. 3 minimisation, and GNSEstimator for φ;
//   - Plan, the decision for one step (mode, evicted ranks, t_w, the
//     candidates it weighed, the Carry list that keeps late gradients);
//   - Controller, an etcd-raft style state machine: Step(obs), Tick(),
//     Ready()/Advance(), Plan().
//
// Everything here is pure decision logic: no clock (time moves only through
// Tick), no goroutines, no I/O, no global random source, ranks visited in
// sorted order, and the same inputs give byte-identical Plans. Parent
// selection and ring order belong to topology/; executing a Plan belongs to
// the executor. See docs/straggler.md for the model and formulas.
//
// This package must never import net (not even through a dependency:
// zerolog pulls it in, so callers log Plans instead), os, ringtail's
// transport, NVML bindings, the straggler/inject harness (tests excepted)
// or any executor package. purity_test.go enforces the import list.
package straggler
