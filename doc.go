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
//	cfg, err := ringtail.ConfigFromEnv() // RANK, WORLD_SIZE, MASTER_ADDR, ...
//	if err != nil {
//		return err
//	}
//	comm, err := ringtail.New(ctx, cfg)
//	if err != nil {
//		return err
//	}
//	defer comm.Close()
//	err = comm.AllReduce(ctx, ringtail.Float32s(grad), ringtail.Avg)
//
// The package example runs four ranks in one process with NewLocal.
// Ranks that fall behind leave the ring without stopping it: AllReduceTree
// runs STAR's parent trees, and straggler/driver decides, step by step,
// who leaves and who returns (see docs/design.md).
package ringtail
