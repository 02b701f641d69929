// Command late measures allreduce completion when one rank reaches the
// call late: Comm.AllReduceLate (the others reduce-scatter among
// themselves while it is still computing, then a completion folds its data
// in) against Comm.AllReduce (the plain ring), interleaved trial by trial.
//
// A trial: every rank fills its buffer, meets the others at a barrier,
// and calls the allreduce at once, except the late rank, which first
// sleeps -delay (default: one ring time, the median of -iters plain
// allreduces measured first without anyone late). The trial's time is the
// largest, over ranks, of barrier exit to return: when the last rank has
// the result. "after" is that minus the late rank's actual sleep: the
// time from its arrival. Variants alternate (plain first in even trials,
// late first in odd ones); medians over -iters trials are printed, and
// every result is checked (#wrong counts trials with a wrong element).
//
//	go run ./bench/late -np 4 -size 16M,64M -iters 9            # in-process ranks (shared memory)
//	ringtail run -H h0:1,h1:1,h2:1,h3:1 -- late -size 16M,64M    # one rank per host, from the launcher's environment
package main
