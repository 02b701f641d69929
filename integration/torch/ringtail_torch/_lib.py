"""ctypes binding of libringtail (integration/capi, include/ringtail.h).

The library is found, in order, at ``$RINGTAIL_LIB``, next to this file
(``ringtail_torch/libringtail.so``, where ``build_lib.sh`` and ``pip
install`` put it), or on the loader's search path (``libringtail.so``).
Calls release the GIL (ctypes does that for every CDLL function), so a
collective in flight never blocks other Python threads.
"""

import ctypes
import os
import threading
import weakref

# Element type and op codes of ringtail.h.
RT_FLOAT32, RT_FLOAT64, RT_INT32, RT_INT64, RT_FLOAT16, RT_BFLOAT16, RT_UINT8 = range(1, 8)
RT_SUM, RT_PROD, RT_MIN, RT_MAX, RT_AVG = range(1, 6)
ABI_VERSION = 2
RT_ANY_SOURCE = -1
RT_MAX_TAG = (1 << 30) - 1
RT_ERR_TIMEOUT = 5

# Return codes of ringtail.h, by value (tests/test_errors.py checks them
# against the header). 13, RT_ERR_INTEGRITY: a frame between hosts failed
# its integrity check, the message naming the link.
ERROR_NAMES = {
    1: "invalid argument",
    2: "init failed",
    3: "peer died",
    4: "peer silent",
    5: "timeout",
    6: "mismatch",
    7: "canceled",
    8: "protocol",
    9: "closed",
    10: "auth",
    11: "local",
    12: "other",
    13: "frame integrity",
}


class RingtailError(RuntimeError):
    """A failed ringtail call: ``code`` is the RT_ERR_* value, ``kind`` its
    name (``"peer died"``, ``"timeout"``, ...); the message is the
    library's, naming the rank to blame where there is one. A message the
    communicator wrote ("ringtail rank 0: Timed out in Barrier: rank 0 was
    waiting on rank 2") names ringtail, the rank and the failure already
    and is kept as is; any other gets "ringtail: <kind>: " in front, once."""

    def __init__(self, code, message):
        self.code = code
        self.kind = ERROR_NAMES.get(code, "code %d" % code)
        if not message.startswith("ringtail rank "):
            if message.startswith("ringtail: "):
                message = message[len("ringtail: "):]
            message = "ringtail: %s: %s" % (self.kind, message)
        super().__init__(message)


_ERRLEN = 1024
_load_lock = threading.Lock()
_loaded = {}


def library_path():
    """Returns the path libringtail is loaded from (see the module doc)."""
    env = os.environ.get("RINGTAIL_LIB")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libringtail.so")
    if os.path.exists(here):
        return here
    return "libringtail.so"


