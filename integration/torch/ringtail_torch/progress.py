"""The training loop's progress on ringtail's dashboard.

    ringtail_torch.report_progress(loss=train_loss, accuracy=test_acc, epoch=epoch, step=step)

sends one point of the training's progress — steps and epochs done,
training loss, held-out accuracy, throughput — to this rank's
observability (rt_record_progress): ``ringtail run --dashboard`` draws the
loss and accuracy as the job's training curve and shows the last point in
its header; the ranks' Prometheus metrics get ``ringtail_train_*``. Call it
on rank 0 (the numbers are the job's), as often as the loop evaluates. The
straggler hook (straggler.py) reports step time and throughput by itself,
about once a second.
"""

import math
import time
import weakref

import torch.distributed as dist

from .backend import ProcessGroupRingtail

# When this process first reported: the clock of points reported without
# an elapsed time.
_START = []

# The live straggler hooks (their communicators record progress where the
# process group is not ringtail's).
_HOOKS = weakref.WeakSet()


def _comm_for(group):
    """The ringtail communicator to record with: the group's (backend
    ringtail), else a live straggler hook's; None without one."""
    pg = group
    if pg is None or pg is dist.GroupMember.WORLD:
        pg = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    if isinstance(pg, ProcessGroupRingtail):
        return pg._comm
    for state in list(_HOOKS):
        return state._comm
    return None


def hook_started(state):
    """Records a live straggler hook (held weakly): report_progress
    records through its communicator when no ringtail group is given."""
    _HOOKS.add(state)


def _number(v, default):
    if v is None:
        return default
    return float(v.item() if hasattr(v, "item") else v)


def report_progress(loss=None, accuracy=None, step=None, epoch=None, samples_per_sec=None, step_time=None,
                    elapsed=None, group=None):
    """Reports a point of the training's progress (see the module doc).

    loss: the training loss (a float or a one-element tensor); accuracy:
    the held-out accuracy in [0, 1]; step: optimizer steps done; epoch:
    epochs done (a fraction within one); samples_per_sec: global samples a
    second; step_time: mean seconds a step; elapsed: seconds of training
    (default: since this process first reported). Leave out what was not
    measured. Returns False (recording nothing) when no ringtail
    communicator is open in this process; the communicator records only
    under ``ringtail run --dashboard`` (or with RINGTAIL_METRICS_ADDR or
    RINGTAIL_TIMELINE set)."""
    comm = _comm_for(group)
    if comm is None:
        return False
    now = time.monotonic()
    if not _START:
        _START.append(now)
    if elapsed is None:
        elapsed = now - _START[0]
    comm.record_progress(int(_number(step, 0)), _number(epoch, 0.0), float(elapsed), _number(loss, math.nan),
                         _number(accuracy, math.nan), _number(samples_per_sec, 0.0), _number(step_time, 0.0))
    return True


class StepClock:
    """Reports step time and throughput at most once per `period` seconds
    from a hook called once per step (the straggler hook)."""

    def __init__(self, comm, period=1.0):
        self._comm, self._period = comm, period
        self._last, self._steps, self._samples, self._total = None, 0, 0, 0

    def tick(self, samples=0):
        """One step ended, of `samples` global samples (0: unknown)."""
        now = time.monotonic()
        if not _START:
            _START.append(now)
        self._total += 1
        if self._last is None:
            self._last = now
            return
        self._steps += 1
        self._samples += samples
        span = now - self._last
        if span < self._period:
            return
        sps = self._samples / span if self._samples else 0.0
        self._comm.record_progress(self._total, 0.0, now - _START[0], math.nan, math.nan, sps, span / self._steps)
        self._last, self._steps, self._samples = now, 0, 0
