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
import contextlib
import json
import os
import queue
import secrets
import socket
import threading
import time
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, ReduceOp, Work

from . import _lib
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
        inner = torch.futures.Future()
        outer = inner.then(_passthrough)
        self._q.put((job, inner))
        return inner, outer

    def _loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            job, fut = item
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
    would pass unnoticed); get_future() is what DDP's reducer chains on."""

    def __init__(self, inner, outer, keep):
        super().__init__()
        self._inner, self._outer, self._keep = inner, outer, keep

    def wait(self, timeout=None):
        self._keep.pop(id(self), None)
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

    def result(self):
        return self._inner.wait()


_LIVE = weakref.WeakSet()
_KEEP = 1024


@atexit.register
def _close_all():
    for pg in list(_LIVE):
        pg.shutdown()


class ProcessGroupRingtail(ProcessGroup):
    """A c10d ProcessGroup running on ringtail. Create it with
    ``dist.init_process_group("ringtail")`` or ``dist.new_group(...,
    backend="ringtail")``, not directly."""

    def __init__(self, comm, rank, size):
        super().__init__(rank, size)
        self._comm = comm
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
        self._weighted = False  # issue side: Eq. 7 armed for new allreduces
        self._factor = 1.0  # worker side: W*n_i/sum(n), set by the counts job
        self._finalizer = weakref.finalize(self, _close, comm, self._worker)
        _LIVE.add(self)

    # -- c10d interface ---------------------------------------------------

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
        red = _Reduction("allreduce", t.dtype, op)
        weighted = self._weighted and red.name in ("SUM", "AVG") and (t.is_floating_point() or t.is_complex())
        out = [t] if isinstance(tensors, torch.Tensor) else tensors

        def job():
            self._allreduce(t, red, weighted)
            return out

        return self._submit("allreduce." + red.name.lower(), _nbytes(t), job)

    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            raise ValueError("allreduce_coalesced: no tensors")
        dtype = tensors[0].dtype
        if any(t.dtype != dtype for t in tensors):
            raise TypeError("allreduce_coalesced: tensors must share one dtype")
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("allreduce_coalesced", dtype, op)

        def job():
            flat = torch.cat([t.reshape(-1) for t in tensors])
            self._allreduce(flat, red, False)
            off = 0
            for t in tensors:
                t.copy_(flat[off : off + t.numel()].view_as(t))
                off += t.numel()
            return tensors

        return self._submit("allreduce_coalesced", sum(_nbytes(t) for t in tensors), job)

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

        def job():
            w = _contiguous_cpu(t)
            self._comm.broadcast(w.data_ptr(), _nbytes(w), RT_UINT8, root)
            if w is not t:
                t.copy_(w)
            return out

        return self._submit("broadcast", _nbytes(t), job)

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = _single("allgather", input_tensors)
        if len(output_tensors) != 1:
            raise _unsupported("allgather of %d tensor lists per process" % len(output_tensors))
        outs = output_tensors[0]
        self._check_gather_outputs("allgather", outs, inp)

        def job():
            self._gather_into(outs, inp)
            return output_tensors

        return self._submit("allgather", _nbytes(inp) * self.size(), job)

    def _allgather_base(self, output, input, opts=None):
        if output.dtype != input.dtype or output.numel() != input.numel() * self.size():
            raise ValueError(
                "all_gather_into_tensor: output must hold %d x %d %s elements, has %d %s"
                % (self.size(), input.numel(), input.dtype, output.numel(), output.dtype)
            )

        def job():
            w = _contiguous_cpu(output)
            src = _contiguous_cpu(input)
            self._comm.allgather(src.data_ptr(), w.data_ptr(), _nbytes(src), RT_UINT8)
            if w is not output:
                output.copy_(w)
            return [output]

        return self._submit("allgather", _nbytes(output), job)

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

        def job():
            send = torch.cat([i.reshape(-1) for i in ins])
            self._reduce_scatter(send, out, red)
            return output_tensors

        return self._submit("reduce_scatter." + red.name.lower(), _nbytes(out) * self.size(), job)

    def _reduce_scatter_base(self, output, input, opts=None):
        if output.dtype != input.dtype or input.numel() != output.numel() * self.size():
            raise ValueError(
                "reduce_scatter_tensor: input must hold %d x %d %s elements, has %d %s"
                % (self.size(), output.numel(), output.dtype, input.numel(), input.dtype)
            )
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("reduce_scatter_tensor", output.dtype, op)

        def job():
            self._reduce_scatter(input.reshape(-1), output, red)
            return [output]

        return self._submit("reduce_scatter." + red.name.lower(), _nbytes(input), job)

    def barrier(self, opts=None):
        def job():
            self._comm.barrier()
            return []

        return self._submit("barrier", 0, job)

    def reduce(self, tensors, opts=None):
        t = _single("reduce", tensors)
        root = opts.rootRank if opts is not None else 0
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        red = _Reduction("reduce", t.dtype, op)
        mine = self.rank() == root

        def job():
            # An allreduce: the root keeps the result, other ranks keep
            # their input untouched.
            self._allreduce(t if mine else t.clone(), red, False)
            return [t]

        return self._submit("reduce." + red.name.lower(), _nbytes(t), job)

    def gather(self, output_tensors, input_tensors, opts=None):
        inp = _single("gather", input_tensors)
        root = opts.rootRank if opts is not None else 0
        mine = self.rank() == root
        outs = output_tensors[0] if mine else None
        if mine:
            self._check_gather_outputs("gather", outs, inp)

        def job():
            self._gather_into(outs, inp)
            return output_tensors

        return self._submit("gather", _nbytes(inp) * self.size(), job)

    def scatter(self, output_tensors, input_tensors, opts=None):
        out = _single("scatter", output_tensors)
        root = opts.rootRank if opts is not None else 0
        mine = self.rank() == root
        if mine:
            ins = input_tensors[0]
            if len(ins) != self.size() or any(i.dtype != out.dtype or i.numel() != out.numel() for i in ins):
                raise ValueError("scatter: the root needs %d tensors like the output" % self.size())

        def job():
            # A broadcast of every block; each rank keeps its own.
            if mine:
                flat = torch.cat([i.reshape(-1) for i in ins])
            else:
                flat = torch.empty(out.numel() * self.size(), dtype=out.dtype)
            self._comm.broadcast(flat.data_ptr(), _nbytes(flat), RT_UINT8, root)
            n = out.numel()
            out.copy_(flat[self.rank() * n : (self.rank() + 1) * n].view_as(out))
            return output_tensors

        return self._submit("scatter", _nbytes(out) * self.size(), job)

    def allgather_coalesced(self, *args, **kwargs):
        raise _unsupported("allgather_coalesced")

    def alltoall(self, *args, **kwargs):
        raise _unsupported("alltoall")

    def alltoall_base(self, *args, **kwargs):
        raise _unsupported("alltoall_base (all_to_all_single)")

    def send(self, *args, **kwargs):
        raise _unsupported("send (point-to-point)")

    def recv(self, *args, **kwargs):
        raise _unsupported("recv (point-to-point)")

    def recv_anysource(self, *args, **kwargs):
        raise _unsupported("recv_anysource (point-to-point)")

    def monitored_barrier(self, *args, **kwargs):
        raise _unsupported("monitored_barrier (use barrier)")

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

    def _submit(self, name, nbytes, job):
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

            inner, outer = self._worker.submit(run)
            work = _Work(inner, outer, self._keep)
            self._keep[id(work)] = work
            while len(self._keep) > _KEEP:
                try:
                    self._keep.popitem(last=False)
                except KeyError:  # emptied meanwhile by another thread
                    break
        return work

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