def load():
    """Loads libringtail once per process and returns the ctypes handle."""
    with _load_lock:
        if "lib" in _loaded:
            return _loaded["lib"]
        path = library_path()
        try:
            # Lazy binding: the library's NVML symbols (go-nvml) resolve only
            # when it loads libnvidia-ml.so.1 itself, and are never called on
            # a host without the NVIDIA driver (integration/capi/doc.go).
            lib = ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        except OSError as e:
            raise RingtailError(
                2,
                "cannot load %s (%s): build it with integration/torch/build_lib.sh "
                "or point RINGTAIL_LIB at it" % (path, e),
            ) from None
        u64, i64, i, p, sz = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        cp = ctypes.c_char_p
        sigs = {
            "rt_abi_version": [],
            "rt_init": [cp, ctypes.POINTER(u64), p, sz],
            "rt_info": [u64, ctypes.POINTER(i), ctypes.POINTER(i), p, sz],
            "rt_allreduce": [u64, p, i64, i, i, p, sz],
            "rt_broadcast": [u64, p, i64, i, i, p, sz],
            "rt_allgather": [u64, p, p, i64, i, p, sz],
            "rt_reduce_scatter": [u64, p, p, i64, i, i, p, sz],
            "rt_barrier": [u64, p, sz],
            "rt_alltoall": [u64, p, p, i64, i, p, sz],
            "rt_alltoallv": [u64, p, ctypes.POINTER(i64), p, ctypes.POINTER(i64), i, p, sz],
            "rt_isend": [u64, p, i64, i, i, i, ctypes.POINTER(u64), p, sz],
            "rt_irecv": [u64, p, i64, i, i, i, ctypes.POINTER(u64), p, sz],
            "rt_wait": [u64, i64, ctypes.POINTER(i), ctypes.POINTER(i), p, sz],
            "rt_test": [u64, ctypes.POINTER(i), p, sz],
            "rt_cancel": [u64],
            "rt_monitored_barrier": [u64, i64, i, p, sz],
            "rt_abort": [u64],
            "rt_finalize": [u64, p, sz],
            "rt_call_site": [u64, cp, p, sz],
        }
        d = ctypes.c_double
        # Added without an ABI change: a library built before it lacks it.
        if hasattr(lib, "rt_record_progress"):
            sigs["rt_record_progress"] = [u64, i64, d, d, d, d, d, d, p, sz]
            sigs["rt_observe_with"] = [u64, u64, p, sz]
        missing = [name for name in sigs if not hasattr(lib, name)]
        if missing:
            raise RingtailError(
                2,
                "%s is older than this ringtail_torch (it lacks %s): rebuild it with "
                "integration/torch/build_lib.sh, or point RINGTAIL_LIB at a current one" % (path, ", ".join(missing)),
            )
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = i
        v = lib.rt_abi_version()
        if v != ABI_VERSION:
            raise RingtailError(2, "%s has ABI version %d, this package wants %d: rebuild it" % (path, v, ABI_VERSION))
        _loaded["lib"] = lib
        return lib


def _call(fn, *args):
    buf = ctypes.create_string_buffer(_ERRLEN)
    rc = fn(*args, buf, _ERRLEN)
    if rc != 0:
        raise RingtailError(rc, buf.value.decode("utf-8", "replace"))


# The communicator of this process that serves its observability (the
# metrics address and timeline ringtail run gives the rank): a weak
# reference, or nothing. See Comm.
_OBSERVER = []
_OBSERVE_VARS = ("RINGTAIL_METRICS_ADDR", "RINGTAIL_TIMELINE")


def _observer():
    """The live communicator serving this process's observability, or None."""
    c = _OBSERVER[0]() if _OBSERVER else None
    return c if c is not None and c._h else None


