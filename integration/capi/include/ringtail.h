/*
 * ringtail.h: the C ABI of ringtail, a collective-communication runtime for
 * data-parallel training that tolerates stragglers.
 *
 * Build the library with
 *     go build -buildmode=c-shared -o libringtail.so ./integration/capi
 * and link with -lringtail -Wl,--allow-shlib-undefined (or dlopen it with
 * RTLD_LAZY). The library carries the NVML binding, whose nvml* symbols stay
 * undefined until it loads libnvidia-ml.so.1 itself (dlopen, RTLD_GLOBAL);
 * they are bound lazily and never called on a host without the driver.
 * Building with -tags ringtail_nonvml leaves NVML out (no undefined
 * symbols, no GPU telemetry). Every function is safe to call
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

/* ABI version: bumped on any incompatible change. New functions and new
 * RT_ERR_* codes appended after the existing ones are compatible changes
 * (no bump): a caller that does not know a code treats it as it treats
 * RT_ERR_OTHER. RT_ERR_INTEGRITY came within version 2. */
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
#define RT_ERR_INTEGRITY 13 /* a frame between hosts failed its integrity
                             * check (changed on the path; nothing of it
                             * was applied): the message names the link */

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

/* rt_call_site names the call site of this communicator's coming
 * collectives (NULL or "": none, the default), for the call-site check of
 * RINGTAIL_DEBUG=detail: before each collective the ranks compare their
 * call sites, and a rank that skipped one of two calls of the same shape
 * fails every rank with a message naming both sites. Ranks must name the
 * same call the same way (e.g. "train.py:42 (step)"). Without it the
 * check sees the same site for every call made through this library. */
