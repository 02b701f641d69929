/*
 * ringtail.h: the C ABI of ringtail, a collective-communication runtime for
 * data-parallel training that tolerates stragglers.
 *
 * Build the library with
 *     go build -buildmode=c-shared -o libringtail.so ./integration/capi
 * and link with -lringtail (or dlopen it). Every function is safe to call
 * from any thread. Collectives of one communicator are serialised in the
 * order they are called; every rank must call them in the same order.
 *
 * Every function returns RT_OK (0) or an RT_ERR_* code. Functions that can
 * fail take (errbuf, errlen): on failure a NUL-terminated message, cut to
 * errlen-1 bytes, is written there (errbuf may be NULL). No function
 * aborts the process on a bad argument or a failed peer.
 *
 * The library's Go runtime reads the process environment once, when the
 * library is loaded: variables set later (setenv, os.environ) are not
 * seen. Pass them to rt_init as overrides instead.
 */
#ifndef RINGTAIL_H
#define RINGTAIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version: bumped on any incompatible change. */
#define RT_ABI_VERSION 2

/* Element types. */
#define RT_FLOAT32 1
#define RT_FLOAT64 2
#define RT_INT32 3
#define RT_INT64 4
#define RT_FLOAT16 5
#define RT_BFLOAT16 6
#define RT_UINT8 7

/* Reduction operators. RT_AVG divides the sum by the world size
 * (truncating for integer types). */
#define RT_SUM 1
#define RT_PROD 2
#define RT_MIN 3
#define RT_MAX 4
#define RT_AVG 5

/* Return codes. */
#define RT_OK 0
#define RT_ERR_INVALID 1   /* bad argument or handle; nothing was sent */
#define RT_ERR_INIT 2      /* rt_init failed (configuration, rendezvous) */
#define RT_ERR_PEER_DIED 3 /* a peer's connection closed or reset */
#define RT_ERR_SILENT 4    /* a peer sent nothing, not even heartbeats */
#define RT_ERR_TIMEOUT 5   /* the operation timeout passed */
#define RT_ERR_MISMATCH 6  /* ranks called different collectives */
#define RT_ERR_CANCELED 7  /* rt_abort ended the operation */
#define RT_ERR_PROTOCOL 8  /* malformed or unexpected frame */
#define RT_ERR_CLOSED 9    /* the communicator (or a peer's) was closed */
#define RT_ERR_AUTH 10     /* a peer failed authentication */
#define RT_ERR_LOCAL 11    /* an invalid call on some rank aborted the job */
#define RT_ERR_OTHER 12

/* A communicator handle; 0 is never a valid handle. */
typedef uint64_t rt_comm;

/* A point-to-point request handle (rt_isend, rt_irecv); 0 is never valid. */
typedef uint64_t rt_request;

/* The source of rt_irecv that matches a message from any rank. */
#define RT_ANY_SOURCE (-1)

/* Tags of point-to-point messages lie in 0..RT_MAX_TAG. */
#define RT_MAX_TAG 1073741823

/* rt_abi_version returns RT_ABI_VERSION of the loaded library. */
int rt_abi_version(void);

/*
 * rt_init joins the job described by the environment (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, RINGTAIL_*: see
 * ringtail.ConfigFromEnv) with `overrides` applied on top: NULL or
 * newline-separated NAME=VALUE lines using the same names. It returns when
 * every rank has connected, or fails after RINGTAIL_CONNECT_TIMEOUT.
 */
int rt_init(char* overrides, rt_comm* comm, char* errbuf, size_t errlen);

/* rt_info reports this rank and the world size. */
int rt_info(rt_comm comm, int* rank, int* world, char* errbuf, size_t errlen);

/* rt_allreduce reduces count elements at buf across ranks, in place. */
int rt_allreduce(rt_comm comm, void* buf, int64_t count, int dtype, int op, char* errbuf, size_t errlen);

/* rt_broadcast copies root's count elements at buf to every rank's buf. */
int rt_broadcast(rt_comm comm, void* buf, int64_t count, int dtype, int root, char* errbuf, size_t errlen);

/* rt_allgather concatenates every rank's count elements at send, in rank
 * order, into recv (world*count elements). send is not modified; it may
 * lie inside recv. */
int rt_allgather(rt_comm comm, void* send, void* recv, int64_t count, int dtype, char* errbuf, size_t errlen);

