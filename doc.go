// Package ringtail is a collective-communication runtime for data-parallel
// training that stays fast when some workers are slow.
//
// A Comm connects the ranks of a job in an authenticated full mesh (unix
// sockets within a host, TCP between hosts) and runs collectives on it:
// AllReduce, Broadcast, AllGather, ReduceScatter and Barrier. Each call
// builds a program (package ring for bandwidth-optimal rings, package tree
// for latency-optimal small-message algorithms) and runs it on one executor.
// Every call takes a context and an operation timeout: a dead, frozen or
// disagreeing peer becomes an *Error naming the rank on every rank, never a
// hang.
//
//	comm, err := ringtail.New(ctx, ringtail.ConfigFromEnv())
//	...
//	err = comm.AllReduce(ctx, ringtail.Float32s(grad), ringtail.Avg)
package ringtail
