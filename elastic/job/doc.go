// Package job runs an elastic job for a launcher: it is what
// `ringtail run --elastic --min-np A --max-np B [--host-discovery-script S]`
// does (Horovod's elastic semantics: hosts come and go, the job continues
// between min-np and max-np ranks, a lost rank's data shards go back to
// TODO).
//
// It owns:
//   - host discovery (discovery.go): a fixed host list, or a script run
//     every DiscoveryInterval that prints the hosts available now, one
//     "host[:slots]" (or "host slots=N") per line;
//   - placement (placement.go, pure): which hosts run how many ranks —
//     discovered hosts in order, at most MaxNP ranks in all, none on a host
//     whose rank crashed (blacklisted until the script stops listing it and
//     lists it again), and ranks on hosts the script dropped are stopped;
//   - one elastic.Supervisor per host in use, whose processes are the
//     ranks (rank.go): local processes or, on other hosts, over the ssh
//     command, each under internal/launch's watcher script (the secret on
//     standard input, end of input stops the rank); a rank that exits with
//     ExitEvicted is restarted in place, a crash is restarted MaxRestarts
//     times before its host is blacklisted;
//   - the job's services: an elastic.Observer (the seed every rank joins,
//     and the launcher's view of the generations and of dead nodes) and
//     the shard service (elastic/shard/service, its WAL in StateDir), whose
//     store opens for the data the ranks declare; a node the failure
//     detector declares dead has its shard released at once.
//
// The job finishes when a rank exits 0 (the data is all trained) and the
// others follow; it fails when a rank exits with elastic.ExitJobLost (below
// min-np for too long, or the model lost), when every rank is gone, or
// when no host shows up within Timeout. One goroutine (Run's loop) owns
// the placement and the supervisors; supervisors, discovery and the
// observer send it messages.
//
// It must not be imported by elastic, elastic/view or elastic/shard; it
// uses internal/launch only for its pure pieces (host lists, the ssh and
// watcher commands, the environment names).
package job