/* rt_reduce_scatter reduces send (world*recvcount elements) across ranks
 * and leaves block `rank` of the result in recv (recvcount elements). send
 * is not modified; recv may lie inside send. */
int rt_reduce_scatter(rt_comm comm, void* send, void* recv, int64_t recvcount, int dtype, int op, char* errbuf, size_t errlen);

/* rt_barrier returns once every rank has entered it. */
int rt_barrier(rt_comm comm, char* errbuf, size_t errlen);

/* rt_alltoall sends block r of send (count elements) to rank r and
 * receives rank r's block for this rank into block r of recv; send and recv
 * hold world*count elements. Every rank passes the same count. */
int rt_alltoall(rt_comm comm, void* send, void* recv, int64_t count, int dtype, char* errbuf, size_t errlen);

/* rt_alltoallv is rt_alltoall with blocks of any size: send_counts[r]
 * elements go to rank r, recv_counts[r] come from rank r, blocks back to
 * back in rank order (both arrays hold world entries). What a sends to b
 * must be what b expects from a: the ranks exchange their counts first,
 * and a disagreement fails the communicator on every rank with a message
 * naming both ranks and both counts (RT_ERR_LOCAL), before data moves. */
int rt_alltoallv(rt_comm comm, void* send, int64_t* send_counts, void* recv, int64_t* recv_counts,
                 int dtype, char* errbuf, size_t errlen);

/*
 * Point-to-point messages. rt_isend queues count elements at buf for rank
 * peer with tag and returns at once; messages to one rank leave in the
 * order they were queued, and a send never waits for the receiver to post
 * (the receiver buffers it). rt_irecv posts a receive of one message from
 * rank source (or RT_ANY_SOURCE) with tag into buf; receives are matched
 * in the order they were posted, messages with one source and tag in the
 * order they were sent. A message whose size or dtype differs from the
 * receive's fails that receive (RT_ERR_MISMATCH) and nothing else.
 * buf must stay valid and untouched until the request has finished.
 * Point-to-point traffic runs beside collectives: neither waits for the
 * other.
 */
int rt_isend(rt_comm comm, void* buf, int64_t count, int dtype, int peer, int tag, rt_request* req, char* errbuf,
             size_t errlen);
int rt_irecv(rt_comm comm, void* buf, int64_t count, int dtype, int source, int tag, rt_request* req, char* errbuf,
             size_t errlen);

/* rt_wait waits at most timeout_ms (negative: without limit) for req. If
 * req did not finish in time it sets *done to 0, returns RT_ERR_TIMEOUT,
 * and req stays valid (wait again, or rt_cancel it). Otherwise it sets
 * *done to 1, frees req, returns the request's result and, for a receive,
 * stores the sender's rank in *source. source and done may be NULL. */
int rt_wait(rt_request req, int64_t timeout_ms, int* source, int* done, char* errbuf, size_t errlen);

/* rt_test sets *done to 1 if req has finished (rt_wait then returns at
 * once), else 0. It does not free req. */
int rt_test(rt_request req, int* done, char* errbuf, size_t errlen);

/* rt_cancel withdraws a receive no message has matched yet (its buffer
 * is free again), or waits for a send or matched receive to finish; then
 * frees req. */
int rt_cancel(rt_request req);

/* rt_monitored_barrier is a barrier that names the ranks that did not
 * arrive: rank 0 waits at most timeout_ms for every rank (only for the
 * first missing one unless wait_all), then tells every rank the verdict.
 * Missing ranks give RT_ERR_TIMEOUT with "Rank(s) ... failed to pass
 * monitoredBarrier in N ms" on rank 0 and, relayed, on the ranks that
 * arrived. The communicator stays usable. */
int rt_monitored_barrier(rt_comm comm, int64_t timeout_ms, int wait_all, char* errbuf, size_t errlen);

/* rt_abort makes the operation in flight (and every later one) fail with
 * RT_ERR_CANCELED at once, and every point-to-point request finish with
 * RT_ERR_CLOSED; call rt_finalize afterwards. */
int rt_abort(rt_comm comm);

/* rt_finalize leaves the job and frees the handle; it waits for the
 * operation in flight, if any (call rt_abort first not to wait). */
int rt_finalize(rt_comm comm, char* errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* RINGTAIL_H */
