"""A DDP communication hook running gradient allreduce on ringtail, for
jobs that keep another backend (gloo, nccl) for everything else:

    dist.init_process_group("gloo")
    model = DDP(net)
    state = ringtail_torch.HookState()
    model.register_comm_hook(state, ringtail_torch.allreduce_hook)

The hook state owns its own ringtail communicator, agreed through the
default group's store, and its own FIFO worker. ``state.set_local_batch(n)``
turns the hook's average into CHRONICA's Eq. 7 weighted average.
"""

import itertools
import weakref

import torch
import torch.distributed as dist

from . import _lib
from ._lib import RT_AVG, RT_FLOAT64, RT_SUM
from .backend import _DTYPES, _Worker, _close, agree

_STATE_IDS = itertools.count()


class HookState:
    """State of allreduce_hook: a ringtail communicator over the ranks of
    process_group (default: the default group). Create one per DDP model,
    in the same order on every rank (it is a collective)."""

    def __init__(self, process_group=None, timeout=None):
        pg = process_group or dist.distributed_c10d._get_default_group()
        self.process_group = pg
        self.rank, self.size = pg.rank(), pg.size()
        store = dist.distributed_c10d._get_default_store()
        if timeout is None:
            timeout = dist.distributed_c10d.default_pg_timeout
        key = "ringtail/hook/%d/coordinator" % next(_STATE_IDS)
        self._comm = _lib.Comm(agree(store, self.rank, self.size, timeout, key=key))
        self._worker = _Worker("ringtail-hook")
        self._n = None
        self._factor = 1.0
        self._finalizer = weakref.finalize(self, _close, self._comm, self._worker)

    def set_local_batch(self, n):
        """Weights the following steps' gradients by n (see
        ringtail_torch.set_local_batch); None turns weighting off. A
        collective: every rank calls it at the same point."""
        if n is None:
            self._n = None
            return
        n = float(n)
        size = self.size

        def job():
            c = torch.tensor([n], dtype=torch.float64)
            self._comm.allreduce(c.data_ptr(), 1, RT_FLOAT64, RT_SUM)
            total = float(c.item())
            self._factor = size * n / total if total > 0 else 0.0
            return c

        self._n = n
        self._worker.submit(job)

    def shutdown(self):
        """Closes the hook's communicator (also done when the state is
        garbage-collected and at exit)."""
        self._finalizer()


def allreduce_hook(state, bucket):
    """DDP comm hook: averages the bucket across ranks on ringtail (Eq. 7
    weighted once state.set_local_batch was called)."""
    t = bucket.buffer()
    code = _DTYPES.get(t.dtype)
    if code is None or not t.is_floating_point():
        raise NotImplementedError("ringtail allreduce_hook: gradients of dtype %s" % t.dtype)
    weighted = state._n is not None

    def job():
        w = t if (t.device.type == "cpu" and t.is_contiguous()) else t.detach().cpu().contiguous()
        if weighted and state._factor != 1.0:
            w.mul_(state._factor)
        state._comm.allreduce(w.data_ptr(), w.numel(), code, RT_AVG)
        if w is not t:
            t.copy_(w)
        return t

    _, outer = state._worker.submit(job)
    return outer