int rt_call_site(rt_comm comm, char* site, char* errbuf, size_t errlen);

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
 * arrived ("Rank R successfully reached monitoredBarrier, but received
 * errors while waiting for send/recv from rank 0: ..."), as
 * ProcessGroupGloo words them; a timeout_ms of 0 leaves rank 0 no time
 * ("Rank 0 timed out in monitoredBarrier after 0 ms."). Ranks other than
 * 0 wait for the verdict up to the operation timeout. The communicator
 * stays usable. */
int rt_monitored_barrier(rt_comm comm, int64_t timeout_ms, int wait_all, char* errbuf, size_t errlen);

/*
 * The straggler driver (straggler/driver) on flat float32 buffers, for
 * training loops outside Go (the PyTorch DDP hook of ringtail_torch). One
 * rt_straggler per training run on a communicator that runs nothing else
 * meanwhile: each iteration the caller hands in its gradient sum with
 * rt_straggler_step; the driver reduces it under the step's plan (the
 * ring, the exact overlap mode, or eviction: slow ranks become children
 * computing at their own pace, their gradients folded by a parent within
 * a staleness bound) and decides the next plan. Every decision is made in
 * Go by straggler.Policy; the caller only passes buffers and reads what
 * happened in an rt_straggler_result. A handle is used by one thread at a
 * time (calls on it are serialised).
 */

/* A straggler driver handle; 0 is never valid. */
typedef uint64_t rt_straggler;

/* Flags of rt_straggler_open. */
#define RT_STRAGGLER_EQUAL_SHARES 1 /* no shares, no budget: the caller's batches are fixed */
#define RT_STRAGGLER_PROBE 2        /* measure the links first (a collective: every rank) */
#define RT_STRAGGLER_SAMPLED 4      /* a sampler splits each batch by the plan's shares (rt_straggler_shares): no budget */

/* Roles of a rank in a step. */
#define RT_ROLE_MEMBER 0 /* in the ring, no children */
#define RT_ROLE_PARENT 1 /* in the ring, folds children's gradients */
#define RT_ROLE_CHILD 2  /* evicted: computes at its own pace */

/* Modes of a step's reduction. */
#define RT_MODE_RING 0    /* the plain ring over every rank */
#define RT_MODE_OVERLAP 1 /* the exact mode: the late rank joins a reduce-scatter in progress */
#define RT_MODE_EVICT 2   /* evicted ranks are children of members */
#define RT_MODE_EXCLUDE 3 /* evicted ranks compute nothing; their rows go to the members */

/* What a step (or flush) did. */
typedef struct {
	int64_t step;        /* the member step executed (a child: the version of its parameters) */
	int64_t applied;     /* samples whose gradients the buffer now sums (0: apply nothing) */
	int64_t next_step;   /* the step whose batch this rank computes next */
	uint64_t evicted;    /* bit r set: rank r is a child in the next plan (ranks < 64) */
	double staleness;    /* mean staleness, in steps, of the child gradients folded */
	double wait_s;       /* seconds spent in the call */
	int32_t role;        /* RT_ROLE_* of this rank in the step executed */
	int32_t mode;        /* RT_MODE_* of the step executed */
	int32_t folded;      /* child gradients folded into the step */
	int32_t replaced;    /* 1: the parent's state replaced the caller's (a child) */
	int32_t done;        /* 1: a child received the final state; call rt_straggler_flush */
	int32_t next_role;   /* RT_ROLE_* in the next step */
	int32_t next_mode;   /* RT_MODE_* of the next member step */
	int32_t staleness_bound; /* K of the next plan (evict mode), else 0 */
	int32_t late;        /* the rank the next plan overlaps last (RT_MODE_OVERLAP), else -1 */
	int32_t reserved;
} rt_straggler_result;

/* rt_straggler_open starts a driver on comm for a payload of `payload`
 * float32s, with the policy named `policy` ("bsp", "star", "exact",
 * "shares", "adaptive": straggler.Preset) over a global batch of
 * global_batch samples (the sum of every rank's samples per step).
 * timeout_ms bounds the driver's waits for a child's gradient or a
 * parent's state (0: 5 minutes). No communication unless
 * RT_STRAGGLER_PROBE. */
int rt_straggler_open(rt_comm comm, int64_t payload, char* policy, int64_t global_batch, int flags,
                      int64_t timeout_ms, rt_straggler* out, char* errbuf, size_t errlen);

/* rt_straggler_open_memory is rt_straggler_open whose shares policy plans
 * under every rank's device memory (AntDT-DD, Eq. 4: straggler.Memory):
 * micro_caps holds n (the world size) largest micro-batches in samples,
 * rank by rank (0: unbounded; every rank passes the same), and no rank's
 * share exceeds max_accum micro-batches of its cap (0: the default, 8).
 * Split a share into micro-batches with rt_micro_split. */
int rt_straggler_open_memory(rt_comm comm, int64_t payload, char* policy, int64_t global_batch, int flags,
                             int64_t timeout_ms, int64_t* micro_caps, int64_t n, int64_t max_accum,
                             rt_straggler* out, char* errbuf, size_t errlen);

/* rt_micro_cap writes the largest micro-batch that fits free_bytes of
 * device memory at sample_bytes per sample (95% of it:
 * balance.MaxBatchFromMemory); RT_ERR_INVALID when not one sample fits. */
int rt_micro_cap(int64_t free_bytes, int64_t sample_bytes, int64_t* out, char* errbuf, size_t errlen);

/* rt_parse_size writes rank's size in bytes of a size setting: one size
 * for every rank, or one per rank comma-separated (world of them), each a
 * number of bytes or one with a suffix (KiB, MiB, GiB, TiB, KB, MB, GB,
 * TB), as ringtail-train reads RINGTAIL_MEM_CAP; 0 when spec is empty. */
int rt_parse_size(char* spec, int64_t rank, int64_t world, int64_t* out, char* errbuf, size_t errlen);

/* rt_micro_split splits a share of rows into the fewest near-equal
 * micro-batches of at most cap rows (0: one micro-batch;
 * balance.SplitShare): their sizes go to sizes (room for `room`), their
 * number to count. */
int rt_micro_split(int64_t rows, int64_t cap, int64_t* sizes, int64_t room, int64_t* count, char* errbuf, size_t errlen);

/* rt_straggler_shares writes the next step's shares (samples of every
 * rank, n = the world size) to out: with RT_STRAGGLER_SAMPLED, the
 * caller's sampler splits the next global batch by them, and the caller
 * passes its own share's samples to rt_straggler_step with its gradient
 * summed (not averaged) over them. */
int rt_straggler_shares(rt_straggler h, int64_t* out, int64_t n, char* errbuf, size_t errlen);

/* rt_straggler_set_state registers the training state: `total` float32s at
 * state, the parameters first (`params` of them), then the rest (optimizer
 * state). A parent sends the parameters to its children, and the whole
 * state when a child rejoins or training ends; a child's state is
 * overwritten in place (result.replaced). The memory must stay valid until
 * rt_straggler_close or the next rt_straggler_set_state; call it before
 * the first step. */
int rt_straggler_set_state(rt_straggler h, float* state, int64_t params, int64_t total, char* errbuf, size_t errlen);

/* rt_straggler_step hands in one iteration: grad holds the payload (the sum
 * of the gradients of `samples` samples; NULL: zeros), compute_us and
 * arrival_us the time spent computing it and since the previous step
 * returned. A member reduces it under the step's plan; a child sends it to
 * its parent and returns at once. When this rank was a member of the step
 * (result.role is not RT_ROLE_CHILD), grad then holds the step's sum over
 * result.applied samples (all zeros, beyond what the callers added to
 * their payloads, when no rank applied a sample). */
int rt_straggler_step(rt_straggler h, float* grad, int64_t samples, int64_t compute_us, int64_t arrival_us,
                      rt_straggler_result* result, char* errbuf, size_t errlen);

/* rt_straggler_flush ends training (every rank calls it after its last
 * step; a child after a step returned done): members send children the
 * final state and fold what they still send; then one reduction over every
 * rank. When result.applied > 0, grad (payload float32s, not NULL) holds
 * the sum of those late gradients: apply them as one more update. */
int rt_straggler_flush(rt_straggler h, float* grad, rt_straggler_result* result, char* errbuf, size_t errlen);

/* rt_straggler_close frees the handle (no communication). */
int rt_straggler_close(rt_straggler h, char* errbuf, size_t errlen);

/* rt_record_progress reports a point of the training loop's progress to
 * this rank's observability (the live dashboard's training curve and
 * header, the ringtail_train_* metrics, the timeline): steps done, epochs
 * done (fractional), training time so far in seconds (0: the
 * communicator's clock), training loss, held-out accuracy in [0, 1],
 * global samples a second and mean step time in seconds since the last
 * point. Pass NAN for a loss or accuracy not measured at this point, 0
 * for other unknowns. Usually rank 0 reports. No communication; does
 * nothing unless the communicator records (RINGTAIL_METRICS_ADDR or
 * RINGTAIL_TIMELINE, as ringtail run --dashboard sets). */
int rt_record_progress(rt_comm comm, int64_t step, double epoch, double elapsed_s, double loss, double accuracy,
                       double samples_per_sec, double step_time_s, char* errbuf, size_t errlen);

/* rt_observe_with makes observer, another communicator of this process,
 * record comm's straggler steps (rt_straggler_*) and progress
 * (rt_record_progress) on its dashboard, metrics and timeline. A rank's
 * metrics address and timeline belong to the process: open the first
 * communicator with them and the others with RINGTAIL_METRICS_ADDR= and
 * RINGTAIL_TIMELINE= (empty overrides), naming the first as their
 * observer, before their first straggler driver. When the observer is
 * finalized, comm records nothing more. */
int rt_observe_with(rt_comm comm, rt_comm observer, char* errbuf, size_t errlen);

/* rt_abort makes the operation in flight (and every later one) fail with
 * RT_ERR_CANCELED at once, and every point-to-point request finish with
 * RT_ERR_CLOSED; call rt_finalize afterwards. */
int rt_abort(rt_comm comm);

/* rt_finalize leaves the job and frees the handle; it waits for the
 * operation in flight, if any (call rt_abort first not to wait). */
int rt_finalize(rt_comm comm, char* errbuf, size_t errlen);

/*
 * Gradient coding (gradcode/coded) on flat float32 buffers: a training
 * loop whose data cannot move, or whose ranks may stop outright, splits
 * its data into the plan's k partitions and holds only this rank's
 * (rt_coded_partitions; every partition on s+1 ranks). Each step it
 * computes the gradient of each of its partitions and calls rt_coded_step,
 * which encodes this rank's payload, and returns the gradient sum over
 * all k partitions, decoded from the first n-s ranks' payloads (or the
 * first whole group of the plan): up to s ranks late or stopped do not
 * hold the step up. Every rank gets the same bits. A handle is used by
 * one thread at a time (calls on it are serialised); the communicator
 * runs nothing else while a step is in flight.
 */

/* A coded-allreduce handle; 0 is never valid. */
typedef uint64_t rt_coded;

/* rt_coded_open plans coding for comm (no communication): gradients of
 * len float32s, s stragglers tolerated, scheme "hetero" (NULL or ""),
 * "group" or "cyclic", throughputs the ranks' relative speeds (world-size
 * doubles, the same on every rank; NULL: equal), seed the plan's
 * randomness (the same on every rank). timeout_ms bounds one step (0:
 * 30 s). */
int rt_coded_open(rt_comm comm, int64_t len, int s, char* scheme, double* throughputs, int64_t seed,
                  int64_t timeout_ms, rt_coded* out, char* errbuf, size_t errlen);

/* rt_coded_partitions writes the plan's partition count to *k and this
 * rank's partitions (indices in 0..k-1, in the order rt_coded_step takes
 * their gradients) to parts, room for cap of them; *nparts is their
 * number (RT_ERR_INVALID when cap is too small: *nparts says how many). */
int rt_coded_partitions(rt_coded h, int64_t* k, int64_t* parts, int64_t cap, int64_t* nparts, char* errbuf, size_t errlen);

/* rt_coded_step runs one coded step: grads holds this rank's partition
 * gradients, nparts times len float32s in rt_coded_partitions' order;
 * sum (len float32s) receives the gradient sum over all k partitions. */
int rt_coded_step(rt_coded h, float* grads, float* sum, char* errbuf, size_t errlen);

/* rt_coded_close frees the handle. */
int rt_coded_close(rt_coded h, char* errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* RINGTAIL_H */
