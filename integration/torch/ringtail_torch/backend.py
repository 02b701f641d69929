"""The ``ringtail`` c10d backend: a ProcessGroup whose collectives run on
ringtail through the C ABI.

Every collective is issued, in call order, to one FIFO worker thread per
process group; the worker makes the (GIL-releasing) ctypes call and
completes a ``torch.futures.Future`` wrapped in a c10d ``Work``. So calls
from several Python threads (DDP's autograd hooks, a data thread, the main
loop) reach the wire in one order, the order they were issued, which is the
order every rank must issue them in anyway.
"""

import atexit
import collections
import hashlib
import os
import queue
import re
import sys
import threading
import time
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, ReduceOp, Work

from . import _lib, p2p, profiling
from ._lib import (
    RT_AVG,
    RT_BFLOAT16,
    RT_FLOAT16,
    RT_FLOAT32,
    RT_FLOAT64,
    RT_INT32,
    RT_INT64,
    RT_MAX,
    RT_MIN,
    RT_PROD,
    RT_SUM,
    RT_UINT8,
)

from .groups import agree, free_port, local_ip  # noqa: F401 - re-exported
from .staging import Staging

BACKEND_NAME = "ringtail"

_DTYPES = {
    torch.float32: RT_FLOAT32,
    torch.float64: RT_FLOAT64,
    torch.int32: RT_INT32,
    torch.int64: RT_INT64,
    torch.float16: RT_FLOAT16,
    torch.bfloat16: RT_BFLOAT16,
    torch.uint8: RT_UINT8,
}

# ReduceOp values are not hashable in torch 1.13: look them up by equality.
_NATIVE_OPS = [
    (ReduceOp.SUM, RT_SUM, "SUM"),
    (ReduceOp.PRODUCT, RT_PROD, "PRODUCT"),
    (ReduceOp.MIN, RT_MIN, "MIN"),
    (ReduceOp.MAX, RT_MAX, "MAX"),
    (ReduceOp.AVG, RT_AVG, "AVG"),
]
_BITWISE_OPS = [
    (ReduceOp.BAND, torch.bitwise_and, "BAND"),
    (ReduceOp.BOR, torch.bitwise_or, "BOR"),
    (ReduceOp.BXOR, torch.bitwise_xor, "BXOR"),
]

Arrival = collections.namedtuple("Arrival", "step seq op nbytes issued started finished")
Arrival.__doc__ = """One collective as this rank saw it: the step it belongs to (see
mark_step), its sequence number in the group, its name and size, and three
wall-clock times (time.time()): when the caller issued it (its arrival at
the collective), when the worker put it on the wire, and when it
completed. finished - started is how long this rank waited for the others
(plus the transfer): the last rank to arrive waits least."""


def _torch_debug():
    """torch's TORCH_DISTRIBUTED_DEBUG as the group is made: "OFF", "INFO"
    or "DETAIL"."""
    return os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").strip().upper() or "OFF"


def _detail():
    """Whether collectives check their call sites: RINGTAIL_DEBUG=detail,
    else (RINGTAIL_DEBUG unset) TORCH_DISTRIBUTED_DEBUG=DETAIL, as the
    group is made. A RINGTAIL_DEBUG that is set (not empty) wins."""
    if os.environ.get("RINGTAIL_DEBUG", "").strip():
        return os.environ["RINGTAIL_DEBUG"].strip().lower() == "detail"
    return _torch_debug() == "DETAIL"


def _torch_checks():
    """Whether the call-site check also carries torch's collective
    fingerprint (op, shapes, dtypes, devices) and a mismatch raises in
    torch's words: TORCH_DISTRIBUTED_DEBUG=DETAIL with the check on."""
    return _torch_debug() == "DETAIL" and _detail()


def _debug_overrides():
    """The ringtail settings torch's debug switch implies where the
    environment sets none: DETAIL turns the call-site check on
    (RINGTAIL_DEBUG=detail), INFO and DETAIL the info-level log
    (RINGTAIL_LOG_LEVEL=info). A variable set empty counts as unset."""
    over = {}
    level = _torch_debug()
    if level == "DETAIL" and not os.environ.get("RINGTAIL_DEBUG", "").strip():
        over["RINGTAIL_DEBUG"] = "detail"
    if level in ("INFO", "DETAIL") and not os.environ.get("RINGTAIL_LOG_LEVEL", "").strip():
        over["RINGTAIL_LOG_LEVEL"] = "info"
    return over


# torch's OpType names (c10d Types.hpp) of the profiling titles, for the
# fingerprint of TORCH_DISTRIBUTED_DEBUG=DETAIL.
_OP_TYPES = {
    "all_reduce": "ALLREDUCE",
    "broadcast": "BROADCAST",
    "all_gather": "ALLGATHER",
    "all_gather_into_tensor": "_ALLGATHER_BASE",
    "reduce_scatter": "REDUCE_SCATTER",
    "reduce_scatter_tensor": "_REDUCE_SCATTER_BASE",
    "all_to_all": "ALLTOALL",
    "barrier": "BARRIER",
    "reduce": "REDUCE",
    "gather": "GATHER",
    "scatter": "SCATTER",
}


def _dtype_name(t):
    """c10's ScalarType name of t's dtype (Float, Long, BFloat16, ...)."""
    name = t.type().rsplit(".", 1)[-1]
    return name[: -len("Tensor")] if name.endswith("Tensor") else str(t.dtype)