def local_ip(master_addr):
    """The IP this host is reached at by the job: RINGTAIL_LISTEN_IP, or
    127.0.0.1 when master_addr is loopback, or the address routing to
    master_addr (no packet is sent)."""
    ip = os.environ.get("RINGTAIL_LISTEN_IP")
    if ip:
        return ip
    try:
        infos = socket.getaddrinfo(master_addr, None, socket.AF_INET)
        addr = infos[0][4][0]
    except (OSError, IndexError):
        return "127.0.0.1"
    if addr.startswith("127."):
        return "127.0.0.1"
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as s:
        try:
            s.connect((addr, 9))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def free_port(ip):
    """A TCP port on ip that was free a moment ago."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def _has_secret():
    return bool(os.environ.get("RINGTAIL_SECRET") or os.environ.get("RINGTAIL_SECRET_FILE")) or os.environ.get(
        "RINGTAIL_INSECURE", ""
    ).lower() in ("1", "true", "yes")


def _duration(td):
    return "%dms" % max(1, int(td.total_seconds() * 1000))


def agree(store, rank, size, timeout, key="ringtail/coordinator"):
    """Agrees, through a c10d store, on where a new ringtail communicator of
    `size` ranks meets: rank 0 picks a free port on its IP (it hosts the
    rendezvous there), a job id and, unless the environment gives a secret,
    a random secret; the others read them. Returns rt_init overrides.

    The secret then travels through the store, so it protects the
    communicator exactly as well as the store protects the torch job:
    set RINGTAIL_SECRET (the same on every rank) to keep it off the store.
    """
    if rank == 0:
        ip = local_ip(os.environ.get("MASTER_ADDR", "127.0.0.1"))
        info = {"addr": ip, "port": free_port(ip), "job": "torch-" + secrets.token_hex(8)}
        if not _has_secret():
            info["secret"] = secrets.token_hex(16)
        store.set(key, json.dumps(info))
    else:
        store.wait([key], timeout)
        info = json.loads(store.get(key).decode())
    over = {
        "RANK": rank,
        "WORLD_SIZE": size,
        "LOCAL_RANK": rank,
        "LOCAL_WORLD_SIZE": size,
        "MASTER_ADDR": info["addr"],
        "MASTER_PORT": info["port"],
        "RINGTAIL_COORDINATOR": "",
        "RINGTAIL_JOB_ID": info["job"],
    }
    if "secret" in info:
        over["RINGTAIL_SECRET"] = info["secret"]
    if "RINGTAIL_TIMEOUT" not in os.environ:
        over["RINGTAIL_TIMEOUT"] = _duration(timeout)
    if "RINGTAIL_CONNECT_TIMEOUT" not in os.environ:
        over["RINGTAIL_CONNECT_TIMEOUT"] = _duration(min(timeout, timedelta(minutes=5)))
    return over


def create_process_group(store, rank, size, timeout):
    """The creator registered with torch.distributed.Backend: joins a new
    ringtail communicator agreed through store."""
    comm = _lib.Comm(agree(store, rank, size, timeout))
    return ProcessGroupRingtail(comm, rank, size)


# -- Eq. 7 weighting, steps and arrivals ---------------------------------------


def _ringtail_group(group):
    pg = group
    if pg is None or pg is dist.GroupMember.WORLD:
        pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupRingtail):
        raise TypeError(
            "group uses backend %r, not ringtail: pass a group made with backend='ringtail' "
            "(or use ringtail_torch.HookState for another backend)" % dist.get_backend(pg)
        )
    return pg


def set_local_batch(n, group=None):
    """Declares that this rank's gradients of the coming step are means over
    n samples. Later floating-point all_reduce calls with SUM or AVG on the
    group (DDP's gradient buckets among them) then compute CHRONICA's Eq. 7,
    sum_i n_i g_i / sum_i n_i, instead of the plain mean, until
    set_local_batch(None). It is a collective: every rank calls it at the
    same point, once per step (it allreduces the counts; the call itself
    does not block). It also starts a new step (mark_step).

    Every floating SUM/AVG allreduce of the group is weighted while it is
    set, so a metric averaged with all_reduce becomes the global-batch mean;
    a float SUM of counts would be wrong: use an integer tensor, or the
    scoped form ``with local_batch(n): loss.backward()``."""
    _ringtail_group(group)._set_local_batch(n)


@contextlib.contextmanager
def local_batch(n, group=None):
    """Scoped set_local_batch: only allreduces issued inside the block (a
    DDP backward pass, say) are weighted."""
    pg = _ringtail_group(group)
    was = pg._weighted
    pg._set_local_batch(n)
    try:
        yield
    finally:
        with pg._issue:
            pg._weighted = was


def mark_step(group=None):
    """Starts a new step for the arrival records (set_local_batch does it
    too)."""
    _ringtail_group(group).mark_step()


def arrivals(group=None):
    """This rank's Arrival records (see Arrival)."""
    return _ringtail_group(group).arrivals()


def gather_arrivals(group=None, last=16):
    """Collective: every rank's arrival times for its last `last` steps.
    Returns (steps, arrive, wait): the step numbers, and two float64
    tensors of shape [world, len(steps)]: the wall-clock time each rank
    issued its first collective of the step, and the seconds it spent
    inside that step's collectives (the rank everyone waited for waits
    least). Ranks on one host share a clock; across hosts compare waits.
    Steps must have been marked alike on every rank."""
    pg = _ringtail_group(group)
    recs = [a for a in pg.arrivals() if a.op != "local_batch"]
    steps = sorted({a.step for a in recs})[-last:]
    mine = torch.zeros(2, last, dtype=torch.float64)
    for j, s in enumerate(steps):
        of = [a for a in recs if a.step == s]
        mine[0, j] = min(a.issued for a in of)
        mine[1, j] = sum(a.finished - a.started for a in of)
    out = torch.zeros(pg.size(), 2, last, dtype=torch.float64)
    pg._allgather_base(out.view(-1), mine.view(-1)).wait()
    k = len(steps)
    return steps, out[:, 0, :k].clone(), out[:, 1, :k].clone()
