/* capi_test.c: a tiny C program that exercises libringtail through
 * ringtail.h. Run one process per rank with RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT and RINGTAIL_INSECURE=1 (or a secret) in the environment;
 * it prints "ok rank R" and exits 0, or prints the failure and exits 1.
 * Collectives run on a thread the program creates, not on main's. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringtail.h"

static int rank_, world_;
static rt_comm comm_;
static char err_[512];

#define CHECK(cond, ...)                                         \
	do {                                                         \
		if (!(cond)) {                                           \
			fprintf(stderr, "rank %d: FAIL %s:%d: ", rank_,      \
			        __FILE__, __LINE__);                         \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, " (last error: %s)\n", err_);        \
			exit(1);                                             \
		}                                                        \
	} while (0)

static void* collectives(void* arg) {
	(void)arg;
	int rc;
	/* allreduce float32 sum and avg */
	float f[1000];
	for (int i = 0; i < 1000; i++) f[i] = (float)(rank_ + 1) * (float)i;
	rc = rt_allreduce(comm_, f, 1000, RT_FLOAT32, RT_SUM, err_, sizeof err_);
	CHECK(rc == RT_OK, "allreduce sum rc=%d", rc);
	float tri = (float)(world_ * (world_ + 1) / 2);
	for (int i = 0; i < 1000; i++) CHECK(f[i] == tri * (float)i, "sum[%d]=%g", i, f[i]);
	/* allreduce int64 max, large enough for the ring algorithm */
	int n = 1 << 16;
	long long* v = malloc(sizeof(long long) * n);
	for (int i = 0; i < n; i++) v[i] = (i % world_ == rank_) ? 1000 + i : -i;
	rc = rt_allreduce(comm_, v, n, RT_INT64, RT_MAX, err_, sizeof err_);
	CHECK(rc == RT_OK, "allreduce max rc=%d", rc);
	for (int i = 0; i < n; i++) CHECK(v[i] == 1000 + i, "max[%d]=%lld", i, v[i]);
	free(v);
	/* broadcast from the last rank */
	double d[7];
	for (int i = 0; i < 7; i++) d[i] = rank_ == world_ - 1 ? 0.5 * i : -1;
	rc = rt_broadcast(comm_, d, 7, RT_FLOAT64, world_ - 1, err_, sizeof err_);
	CHECK(rc == RT_OK, "broadcast rc=%d", rc);
	for (int i = 0; i < 7; i++) CHECK(d[i] == 0.5 * i, "bcast[%d]=%g", i, d[i]);
	/* allgather, in place: send is this rank's block of recv */
	int* g = calloc(3 * world_, sizeof(int));
	for (int i = 0; i < 3; i++) g[3 * rank_ + i] = 10 * rank_ + i;
	rc = rt_allgather(comm_, g + 3 * rank_, g, 3, RT_INT32, err_, sizeof err_);
	CHECK(rc == RT_OK, "allgather rc=%d", rc);
	for (int r = 0; r < world_; r++)
		for (int i = 0; i < 3; i++) CHECK(g[3 * r + i] == 10 * r + i, "gather[%d]", 3 * r + i);
	free(g);
	/* reduce-scatter int32 sum */
	int* s = malloc(sizeof(int) * 2 * world_);
	int rs[2];
	for (int i = 0; i < 2 * world_; i++) s[i] = i * (rank_ + 1);
	rc = rt_reduce_scatter(comm_, s, rs, 2, RT_INT32, RT_SUM, err_, sizeof err_);
	CHECK(rc == RT_OK, "reduce_scatter rc=%d", rc);
	for (int i = 0; i < 2; i++) {
		int want = (2 * rank_ + i) * world_ * (world_ + 1) / 2;
		CHECK(rs[i] == want, "rs[%d]=%d want %d", i, rs[i], want);
	}
	free(s);
	/* all-to-all: block q of rank r holds 100*r+q */
	int* a = malloc(sizeof(int) * world_);
	int* b = malloc(sizeof(int) * world_);
	for (int q = 0; q < world_; q++) a[q] = 100 * rank_ + q;
	rc = rt_alltoall(comm_, a, b, 1, RT_INT32, err_, sizeof err_);
	CHECK(rc == RT_OK, "alltoall rc=%d", rc);
	for (int q = 0; q < world_; q++) CHECK(b[q] == 100 * q + rank_, "alltoall[%d]=%d", q, b[q]);
	/* uneven: rank r sends r+1 elements to everyone */
	int64_t* sc = malloc(sizeof(int64_t) * world_);
	int64_t* rcn = malloc(sizeof(int64_t) * world_);
	int total = 0;
	for (int q = 0; q < world_; q++) {
		sc[q] = rank_ + 1;
		rcn[q] = q + 1;
		total += q + 1;
	}
	int* us = malloc(sizeof(int) * world_ * (rank_ + 1));
	int* ur = malloc(sizeof(int) * total);
	for (int i = 0; i < world_ * (rank_ + 1); i++) us[i] = rank_;
	rc = rt_alltoallv(comm_, us, sc, ur, rcn, RT_INT32, err_, sizeof err_);
	CHECK(rc == RT_OK, "alltoallv rc=%d", rc);
	for (int q = 0, off = 0; q < world_; off += q + 1, q++)
		for (int i = 0; i <= q; i++) CHECK(ur[off + i] == q, "alltoallv from %d: %d", q, ur[off + i]);
	free(a), free(b), free(sc), free(rcn), free(us), free(ur);
	/* point-to-point: send right, receive from any source */
	if (world_ > 1) {
		long long out = 1000 + rank_, in = -1;
		rt_request sreq = 0, rreq = 0;
		rc = rt_isend(comm_, &out, 1, RT_INT64, (rank_ + 1) % world_, 3, &sreq, err_, sizeof err_);
		CHECK(rc == RT_OK && sreq != 0, "isend rc=%d", rc);
		rc = rt_irecv(comm_, &in, 1, RT_INT64, RT_ANY_SOURCE, 3, &rreq, err_, sizeof err_);
		CHECK(rc == RT_OK && rreq != 0, "irecv rc=%d", rc);
		int src = -2, done = 0;
		rc = rt_wait(sreq, -1, NULL, &done, err_, sizeof err_);
		CHECK(rc == RT_OK, "wait send rc=%d", rc);
		rc = rt_wait(rreq, 30000, &src, &done, err_, sizeof err_);
		CHECK(rc == RT_OK && done == 1, "wait recv rc=%d", rc);
		int left = (rank_ + world_ - 1) % world_;
		CHECK(src == left && in == 1000 + left, "received %lld from %d", in, src);
		rc = rt_test(rreq, &done, err_, sizeof err_);
		CHECK(rc == RT_ERR_INVALID, "test of a freed request rc=%d", rc);
		rc = rt_irecv(comm_, &in, 1, RT_INT64, left, 4, &rreq, err_, sizeof err_);
		CHECK(rc == RT_OK, "irecv rc=%d", rc);
		rc = rt_wait(rreq, 1, &src, &done, err_, sizeof err_);
		CHECK(rc == RT_ERR_TIMEOUT && done == 0, "unmatched wait rc=%d", rc);
		CHECK(rt_cancel(rreq) == RT_OK, "cancel");
	}
	rc = rt_monitored_barrier(comm_, 30000, 1, err_, sizeof err_);
	CHECK(rc == RT_OK, "monitored barrier rc=%d", rc);
	rc = rt_barrier(comm_, err_, sizeof err_);
	CHECK(rc == RT_OK, "barrier rc=%d", rc);
	return NULL;
}

