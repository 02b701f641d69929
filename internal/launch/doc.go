// Package launch starts the ranks of a ringtail job and supervises them:
// it is the library behind `ringtail run` and `ringtail coordinator`, and
// what `ringtail bench` uses to start its local workers.
//
// It owns:
//   - the rank placement (HostSlots, ParseHosts, ParseHostfile): slots
//     assign consecutive ranks per host;
//   - the environment contract every rank receives (RANK, WORLD_SIZE,
//     LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
//     RINGTAIL_SECRET, RINGTAIL_JOB_ID, RINGTAIL_COORDINATOR=external and,
//     when set, RINGTAIL_TIMEOUT);
//   - the rendezvous coordinator of a launched job (an in-process
//     internal/rendezvous server on a free port, replaceable through
//     Config.Coordinator) and the stand-alone coordinator
//     (ServeCoordinator);
//   - process lifecycle: each local rank in its own process group with
//     Pdeathsig=SIGKILL on Linux; remote ranks over ssh (SSHCommand);
//     when one rank fails, or ctx ends, the others get SIGTERM and, after
//     Config.Grace, SIGKILL; or, with Config.Launcher LauncherSrun, every
//     rank as one Slurm job step (SrunCommand), whose labelled output is
//     split back into the ranks' streams and whose wrapper reports the
//     first rank that failed (Slurm's own environment is read by the
//     subpackage slurm, for the caller and the runtime);
//   - output multiplexing: each rank's stdout and stderr are cut into
//     lines and written whole, so lines of different ranks never
//     interleave mid-line.
//
// The smallest use starts n local ranks and waits for them:
//
//	code, err := launch.Run(ctx, launch.Config{NP: 4, Command: []string{exe, "bench-worker"}, Stdout: w})
//
// With PrefixOutput false (the zero value) Stdout receives every line of
// every rank unprefixed and exactly one line per Write call, so a caller
// can parse lines (JSON, say) as they come; `ringtail run` sets
// PrefixOutput, which prefixes each line with "[rank] ". Run returns the
// job's exit status (0, the first failing rank's status, 128+signo for a
// rank killed by a signal, 130 when ctx ended) and an error saying why it
// is not 0 (*RankError for a failed rank).
//
// This package must never import the root package ringtail, the
// transport, or any policy package (straggler, balance, gradcode,
// topology, elastic); it speaks to ranks only through their environment
// and to the coordinator only through internal/rendezvous.
package launch