def _fingerprint(name, event):
    """torch's CollectiveFingerPrint of a collective (ProcessGroupWrapper's
    words): the op, every input's shape, dtype and device."""
    title, tensors = event if event is not None else (name, [])
    op = _OP_TYPES.get(title, title.upper())
    if name.endswith("_coalesced"):
        op += "_COALESCED"
    elif title == "all_to_all" and len(tensors) == 1:
        op = "ALLTOALL_BASE"
    shapes = ", ".join(str(list(t.shape)) for t in tensors)
    if len(tensors) == 1:
        shapes = shapes[1:-1]
    return "CollectiveFingerPrint(OpType=%s, TensorShape=[%s], TensorDtypes=%s, TensorDeviceTypes=%s)" % (
        op, shapes, ", ".join(_dtype_name(t) for t in tensors), ", ".join(t.device.type for t in tensors))


_MISMATCH_PARTS = re.compile(r"(ranks? [\d,]+) from (.*?)(?=; ranks? [\d,]+ from |: a rank skipped or added a call)")
_SITE_SEP = " at "


def _torch_mismatch(err, rank, mine):
    """err (a call-site mismatch of a collective whose site led with its
    fingerprint mine) reworded as torch's ProcessGroupWrapper says it:
    "Detected mismatch between collectives on ranks. Rank 0 is running
    collective: CollectiveFingerPrint(...), but Rank 1 is running
    collective: CollectiveFingerPrint(...).", ringtail's own message (every
    rank's call site) kept after it."""
    msg = str(err)
    other = None
    for ranks, site in _MISMATCH_PARTS.findall(msg):
        rs = [int(x) for x in ranks.split(" ", 1)[1].split(",")]
        if rank not in rs:
            other = (rs[0], site.split(_SITE_SEP, 1)[0])
            break
    text = "Detected mismatch between collectives on ranks. Rank %d is running collective: %s" % (rank, mine)
    if other is not None:
        text += ", but Rank %d is running collective: %s" % other
    e = _lib.RingtailError(err.code, msg)
    e.args = ("%s. (%s)" % (text, msg),)
    return e


# Frames of these packages are not call sites: the caller's frame is the
# first one outside them.
_NOT_SITES = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
              os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


def _call_site(depth=8):
    """Names the Python call site of a collective for the call-site check:
    "train.py:42 (step) <- train.py:90 (main) [hash]", the two innermost
    frames outside torch and ringtail_torch, and a hash of up to depth of
    them (file names, not paths: the same code on another host agrees)."""
    f = sys._getframe(1)
    frames = []
    while f is not None and len(frames) < depth:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_NOT_SITES):
            frames.append("%s:%d (%s)" % (os.path.basename(path), f.f_lineno, f.f_code.co_name))
        f = f.f_back
    if not frames:
        return "unknown"
    h = hashlib.sha1("\n".join(frames).encode()).hexdigest()[:8]
    return " <- ".join(frames[:2]) + " [" + h + "]"


def _unsupported(what):
    return NotImplementedError("ringtail backend does not implement %s" % what)


def _native_op(op):
    for o, code, name in _NATIVE_OPS:
        if op == o:
            return code, name
    return None, None


def _bitwise_op(op):
    for o, fn, name in _BITWISE_OPS:
        if op == o:
            return fn, name
    return None, None


def _op_name(op):
    _, name = _native_op(op)
    if name is None:
        _, name = _bitwise_op(op)
    return name or "PREMUL_SUM"


class _Reduction:
    """How one (dtype, op) reduction runs: the dtype the wire sees, the
    ringtail op code, or a bitwise fold done after an allgather."""

    def __init__(self, what, dtype, op):
        self.bitwise = None
        code, name = _native_op(op)
        self.name = name
        if code is None:
            fn, name = _bitwise_op(op)
            if fn is None:
                raise _unsupported("%s with op %s" % (what, _op_name(op)))
            if dtype.is_floating_point or dtype.is_complex:
                raise TypeError("%s: %s needs an integer or bool tensor, got %s" % (what, name, dtype))
            self.bitwise, self.name, self.wire, self.code = fn, name, dtype, None
            return
        self.code = code
        if dtype in _DTYPES:
            self.wire = dtype
        elif dtype in (torch.int8, torch.int16):
            self.wire = torch.int32  # cast back wraps like an int8/int16 sum would
        elif dtype == torch.bool:
            if name in ("SUM", "MAX"):
                self.code = RT_MAX  # logical or
            elif name in ("PRODUCT", "MIN"):
                self.code = RT_MIN  # logical and
            else:
                raise _unsupported("%s of bool tensors with op %s" % (what, name))
            self.wire = torch.uint8
        elif dtype.is_complex and name in ("SUM", "AVG"):
            self.wire = "complex"
        else:
            raise _unsupported("%s of %s tensors with op %s" % (what, dtype, name))

    def prepare(self, t):
        """Returns a contiguous CPU tensor of the wire dtype holding t's
        values: t itself when possible."""
        if self.wire == "complex":
            w = torch.view_as_real(t.resolve_conj() if t.is_conj() else t)
        elif t.dtype != self.wire:
            w = t.to(self.wire)
        else:
            w = t
        if w.device.type != "cpu" or not w.is_contiguous():
            w = w.detach().cpu().contiguous()
        return w

    @property
    def wire_code(self):
        if self.wire == "complex":
            raise AssertionError("complex is staged through view_as_real")
        return _DTYPES[self.wire]


