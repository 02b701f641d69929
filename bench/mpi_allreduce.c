/*
 * mpi_allreduce.c - OpenMPI peer probe for bench/compare.
 *
 * Times MPI_Allreduce(MPI_IN_PLACE, float32, MPI_SUM) the same way
 * `ringtail bench allreduce` does (nccl-tests style):
 *   1. fill with a rank-dependent pattern, run once and count wrong elements;
 *   2. `warmup` untimed calls;
 *   3. barrier, then `iters` back-to-back timed calls; time = mean per call;
 *   4. the reported time is the maximum of that mean over ranks.
 * algbw = bytes / time (decimal GB/s), busbw = algbw * 2(n-1)/n.
 *
 * Usage: mpirun -np N ./mpi_allreduce [-i iters] [-w warmup] BYTES[:ITERS]...
 * A size may carry its own iteration count (e.g. 8:1000 for a latency
 * row). Rank 0 prints one JSON object per size, with the same field names as
 * `ringtail bench allreduce --json`.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Small integers are exact in float32 in any summation order. */
static float value(int rank, long i) { return (float)((rank + 1) * ((i % 7) + 1)); }

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);

	int iters = 20, warmup = 5, first = 1;
	while (first < argc && argv[first][0] == '-') {
		if (first + 1 >= argc) {
			if (rank == 0) fprintf(stderr, "mpi_allreduce: flag %s needs a value\n", argv[first]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		if (strcmp(argv[first], "-i") == 0) iters = atoi(argv[first + 1]);
		else if (strcmp(argv[first], "-w") == 0) warmup = atoi(argv[first + 1]);
		else {
			if (rank == 0) fprintf(stderr, "mpi_allreduce: unknown flag %s\n", argv[first]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		first += 2;
	}
	if (iters < 1 || first >= argc) {
		if (rank == 0) fprintf(stderr, "usage: mpi_allreduce [-i iters] [-w warmup] BYTES[:ITERS]...\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	for (int a = first; a < argc; a++) {
		char *colon;
		long bytes = strtol(argv[a], &colon, 10);
		int n_iters = iters;
		if (*colon == ':' && atoi(colon + 1) > 0) n_iters = atoi(colon + 1);
		long count = bytes / (long)sizeof(float);
		if (count < 1) count = 1;
		bytes = count * (long)sizeof(float);
		float *buf = malloc((size_t)bytes);
		if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);

		/* Correctness check, once per size. */
		for (long i = 0; i < count; i++) buf[i] = value(rank, i);
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		long wrong = 0;
		float ranksum = (float)(n * (n + 1) / 2);
		for (long i = 0; i < count; i++)
			if (buf[i] != ranksum * (float)((i % 7) + 1)) wrong++;

		for (int it = 0; it < warmup; it++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		double start = MPI_Wtime();
		for (int it = 0; it < n_iters; it++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double avg = (MPI_Wtime() - start) / n_iters, tmax;
		long wsum;
		MPI_Allreduce(&avg, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		MPI_Allreduce(&wrong, &wsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

		if (rank == 0) {
			double alg = tmax > 0 ? (double)bytes / tmax / 1e9 : 0;
			printf("{\"collective\":\"allreduce\",\"ranks\":%d,\"size_bytes\":%ld,\"count\":%ld,"
			       "\"type\":\"float32\",\"redop\":\"sum\",\"time_us\":%.3f,\"algbw_gbps\":%.6g,"
			       "\"busbw_gbps\":%.6g,\"wrong\":%ld}\n",
			       n, bytes, count, tmax * 1e6, alg, alg * 2.0 * (n - 1) / n, wsum);
			fflush(stdout);
		}
		free(buf);
	}
	MPI_Finalize();
	return 0;
}