class Comm:
    """One ringtail communicator: a thin, thread-safe wrapper of the C ABI
    taking raw addresses and element counts.

    A rank's metrics address and timeline (RINGTAIL_METRICS_ADDR,
    RINGTAIL_TIMELINE) belong to the process: the first communicator opened
    with them serves them; one opened while it lives (a subgroup's, a
    straggler hook's) runs without and has its straggler steps and progress
    recorded by the first (rt_observe_with), so they reach the dashboard."""

    def __init__(self, overrides=None):
        self._lib = load()
        overrides = dict(overrides or {})
        observing = any(overrides.get(k, os.environ.get(k)) for k in _OBSERVE_VARS)
        observer = _observer() if observing and hasattr(self._lib, "rt_observe_with") else None
        if observer is not None:
            for k in _OBSERVE_VARS:
                overrides[k] = ""
        text = "\n".join("%s=%s" % kv for kv in sorted(overrides.items()))
        h = ctypes.c_uint64(0)
        _call(self._lib.rt_init, text.encode(), ctypes.byref(h))
        self._h = h.value
        r, w = ctypes.c_int(), ctypes.c_int()
        _call(self._lib.rt_info, self._h, ctypes.byref(r), ctypes.byref(w))
        self.rank, self.size = r.value, w.value
        if observer is not None:
            _call(self._lib.rt_observe_with, self._h, observer._h)
        elif observing:
            _OBSERVER[:] = [weakref.ref(self)]

    def allreduce(self, ptr, count, dtype, op):
        _call(self._lib.rt_allreduce, self._h, ptr, count, dtype, op)

    def broadcast(self, ptr, count, dtype, root):
        _call(self._lib.rt_broadcast, self._h, ptr, count, dtype, root)

    def allgather(self, send, recv, count, dtype):
        _call(self._lib.rt_allgather, self._h, send, recv, count, dtype)

    def reduce_scatter(self, send, recv, recv_count, dtype, op):
        _call(self._lib.rt_reduce_scatter, self._h, send, recv, recv_count, dtype, op)

    def call_site(self, site):
        """Names the call site of the coming collectives (None: none), for
        the call-site check of RINGTAIL_DEBUG=detail."""
        _call(self._lib.rt_call_site, self._h, site.encode() if site else None)

    def barrier(self):
        _call(self._lib.rt_barrier, self._h)

    def alltoall(self, send, recv, count, dtype):
        """count elements per rank; send and recv hold world*count."""
        _call(self._lib.rt_alltoall, self._h, send, recv, count, dtype)

    def alltoallv(self, send, send_counts, recv, recv_counts, dtype):
        n = len(send_counts)
        sc = (ctypes.c_int64 * n)(*send_counts)
        rc = (ctypes.c_int64 * len(recv_counts))(*recv_counts)
        _call(self._lib.rt_alltoallv, self._h, send, sc, recv, rc, dtype)

    def isend(self, ptr, count, dtype, peer, tag):
        """Queues a send; returns a Request (the buffer must stay alive and
        unchanged until it has finished)."""
        h = ctypes.c_uint64(0)
        _call(self._lib.rt_isend, self._h, ptr, count, dtype, peer, tag, ctypes.byref(h))
        return Request(self._lib, h.value)

    def irecv(self, ptr, count, dtype, source, tag):
        """Posts a receive (source may be RT_ANY_SOURCE); returns a Request."""
        h = ctypes.c_uint64(0)
        _call(self._lib.rt_irecv, self._h, ptr, count, dtype, source, tag, ctypes.byref(h))
        return Request(self._lib, h.value)

    def monitored_barrier(self, timeout_ms, wait_all):
        _call(self._lib.rt_monitored_barrier, self._h, timeout_ms, 1 if wait_all else 0)

    def record_progress(self, step, epoch, elapsed, loss, accuracy, samples_per_sec, step_time):
        """rt_record_progress: a point of the training's progress (NaN for
        a loss or accuracy not measured, 0 for other unknowns)."""
        fn = getattr(self._lib, "rt_record_progress", None)
        if fn is None or fn.argtypes is None:
            raise RingtailError(1, "%s predates rt_record_progress: rebuild it (integration/torch/build_lib.sh)" % library_path())
        _call(fn, self._h, step, epoch, elapsed, loss, accuracy, samples_per_sec, step_time)

    def abort(self):
        if self._h:
            self._lib.rt_abort(self._h)

    def close(self):
        """Leaves the job; safe to call twice."""
        h, self._h = self._h, 0
        if h:
            _call(self._lib.rt_finalize, h)


class Request:
    """A point-to-point request of the C ABI (rt_isend, rt_irecv). wait()
    returns the sender's rank (receives) once it finished, or None when
    timeout_ms passed first (the request stays valid); a failed request
    raises RingtailError. Thread-safe; the handle is freed once."""

    def __init__(self, lib, handle):
        self._lib, self._h = lib, handle
        self._lock = threading.Lock()
        self.finished, self.source, self.error = False, -1, None

    def wait(self, timeout_ms=-1):
        with self._lock:
            if not self.finished:
                src, done = ctypes.c_int(-1), ctypes.c_int(0)
                buf = ctypes.create_string_buffer(_ERRLEN)
                rc = self._lib.rt_wait(self._h, int(timeout_ms), ctypes.byref(src), ctypes.byref(done), buf, _ERRLEN)
                if not done.value:
                    if rc == RT_ERR_TIMEOUT:
                        return None
                    raise RingtailError(rc, buf.value.decode("utf-8", "replace"))
                self.finished, self.source = True, src.value
                if rc != 0:
                    self.error = RingtailError(rc, buf.value.decode("utf-8", "replace"))
        if self.error is not None:
            raise self.error
        return self.source

    def done(self):
        """Whether the request has finished (wait would return at once).
        Never blocks, even while another thread waits."""
        if self.finished:
            return True
        d = ctypes.c_int(0)
        rc = self._lib.rt_test(self._h, ctypes.byref(d), None, 0)
        return rc != 0 or bool(d.value)  # an error: freed meanwhile by wait

    def cancel(self):
        """Withdraws a receive nothing matched yet, or waits for the request
        to finish; frees it. Safe after wait."""
        with self._lock:
            if not self.finished:
                self._lib.rt_cancel(self._h)
                self.finished = True
                if self.error is None:
                    self.error = RingtailError(7, "request canceled")