def _wire_dtype_code(w):
    return _DTYPES[w.dtype]


def _contiguous_cpu(t):
    if t.device.type == "cpu" and t.is_contiguous():
        return t
    return t.detach().cpu().contiguous()


def _single(what, tensors):
    if isinstance(tensors, torch.Tensor):
        return tensors
    if len(tensors) != 1:
        raise _unsupported("%s of %d tensors per process (give one tensor)" % (what, len(tensors)))
    return tensors[0]


def _nbytes(t):
    return t.numel() * t.element_size()


def _passthrough(fut):
    # Raising here (value() re-raises a set_exception) gives the chained
    # future a real c10 error, which C++ callers such as DDP's reducer see.
    return fut.value()


class _Worker:
    """A FIFO of jobs run by one daemon thread; each job completes a
    torch.futures.Future with its result or exception."""

    def __init__(self, name):
        self._q = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job):
        """Queues job; returns (inner, outer): inner's wait() re-raises the
        job's exception as is (for Python callers), outer carries it as a
        c10 error (for C++ callers, who never see Python's unwrapping)."""
        inner, _, outer = self.submit_with_event(job, None)
        return inner, outer

    def submit_with_event(self, job, event):
        """submit, ending the job's profiler event (a profiling.start
        handle, or None) when it completes; returns (inner, done, outer):
        done completes once the event has ended, and outer is chained on
        it."""
        inner = torch.futures.Future()
        # The event ends on the thread that completes inner (the worker's):
        # chained before the job is queued, so never on this thread.
        done = inner if event is None else profiling.end_on(event, inner)
        outer = done.then(_passthrough)
        if threading.current_thread() is self._thread:
            # Torch runs a future's callbacks on the thread that completes
            # it: this one. A callback that issues a collective and waits
            # for it (torch's PowerSGD hook does) would wait forever behind
            # itself, so its job runs now. Every rank then runs it right
            # after the job whose callback issued it, as a rank whose
            # callback ran on the caller's thread (the job already done when
            # the callback was chained) queues it before anything else.
            self._run(job, inner)
        else:
            self._q.put((job, inner))
        return inner, done, outer

    def _loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            self._run(*item)

    @staticmethod
    def _run(job, fut):
        try:
            with torch.no_grad():
                result = job()
        except BaseException as e:  # every failure goes to the waiter
            fut.set_exception(e)
        else:
            fut.set_result(result)

    def stop(self, timeout):
        """Lets queued jobs finish (up to timeout seconds) and stops."""
        self._q.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _close(comm, worker):
    """Closes a group's communicator: drain the queue briefly, then abort
    whatever is still in flight and leave the job."""
    if not worker.stop(10.0):
        comm.abort()
    try:
        comm.close()
    except _lib.RingtailError:
        pass


class _Work(Work):
    """The Work of one ringtail collective. wait() raises the collective's
    error (a Work made by _create_work_from_future returns normally from
    wait() even when its future failed, so a failed synchronous collective
    would pass unnoticed) and honours a timeout like c10d's Work::wait;
    get_future() is what DDP's reducer chains on."""

    def __init__(self, inner, done, outer, keep):
        super().__init__()
        self._inner, self._done, self._outer, self._keep = inner, done, outer, keep

    def wait(self, timeout=None):
        self._keep.pop(id(self), None)
        if timeout is not None and timeout.total_seconds() > 0 and not self._done.done():
            ev = threading.Event()
            self._done.then(lambda _: ev.set())
            if not ev.wait(timeout.total_seconds()):
                # c10d's words; the collective goes on (and fails at the
                # group's timeout if a peer never comes).
                raise RuntimeError("Operation timed out!")
        if self._done is not self._inner:
            try:
                self._done.wait()  # the profiler event has ended
            except Exception:  # noqa: BLE001 - inner raises it as is, below
                pass
        self._inner.wait()
        return True

    def get_future(self):
        self._keep.pop(id(self), None)
        return self._outer

    def is_completed(self):
        return self._inner.done()

    def is_success(self):
        if not self._inner.done():
            return False
        try:
            self._inner.wait()
        except Exception:  # noqa: BLE001 - any failure is "not a success"
            return False
        return True

    def exception(self):
        if not self._inner.done():
            return None
        try:
            self._inner.wait()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def result(self):
        return self._inner.wait()


_LIVE = weakref.WeakSet()
_KEEP = 1024


@atexit.register
def _close_all():
    for pg in list(_LIVE):
        pg.shutdown()


def _bytes_of(t):
    """t's bytes as a flat uint8 tensor (t contiguous)."""
    return t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


def _from_bytes(b, like):
    """Flat uint8 b viewed as like's dtype and shape (copied when b's
    offset is not aligned for that dtype)."""
    if b.storage_offset() % like.element_size():
        b = b.clone()
    return b.view(like.dtype).view_as(like)


