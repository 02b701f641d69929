// Package engine is the machinery behind a ringtail.Comm: joining the job
// (the rendezvous, over libp2p or TCP, and the mesh of authenticated links),
// running every call (the algorithm from internal/algo, the program cache,
// the call descriptor with its per-group call numbers, the executor), the
// one matching queue of eager messages with the tagged Mailbox over it,
// and the protocols of several calls (MonitoredBarrier, Probe, AllToAllV's
// count agreement). The root package keeps the types and calls users read;
// this package keeps everything they need not.
//
// One call runs at a time (Engine serialises them). Between calls the
// engine answers peers' stall queries from its call counters without
// blocking (Engine.idleState); during a call the executor answers them.
//
// This package must not import the root package or any policy package.
package engine