int main(void) {
	int rc;
	CHECK(rt_abi_version() == RT_ABI_VERSION, "abi %d", rt_abi_version());
	/* bad overrides fail with a message, not a crash */
	rt_comm bad = 0;
	rc = rt_init("NOT_A_VARIABLE=1", &bad, err_, sizeof err_);
	CHECK(rc == RT_ERR_INIT && strstr(err_, "NOT_A_VARIABLE") != NULL, "bad override rc=%d", rc);
	rc = rt_init(NULL, &comm_, err_, sizeof err_);
	CHECK(rc == RT_OK, "init rc=%d", rc);
	rc = rt_info(comm_, &rank_, &world_, err_, sizeof err_);
	CHECK(rc == RT_OK && world_ >= 1, "info rc=%d", rc);
	/* invalid arguments are refused before anything is sent */
	float x = 1;
	rc = rt_allreduce(comm_, &x, 1, 99, RT_SUM, err_, sizeof err_);
	CHECK(rc == RT_ERR_INVALID && strstr(err_, "dtype") != NULL, "bad dtype rc=%d", rc);
	rc = rt_allreduce(comm_, NULL, 4, RT_FLOAT32, RT_SUM, err_, sizeof err_);
	CHECK(rc == RT_ERR_INVALID, "NULL buffer rc=%d", rc);
	rc = rt_allreduce(12345, &x, 1, RT_FLOAT32, RT_SUM, err_, sizeof err_);
	CHECK(rc == RT_ERR_INVALID, "bad handle rc=%d", rc);
	/* a short error buffer gets a truncated, terminated message */
	char tiny[8];
	rc = rt_allreduce(comm_, &x, 1, RT_FLOAT32, 42, tiny, sizeof tiny);
	CHECK(rc == RT_ERR_INVALID && strlen(tiny) == sizeof tiny - 1, "tiny buffer");

	/* progress: a point with an unmeasured loss; a bad handle is refused */
	rc = rt_record_progress(comm_, 10, 0.5, 1.25, NAN, 0.75, 512, 0.1, err_, sizeof err_);
	CHECK(rc == RT_OK, "record progress rc=%d", rc);
	rc = rt_record_progress(12345, 10, 0.5, 0, NAN, NAN, 0, 0, err_, sizeof err_);
	CHECK(rc == RT_ERR_INVALID, "record progress on a bad handle rc=%d", rc);

	pthread_t t;
	CHECK(pthread_create(&t, NULL, collectives, NULL) == 0, "pthread_create");
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");

	rc = rt_finalize(comm_, err_, sizeof err_);
	CHECK(rc == RT_OK, "finalize rc=%d", rc);
	rc = rt_finalize(comm_, err_, sizeof err_);
	CHECK(rc == RT_ERR_INVALID, "second finalize rc=%d", rc);
	printf("ok rank %d\n", rank_);
	return 0;
}