# Straggler driver (rt_straggler_*, ringtail.h): flags, roles and modes.
RT_STRAGGLER_EQUAL_SHARES, RT_STRAGGLER_PROBE, RT_STRAGGLER_SAMPLED = 1, 2, 4
RT_ROLE_MEMBER, RT_ROLE_PARENT, RT_ROLE_CHILD = 0, 1, 2
RT_MODE_RING, RT_MODE_OVERLAP, RT_MODE_EVICT, RT_MODE_EXCLUDE = 0, 1, 2, 3
ROLE_NAMES = {RT_ROLE_MEMBER: "member", RT_ROLE_PARENT: "parent", RT_ROLE_CHILD: "child"}
MODE_NAMES = {RT_MODE_RING: "ring", RT_MODE_OVERLAP: "overlap", RT_MODE_EVICT: "evict", RT_MODE_EXCLUDE: "exclude"}


class StragglerResult(ctypes.Structure):
    """rt_straggler_result: what a straggler step or flush did."""

    _fields_ = [
        ("step", ctypes.c_int64),
        ("applied", ctypes.c_int64),
        ("next_step", ctypes.c_int64),
        ("evicted", ctypes.c_uint64),
        ("staleness", ctypes.c_double),
        ("wait_s", ctypes.c_double),
        ("role", ctypes.c_int32),
        ("mode", ctypes.c_int32),
        ("folded", ctypes.c_int32),
        ("replaced", ctypes.c_int32),
        ("done", ctypes.c_int32),
        ("next_role", ctypes.c_int32),
        ("next_mode", ctypes.c_int32),
        ("staleness_bound", ctypes.c_int32),
        ("late", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


def _straggler_lib():
    """The library with rt_straggler_* typed; a clear error when it
    predates them."""
    lib = load()
    with _load_lock:
        if "straggler" in _loaded:
            return lib
        u64, i64, i, p, sz = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        res = ctypes.POINTER(StragglerResult)
        sigs = {
            "rt_straggler_open": [u64, i64, ctypes.c_char_p, i64, i, i64, ctypes.POINTER(u64), p, sz],
            "rt_straggler_set_state": [u64, p, i64, i64, p, sz],
            "rt_straggler_step": [u64, p, i64, i64, i64, res, p, sz],
            "rt_straggler_flush": [u64, p, res, p, sz],
            "rt_straggler_shares": [u64, ctypes.POINTER(i64), i64, p, sz],
            "rt_straggler_close": [u64, p, sz],
            "rt_straggler_open_memory": [u64, i64, ctypes.c_char_p, i64, i, i64, ctypes.POINTER(i64), i64, i64,
                                         ctypes.POINTER(u64), p, sz],
            "rt_micro_cap": [i64, i64, ctypes.POINTER(i64), p, sz],
            "rt_micro_split": [i64, i64, ctypes.POINTER(i64), i64, ctypes.POINTER(i64), p, sz],
            "rt_parse_size": [ctypes.c_char_p, i64, i64, ctypes.POINTER(i64), p, sz],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name, None)
            if fn is None:
                raise RingtailError(2, "%s has no %s: rebuild it (integration/torch/build_lib.sh)" % (library_path(), name))
            fn.argtypes = args
            fn.restype = i
        _loaded["straggler"] = True
    return lib


class Straggler:
    """One straggler driver (rt_straggler_*) on a Comm: flat float32
    buffers in, an rt_straggler_result out. Used by one thread at a time
    (the library serialises calls on a handle anyway)."""

    def __init__(self, comm, payload, policy, global_batch, flags=RT_STRAGGLER_EQUAL_SHARES, timeout_ms=0,
                 micro_caps=None, max_accum=0):
        """micro_caps (every rank's largest micro-batch, 0: unbounded; the
        same list on every rank) plans the shares under device memory
        (rt_straggler_open_memory), within max_accum micro-batches of each
        cap (0: the library's default)."""
        self._lib = _straggler_lib()
        h = ctypes.c_uint64(0)
        if micro_caps is None:
            _call(self._lib.rt_straggler_open, comm._h, int(payload), policy.encode(), int(global_batch), int(flags),
                  int(timeout_ms), ctypes.byref(h))
        else:
            caps = (ctypes.c_int64 * len(micro_caps))(*[int(c) for c in micro_caps])
            _call(self._lib.rt_straggler_open_memory, comm._h, int(payload), policy.encode(), int(global_batch),
                  int(flags), int(timeout_ms), caps, len(micro_caps), int(max_accum), ctypes.byref(h))
        self._h = h.value
        self.payload = int(payload)
        self._res = StragglerResult()

    def set_state(self, ptr, params, total):
        """Registers total float32s at ptr (parameters first, params of
        them) as the training state; the memory must outlive the driver."""
        _call(self._lib.rt_straggler_set_state, self._h, ptr, int(params), int(total))

    def step(self, grad_ptr, samples, compute_us, arrival_us):
        """One iteration (grad_ptr None: a zero gradient); returns the
        result, reused by the next call."""
        _call(self._lib.rt_straggler_step, self._h, grad_ptr, int(samples), int(compute_us), int(arrival_us),
              ctypes.byref(self._res))
        return self._res

    def flush(self, grad_ptr):
        _call(self._lib.rt_straggler_flush, self._h, grad_ptr, ctypes.byref(self._res))
        return self._res

    def shares(self, world):
        """The next step's shares (samples of each of world ranks)."""
        out = (ctypes.c_int64 * world)()
        _call(self._lib.rt_straggler_shares, self._h, out, int(world))
        return [int(x) for x in out]

    def close(self):
        """Frees the handle; safe to call twice."""
        h, self._h = self._h, 0
        if h:
            _call(self._lib.rt_straggler_close, h)


def micro_cap(free_bytes, sample_bytes):
    """The largest micro-batch that fits free_bytes at sample_bytes a
    sample (95% of it, balance.MaxBatchFromMemory, through rt_micro_cap);
    RingtailError when not one sample fits."""
    lib = _straggler_lib()
    out = ctypes.c_int64(0)
    _call(lib.rt_micro_cap, int(free_bytes), int(sample_bytes), ctypes.byref(out))
    return int(out.value)


def micro_split(rows, cap):
    """The sizes of the fewest near-equal micro-batches of at most cap rows
    (0: one) that rows split into (balance.SplitShare, through
    rt_micro_split)."""
    lib = _straggler_lib()
    room = 1 if cap <= 0 else max(1, -(-int(rows) // int(cap)))
    sizes = (ctypes.c_int64 * room)()
    n = ctypes.c_int64(0)
    _call(lib.rt_micro_split, int(rows), int(cap), sizes, room, ctypes.byref(n))
    return [int(x) for x in sizes[:n.value]]


def parse_size(spec, rank, world):
    """rank's bytes of a size setting: one size, or one per rank
    comma-separated, each with an optional suffix (16GiB, 512MB), parsed
    as ringtail-train parses it (rt_parse_size); 0 when spec is empty.
    ValueError when it does not parse."""
    lib = _straggler_lib()
    out = ctypes.c_int64(0)
    try:
        _call(lib.rt_parse_size, spec.encode(), int(rank), int(world), ctypes.byref(out))
    except RingtailError as e:
        raise ValueError(str(e)) from None
    return int(out.value)
