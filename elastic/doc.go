// Package elastic runs data-parallel training on a changing set of
// processes: ranks die or join (a launcher's host discovery), and the
// survivors form a new communicator generation and carry on. (AntDT's
// KILL_RESTART of a persistent straggler, §V-E, would use the same
// generations; nothing evicts a straggler from the job that way — within a
// job the straggler driver handles stragglers.)
//
// It owns:
//   - membership: a hashicorp/memberlist gossip ring per job, encrypted
//     with a key derived from the job secret (MemberlistKey), with timers
//     tuned to notice a dead process within a second on a LAN, plus
//     data-plane evidence (a collective failing with "peer died" names the
//     culprit at once);
//   - generations: the pure decider in elastic/view chooses each view; the
//     proposer hosts that generation's rendezvous (internal/rendezvous) and
//     every member builds a ringtail.Comm with dense ranks 0..m−1 and
//     Config.Generation set to the view's number, then all-reduces the view
//     digest to check agreement and adopts rank 0's step count;
//   - Worker: Join (start-up barrier), Run (calls the step function, and
//     after a failure re-forms and retries the step the same way on every
//     rank), Close;
//   - Observer: a launcher's seed for the job's memberlist and its view of
//     the generations and of dead nodes, never a member;
//   - Supervisor: keeps N process slots running for a launcher
//     (elastic/job runs one per host), restarting a process that exits
//     with ExitEvicted (or, if asked, crashed) so it rejoins at the next
//     generation.
//
// The recovery benchmark (time from a kill -9 to the next completed step)
// is bench/recovery, a harness outside this package; its ranks are what
// this package's process tests (package elastic_test) run.
//
// One goroutine per Worker (its loop) owns the decider, the adopted view,
// the generation contexts and the rendezvous servers this node hosts;
// memberlist callbacks, timers and the caller's goroutine only send it
// messages. The caller's goroutine (Join, Run) owns the communicator.
//
// Data sharding lives in elastic/shard and its service; docs/elastic.md
// describes the design, the timers and the measurements. This package must
// not be imported by elastic/view or elastic/shard.
package elastic
