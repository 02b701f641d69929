// Package view decides the membership of an elastic ringtail job: which
// nodes form each generation's communicator, in which rank order, who
// proposes the next generation and when, and when the job must give up.
//
// It owns:
//   - View, one generation: its number, its members in dense rank order,
//     the proposer and the address of the generation's rendezvous, with a
//     canonical Hash that ranks compare in the new communicator;
//   - Decider, a pure state machine fed with membership events (a node is
//     alive or dead), data-plane evidence (a collective failed naming a
//     member), proposals received from peers and reports that a generation
//     formed or failed. Ready returns what the driver must do: propose a new
//     view, or stop with a typed error.
//
// The rules, in brief: survivors keep their relative order and joiners are
// appended, so rank 0 stays rank 0 while it lives; the first live member of
// the adopted view proposes (at start-up, with no view yet, the node with
// the smallest name); every node adopts the newest proposal it hears
// (higher generation, then the smaller proposer name); a proposal needs at
// least MinNP members and takes at most MaxNP; the first generation waits
// for InitialNP nodes (the start-up barrier).
//
// Everything here is pure decision logic: no clock (every input carries the
// caller's now), no goroutines, no I/O, no randomness, maps visited in
// sorted order. It must never import net, os, logging, memberlist, the
// ringtail root package or any transport; purity_test.go enforces the
// import list.
package view
