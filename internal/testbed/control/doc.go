// Package control is the test bed's control socket: a job running on a
// bed (internal/testbed) asks the process that owns the bed to reshape the
// hosts' links between runs and to stall one rank's link now, which the
// job itself cannot do — its ranks run inside the hosts' namespaces, while
// the bed (its tc and nftables state, its userspace proxies) belongs to
// the process that built it.
//
// The owner (scripts/testbed.sh's tool, a test) serves a Unix socket with
// Serve and passes its path to the job in TB_CONTROL (EnvSocket); ranks
// started by `ringtail run --ssh "ip netns exec"` get it with
// `-x TB_CONTROL` (a path-bound Unix socket is reachable from any network
// namespace). Each connection carries one request and one reply, JSON,
// bounded in size and time. `ringtail bench straggler` is the client
// (Client): it applies each pattern's link clauses before the run's
// connections open and asks for the step-triggered stalls.
//
// This package must not import the bed (internal/testbed imports it) nor
// anything that needs root: the ringtail binary links it.
package control
