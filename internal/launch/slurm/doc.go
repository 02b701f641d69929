// Package slurm reads what Slurm tells a job and its tasks through the
// environment: compressed host lists ("node[01-04,07]", ExpandHostList),
// tasks-per-node lists ("2(x3),1", ExpandTasksPerNode), the allocation a
// launcher inside a job may use (AllocationFromLookup, for `ringtail run`
// under salloc or sbatch), and one task's place in a job step
// (TaskFromLookup, for a rank started by srun, which the root package's
// ConfigFromLookup maps onto RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT when those are unset).
//
// Everything here is pure: variables arrive through a lookup function, and
// the package imports only the standard library. It must never import the
// root package, the transport or the launcher.
package slurm
