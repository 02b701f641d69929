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
#define RT_ABI_VERSION 1

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

/* rt_abort makes the operation in flight (and every later one) fail with
 * RT_ERR_CANCELED at once; call rt_finalize afterwards. */
int rt_abort(rt_comm comm);

/* rt_finalize leaves the job and frees the handle; it waits for the
 * operation in flight, if any (call rt_abort first not to wait). */
int rt_finalize(rt_comm comm, char* errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* RINGTAIL_H */