def _split_bytes(what, t, splits, world):
    """Byte counts per rank of t split along dim 0 by splits (empty: evenly)."""
    rows = t.shape[0] if t.dim() > 0 else 1
    row = _nbytes(t) // rows if rows else 0
    if not splits:
        if rows % world != 0:
            raise RuntimeError("%s: tensor's dim 0 (%d) does not divide equally across group size %d" % (what, rows, world))
        return [rows // world * row] * world, True
    if len(splits) != world:
        raise RuntimeError("%s: %d split sizes for a group of %d" % (what, len(splits), world))
    if any(s < 0 for s in splits) or sum(splits) != rows:
        raise RuntimeError("%s: split sizes %s don't match total dim 0 size %d" % (what, list(splits), rows))
    return [s * row for s in splits], False


class ProcessGroupRingtail(ProcessGroup):
    """A c10d ProcessGroup running on ringtail. Create it with
    ``dist.init_process_group("ringtail")`` or ``dist.new_group(...,
    backend="ringtail")``, not directly.

    Collectives are issued, in call order, to the group's FIFO worker;
    point-to-point calls (send, recv, recv_anysource) go straight to the
    Go side (see p2p.py). CUDA tensors are staged through pinned host
    memory (see staging.py)."""

    # The prefix of the group's profiler events, "ringtail:" as c10d's
    # backends name theirs ("gloo:all_reduce"). A test driver that stands
    # the group in for Gloo (torch's suite checks events named
    # dist.get_backend() + ":all_reduce") sets it to "gloo:".
    profiling_prefix = profiling.PREFIX

    def __init__(self, comm, rank, size, timeout=timedelta(minutes=30)):
        super().__init__(rank, size)
        self._comm = comm
        self._timeout = timeout  # default wait of point-to-point and monitored_barrier
        self._worker = _Worker("ringtail-pg-%d" % id(self))
        self._issue = threading.Lock()  # orders issue: seq, arrivals, queue
        self._seq = 0
        self._step = 0
        self._arrivals = collections.deque(maxlen=100000)
        # C++ callers (DDP) hold a Work only as a C++ pointer: its Python
        # half, which answers get_future(), must outlive the call that
        # returned it, so each Work is kept here until its future is taken
        # or it is waited on (at most _KEEP of them, oldest dropped first).
        self._keep = collections.OrderedDict()
        # Point-to-point Works until their request has finished: the Go
        # side reads or writes their tensors until then.
        self._p2p = {}
        self._p2p_lock = threading.Lock()
        self._detail = _detail()  # collectives carry their Python call sites
        self._torch_checks = _torch_checks()  # ... led by torch's fingerprint
        self._weighted = False  # issue side: Eq. 7 armed for new allreduces
        self._factor = 1.0  # worker side: W*n_i/sum(n), set by the counts job
        self._finalizer = weakref.finalize(self, _close, comm, self._worker)
        self._seq = 0  # calls issued on the group (torch's sequence number)
        _LIVE.add(self)

    # -- c10d interface ---------------------------------------------------

    def _set_sequence_number_for_group(self):
        """Starts the group's sequence number at 0 on every rank alike (torch's
        init_process_group and new_group call it on a group named "gloo" or
        "nccl": ringtail standing in for Gloo)."""
        self._seq = 0

    def _get_sequence_number_for_group(self):
        """The number of jobs this rank has issued on the group since
        _set_sequence_number_for_group (a torch call issues one or more, the
        same on every rank for the same calls)."""
        return self._seq

    def getBackendName(self):
        return BACKEND_NAME

    def name(self):
        return BACKEND_NAME

    def allreduce(self, tensors, opts=None):
        t = _single("allreduce", tensors)
        op = ReduceOp.SUM
        if isinstance(opts, ReduceOp):
            op = opts
        elif opts is not None:
            op = opts.reduceOp
        out = [t] if isinstance(tensors, torch.Tensor) else tensors
        if t.layout == torch.sparse_coo:
            return self._sparse_allreduce(t, op, out)
        red = _Reduction("allreduce", t.dtype, op)
        weighted = self._weighted and red.name in ("SUM", "AVG") and (t.is_floating_point() or t.is_complex())
        st = Staging()
        h = st.host(t)

        def job():
            self._allreduce(h, red, weighted)
            return out

        return self._submit("allreduce." + red.name.lower(), _nbytes(t), job, st, ("all_reduce", [t]))

    def _sparse_allreduce(self, t, op, out):
        """all_reduce of a sparse COO tensor, as Gloo does it: every rank's
        indices and values are gathered, concatenated and coalesced; the
        sum replaces t's contents (t.copy_). SUM only, like Gloo."""
        _, name = _native_op(op)
        if name != "SUM":
            raise _unsupported("all_reduce of sparse tensors with op %s (Gloo too reduces them with SUM only)"
                               % _op_name(op))
        weighted = self._weighted and (t.is_floating_point() or t.is_complex())

        def job():
            c = t.detach().coalesce()
            if c.device.type != "cpu":
                c = c.cpu()
            if weighted and self._factor != 1.0:
                c = c * self._factor  # this rank's Eq. 7 weight, as a dense allreduce applies it
            t.copy_(self._sparse_sum(c).to(t.device))
            return out

        return self._submit("allreduce.sum", _nbytes(t._values()) + t._indices().numel() * 8, job,
                            event=("all_reduce", [t]))

    def _allgather_int64(self, mine):
        """Every rank's int64 tensor mine (same length on every rank),
        stacked: [world, len]."""
        mine = mine.to(torch.int64).contiguous()
        flat = torch.empty((self.size(),) + tuple(mine.shape), dtype=torch.int64)
        self._comm.allgather(mine.data_ptr(), flat.data_ptr(), mine.numel(), RT_INT64)
        return flat

    def _sparse_sum(self, c):
        """The sum over the group of the coalesced CPU COO tensor c (worker
        side): the shapes first (they must agree), then every rank's
        indices and values, padded to the largest count of non-zeros."""
        sd, dd, nnz = c.sparse_dim(), c.dense_dim(), c._nnz()
        head = self._allgather_int64(torch.tensor([sd, dd, c.dim(), nnz]))
        if not bool((head[:, :3] == head[0, :3]).all()):
            raise ValueError("all_reduce of sparse tensors: ranks' (sparse dims, dense dims, dims) differ: %s"
                             % head[:, :3].tolist())
        sizes = self._allgather_int64(torch.tensor(list(c.shape), dtype=torch.int64))
        if not bool((sizes == sizes[0]).all()):
            raise ValueError("all_reduce of sparse tensors: ranks' shapes differ: %s" % sizes.tolist())
        counts = head[:, 3].tolist()
        most = max(counts)
        idx = torch.zeros(sd, most, dtype=torch.int64)
        idx[:, :nnz] = c._indices()
        vals = c._values()
        pad = torch.zeros((most,) + tuple(vals.shape[1:]), dtype=vals.dtype)
        pad[:nnz] = vals
        idxs = self._allgather_int64(idx)
        valb = _bytes_of(pad.contiguous())
        allv = torch.empty(self.size() * valb.numel(), dtype=torch.uint8)
        self._comm.allgather(valb.data_ptr(), allv.data_ptr(), valb.numel(), RT_UINT8)
        allv = _from_bytes(allv, torch.empty((self.size(),) + tuple(pad.shape), dtype=pad.dtype))
        indices = torch.cat([idxs[r, :, :n] for r, n in enumerate(counts)], dim=1)
        values = torch.cat([allv[r, :n] for r, n in enumerate(counts)])
        return torch.sparse_coo_tensor(indices, values, c.shape).coalesce()

    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            raise ValueError("allreduce_coalesced: no tensors")
        dtype = tensors[0].dtype
        if any(t.dtype != dtype for t in tensors):
            raise TypeError("allreduce_coalesced: tensors must share one dtype")
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("allreduce_coalesced", dtype, op)
        st = Staging()
        hs = [st.host(t) for t in tensors]

        def job():
            flat = torch.cat([h.reshape(-1) for h in hs])
            self._allreduce(flat, red, False)
            off = 0
            for h in hs:
                h.copy_(flat[off : off + h.numel()].view_as(h))
                off += h.numel()
            return tensors

        return self._submit("allreduce_coalesced", sum(_nbytes(t) for t in tensors), job, st, ("all_reduce", tensors))

    def broadcast(self, tensors, opts=None):
        t = _single("broadcast", tensors)
        root = 0
        if isinstance(opts, int):
            root = opts
        elif opts is not None:
            root = opts.rootRank
            if opts.rootTensor != 0:
                raise _unsupported("broadcast with rootTensor %d" % opts.rootTensor)
        out = [t] if isinstance(tensors, torch.Tensor) else tensors
        mine = self.rank() == root
        st = Staging()
        h = st.host(t, copy_in=mine, copy_out=not mine)

        def job():
            w = _contiguous_cpu(h)
            self._comm.broadcast(w.data_ptr(), _nbytes(w), RT_UINT8, root)
            if w is not h:
                h.copy_(w)
            return out

        return self._submit("broadcast", _nbytes(t), job, st, ("broadcast", [t]))

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = _single("allgather", input_tensors)
        if len(output_tensors) != 1:
            raise _unsupported("allgather of %d tensor lists per process" % len(output_tensors))
        outs = output_tensors[0]
        self._check_gather_outputs("allgather", outs, inp)
        st = Staging()
        hi = st.host(inp, copy_out=False)
        hos = [st.host(o, copy_in=False) for o in outs]

        def job():
            self._gather_into(hos, hi)
            return output_tensors

        return self._submit("allgather", _nbytes(inp) * self.size(), job, st, ("all_gather", [inp]))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """all_gather_coalesced: output_lists[r][j] gets rank r's
        input_list[j]; one allgather of all the inputs' bytes."""
        what = "allgather_coalesced"
        if not input_list:
            raise RuntimeError("%s: requires non-empty input tensor list" % what)
        if len(output_lists) != self.size():
            raise RuntimeError("%s: %d output lists for a group of %d" % (what, len(output_lists), self.size()))
        for r, outs in enumerate(output_lists):
            if len(outs) != len(input_list):
                raise RuntimeError("%s: output list %d has %d tensors, the input %d" % (what, r, len(outs), len(input_list)))
            for o, i in zip(outs, input_list):
                if o.dtype != i.dtype or o.numel() != i.numel():
                    raise RuntimeError("%s: output %s x %d unlike input %s x %d" % (what, o.dtype, o.numel(), i.dtype, i.numel()))
        st = Staging()
        his = [st.host(i, copy_out=False) for i in input_list]
        hos = [[st.host(o, copy_in=False) for o in outs] for outs in output_lists]
        sizes = [_nbytes(i) for i in input_list]
        total = sum(sizes)

        def job():
            send = torch.cat([_bytes_of(_contiguous_cpu(h)) for h in his])
            flat = torch.empty(total * self.size(), dtype=torch.uint8)
            self._comm.allgather(send.data_ptr(), flat.data_ptr(), total, RT_UINT8)
            for r, outs in enumerate(hos):
                off = r * total
                for o, n in zip(outs, sizes):
                    o.copy_(_from_bytes(flat[off : off + n], o))
                    off += n
            return output_lists

        return self._submit(what, total * self.size(), job, st, ("all_gather", input_list))

    def _allgather_base(self, output, input, opts=None):
        if output.dtype != input.dtype or output.numel() != input.numel() * self.size():
            raise ValueError(
                "all_gather_into_tensor: output must hold %d x %d %s elements, has %d %s"
                % (self.size(), input.numel(), input.dtype, output.numel(), output.dtype)
            )
        st = Staging()
        hin = st.host(input, copy_out=False)
        hout = st.host(output, copy_in=False)

        def job():
            w = _contiguous_cpu(hout)
            src = _contiguous_cpu(hin)
            self._comm.allgather(src.data_ptr(), w.data_ptr(), _nbytes(src), RT_UINT8)
            if w is not hout:
                hout.copy_(w)
            return [output]

        return self._submit("allgather", _nbytes(output), job, st, ("all_gather_into_tensor", [input]))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _single("reduce_scatter", output_tensors)
        if len(input_tensors) != 1:
            raise _unsupported("reduce_scatter of %d tensor lists per process" % len(input_tensors))
        ins = input_tensors[0]
        if len(ins) != self.size():
            raise ValueError("reduce_scatter: %d input tensors for a group of %d" % (len(ins), self.size()))
        for i in ins:
            if i.dtype != out.dtype or i.numel() != out.numel():
                raise _unsupported("reduce_scatter with input tensors unlike the output (use equal sizes)")
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("reduce_scatter", out.dtype, op)
        st = Staging()
        hins = [st.host(i, copy_out=False) for i in ins]
        hout = st.host(out, copy_in=False)

        def job():
            send = torch.cat([i.reshape(-1) for i in hins])
            self._reduce_scatter(send, hout, red)
            return output_tensors

        return self._submit("reduce_scatter." + red.name.lower(), _nbytes(out) * self.size(), job, st, ("reduce_scatter", ins))

    def _reduce_scatter_base(self, output, input, opts=None):
        if output.dtype != input.dtype or input.numel() != output.numel() * self.size():
            raise ValueError(
                "reduce_scatter_tensor: input must hold %d x %d %s elements, has %d %s"
                % (self.size(), output.numel(), output.dtype, input.numel(), input.dtype)
            )
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("reduce_scatter_tensor", output.dtype, op)
        st = Staging()
        hin = st.host(input, copy_out=False)
        hout = st.host(output, copy_in=False)

        def job():
            self._reduce_scatter(hin.reshape(-1), hout, red)
            return [output]

        return self._submit("reduce_scatter." + red.name.lower(), _nbytes(input), job, st, ("reduce_scatter_tensor", [input]))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: equal splits of dim 0 (empty split lists) or
        the given ones; runs on the Go side's pairwise all-to-all."""
        what = "all_to_all_single"
        if output.dtype != input.dtype:
            raise RuntimeError("%s: output is %s but input is %s" % (what, output.dtype, input.dtype))
        w = self.size()
        send, even_in = _split_bytes(what + " input", input, input_split_sizes, w)
        recv, even_out = _split_bytes(what + " output", output, output_split_sizes, w)
        even = even_in and even_out and send == recv
        st = Staging()
        hin = st.host(input, copy_out=False)
        hout = st.host(output, copy_in=False)

        def job():
            s = _contiguous_cpu(hin)
            o = _contiguous_cpu(hout)
            if even:
                self._comm.alltoall(s.data_ptr(), o.data_ptr(), send[0], RT_UINT8)
            else:
                self._comm.alltoallv(s.data_ptr(), send, o.data_ptr(), recv, RT_UINT8)
            if o is not hout:
                hout.copy_(o)
            return [output]

        return self._submit("alltoall", _nbytes(input), job, st, ("all_to_all", [input]))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """all_to_all: input_tensors[r] goes to rank r, output_tensors[r]
        comes from rank r; tensors of any sizes (one dtype)."""
        what = "all_to_all"
        w = self.size()
        if len(output_tensors) != w or len(input_tensors) != w:
            raise RuntimeError("%s: %d output and %d input tensors for a group of %d" % (what, len(output_tensors), len(input_tensors), w))
        dtypes = {t.dtype for t in list(output_tensors) + list(input_tensors)}
        if len(dtypes) != 1:
            raise RuntimeError("%s: tensors of several dtypes %s" % (what, sorted(str(d) for d in dtypes)))
        st = Staging()
        hins = [st.host(t, copy_out=False) for t in input_tensors]
        houts = [st.host(t, copy_in=False) for t in output_tensors]
        send = [_nbytes(t) for t in input_tensors]
        recv = [_nbytes(t) for t in output_tensors]

        def job():
            s = torch.cat([_bytes_of(_contiguous_cpu(h)) for h in hins])
            o = torch.empty(sum(recv), dtype=torch.uint8)
            self._comm.alltoallv(s.data_ptr(), send, o.data_ptr(), recv, RT_UINT8)
            off = 0
            for h, n in zip(houts, recv):
                h.copy_(_from_bytes(o[off : off + n], h))
                off += n
            return output_tensors

        return self._submit("alltoall", sum(send), job, st, ("all_to_all", input_tensors))

    def barrier(self, opts=None):
        def job():
            self._comm.barrier()
            return []

        return self._submit("barrier", 0, job, event=("barrier", []))

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """A barrier naming the ranks that did not arrive within timeout
        (default: the group's; zero leaves rank 0 no time, as with Gloo):
        see ringtail_torch.monitored_barrier."""
        if timeout is None:
            timeout = self._timeout
        secs = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        if secs < 0:
            raise ValueError("monitored_barrier: negative timeout %r" % (timeout,))
        self._comm.monitored_barrier(int(secs * 1000), wait_all_ranks)

    def reduce(self, tensors, opts=None):
        t = _single("reduce", tensors)
        root = opts.rootRank if opts is not None else 0
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("reduce", t.dtype, op)
        mine = self.rank() == root
        st = Staging()
        h = st.host(t, copy_out=mine)

        def job():
            # An allreduce: the root keeps the result, other ranks keep
            # their input untouched.
            self._allreduce(h if mine else h.clone(), red, False)
            return [t]

        return self._submit("reduce." + red.name.lower(), _nbytes(t), job, st, ("reduce", [t]))

    def gather(self, output_tensors, input_tensors, opts=None):
        inp = _single("gather", input_tensors)
        root = opts.rootRank if opts is not None else 0
        mine = self.rank() == root
        outs = output_tensors[0] if mine else None
        if mine:
            self._check_gather_outputs("gather", outs, inp)
        st = Staging()
        hi = st.host(inp, copy_out=False)
        hos = [st.host(o, copy_in=False) for o in outs] if mine else None

        def job():
            self._gather_into(hos, hi)
            return output_tensors

        return self._submit("gather", _nbytes(inp) * self.size(), job, st, ("gather", [inp]))

    def scatter(self, output_tensors, input_tensors, opts=None):
        out = _single("scatter", output_tensors)
        root = opts.rootRank if opts is not None else 0
        mine = self.rank() == root
        st = Staging()
        hins = None
        if mine:
            ins = input_tensors[0]
            if len(ins) != self.size() or any(i.dtype != out.dtype or i.numel() != out.numel() for i in ins):
                raise ValueError("scatter: the root needs %d tensors like the output" % self.size())
            hins = [st.host(i, copy_out=False) for i in ins]
        hout = st.host(out, copy_in=False)

        def job():
            # A broadcast of every block; each rank keeps its own.
            if mine:
                flat = torch.cat([i.reshape(-1) for i in hins])
            else:
                flat = torch.empty(out.numel() * self.size(), dtype=out.dtype)
            self._comm.broadcast(flat.data_ptr(), _nbytes(flat), RT_UINT8, root)
            n = out.numel()
            hout.copy_(flat[self.rank() * n : (self.rank() + 1) * n].view_as(hout))
            return output_tensors

        return self._submit("scatter", _nbytes(out) * self.size(), job, st, ("scatter", [out]))

    def send(self, tensors, dstRank, tag=0):
        return p2p.send(self, _single("send", tensors), dstRank, tag)

    def recv(self, tensors, srcRank, tag=0):
        return p2p.recv(self, _single("recv", tensors), srcRank, tag)

    def recv_anysource(self, tensors, tag=0):
        return p2p.recv(self, _single("recv_anysource", tensors), None, tag)

    # -- point-to-point bookkeeping (p2p.py) --------------------------------

    def _p2p_started(self, work):
        with self._p2p_lock:
            # Drop the requests the Go side has finished (collecting their
            # result frees their handle): their tensors are no longer used.
            for w in [w for w in self._p2p.values() if w._req.done()]:
                try:
                    w._req.wait(0)
                except _lib.RingtailError:
                    pass  # kept in the request; raised by the Work's wait()
                del self._p2p[id(w)]
            self._p2p[id(work)] = work
        return work

    def _p2p_done(self, work):
        with self._p2p_lock:
            self._p2p.pop(id(work), None)

    # -- worker side ------------------------------------------------------

    def _allreduce(self, t, red, weighted):
        if red.bitwise is not None:
            w = _contiguous_cpu(t)
            flat = torch.empty((self.size(),) + tuple(w.shape), dtype=w.dtype)
            self._comm.allgather(w.data_ptr(), flat.data_ptr(), _nbytes(w), RT_UINT8)
            acc = flat[0].clone()
            for r in range(1, self.size()):
                acc = red.bitwise(acc, flat[r])
            t.copy_(acc)
            return
        w = red.prepare(t)
        if weighted and self._factor != 1.0:
            w.mul_(self._factor)
        self._comm.allreduce(w.data_ptr(), w.numel(), _wire_dtype_code(w), red.code)
        if red.wire == "complex":
            if w.data_ptr() != t.data_ptr():
                t.copy_(torch.view_as_complex(w))
        elif w is not t:
            t.copy_(w.to(t.dtype))

    def _reduce_scatter(self, send, out, red):
        if red.bitwise is not None:
            n = out.numel()
            s = _contiguous_cpu(send)
            flat = torch.empty((self.size(),) + tuple(s.shape), dtype=s.dtype)
            self._comm.allgather(s.data_ptr(), flat.data_ptr(), _nbytes(s), RT_UINT8)
            block = flat[:, self.rank() * n : (self.rank() + 1) * n]
            acc = block[0].clone()
            for r in range(1, self.size()):
                acc = red.bitwise(acc, block[r])
            out.copy_(acc.view_as(out))
            return
        s = red.prepare(send)
        o = red.prepare(out)
        count = o.numel()
        self._comm.reduce_scatter(s.data_ptr(), o.data_ptr(), count, _wire_dtype_code(o), red.code)
        if red.wire == "complex":
            out.copy_(torch.view_as_complex(o))
        elif o is not out:
            out.copy_(o.to(out.dtype).view_as(out))

    def _check_gather_outputs(self, what, outs, inp):
        if len(outs) != self.size():
            raise ValueError("%s: %d output tensors for a group of %d" % (what, len(outs), self.size()))
        for o in outs:
            if o.dtype != inp.dtype or o.numel() != inp.numel():
                raise _unsupported(
                    "%s with output tensors unlike the input (%s x %d vs %s x %d): uneven gathers"
                    % (what, o.dtype, o.numel(), inp.dtype, inp.numel())
                )

    def _gather_into(self, outs, inp):
        src = _contiguous_cpu(inp)
        flat = torch.empty((self.size(),) + tuple(src.shape), dtype=src.dtype)
        self._comm.allgather(src.data_ptr(), flat.data_ptr(), _nbytes(src), RT_UINT8)
        if outs is not None:
            for r, o in enumerate(outs):
                o.copy_(flat[r].view_as(o))

    # -- issue side -------------------------------------------------------

    def _submit(self, name, nbytes, job, staging=None, event=None):
        """Queues job, the collective name (for the arrival records) of
        nbytes; event is the (profiling title, input tensors) of its
        profiler event, ringtail:<title>, one per call as c10d's backends
        record them."""
        handle = profiling.start(event[0], event[1], self.profiling_prefix) if event is not None else None
        self._seq += 1
        if staging is not None and staging.active:
            staging.issued()
            job = staging.wrap(job)
        if self._detail:
            site = _call_site()
            if self._torch_checks:
                fp = _fingerprint(name, event)
                job = self._with_call_site(job, fp + _SITE_SEP + site, fp)
            else:
                job = self._with_call_site(job, site)
        with self._issue:
            self._seq += 1
            rec = [self._step, self._seq, name, nbytes, time.time(), 0.0, 0.0]

            def run():
                rec[5] = time.time()
                try:
                    return job()
                finally:
                    rec[6] = time.time()
                    self._arrivals.append(Arrival(*rec))

            inner, done, outer = self._worker.submit_with_event(run, handle)
            work = _Work(inner, done, outer, self._keep)
            self._keep[id(work)] = work
            while len(self._keep) > _KEEP:
                try:
                    self._keep.popitem(last=False)
                except KeyError:  # emptied meanwhile by another thread
                    break
        return work

    def _with_call_site(self, job, site, fingerprint=None):
        """job, making its collectives under the call site the caller
        issued it from (the worker runs it later, on its own thread). With
        torch's fingerprint (TORCH_DISTRIBUTED_DEBUG=DETAIL), a call-site
        mismatch raises in torch's words."""

        def run():
            self._comm.call_site(site)
            try:
                return job()
            except _lib.RingtailError as e:
                if fingerprint is None or e.kind != "mismatch" or "call sites differ" not in str(e):
                    raise
                raise _torch_mismatch(e, self.rank(), fingerprint) from None
            finally:
                self._comm.call_site(None)

        return run

    def _set_local_batch(self, n):
        """Queues the counts allreduce of Eq. 7 and arms the weighting."""
        if n is None:
            with self._issue:
                self._weighted = False
            return
        n = float(n)
        if not n >= 0:
            raise ValueError("local batch %r must be a non-negative number" % n)
        size = self.size()

        def job():
            c = torch.tensor([n], dtype=torch.float64)
            self._comm.allreduce(c.data_ptr(), 1, RT_FLOAT64, RT_SUM)
            total = float(c.item())
            self._factor = size * n / total if total > 0 else 0.0
            return [c]

        with self._issue:
            self._step += 1
            self._weighted = True
        return self._submit("local_batch", 8, job)

    # -- public extras ----------------------------------------------------

    def mark_step(self):
        """Starts a new step: later collectives' Arrival.step is one more."""
        with self._issue:
            self._step += 1

    def arrivals(self):
        """Returns the Arrival records of completed collectives, oldest
        first (the last 100000)."""
        return list(self._arrivals)

    def shutdown(self):
        """Closes the communicator now (also done at exit and when the
        group is garbage-collected); later collectives fail."""
        _LIVE.discard(self)
        self._finalizer()


# -- creating groups ----------------------------------------------------------


def create_process_group(store, rank, size, timeout):
    """The creator registered with torch.distributed.Backend: joins a new
    ringtail communicator agreed through store."""
    over = agree(store, rank, size, timeout)
    for k, v in _debug_overrides().items():
        over.setdefault(k, v)
    comm = _lib.Comm(over)
    return ProcessGroupRingtail(comm, rank, size, timeout)
