"""Module-level calls on a ringtail group: CHRONICA's Eq. 7 weighting
(set_local_batch, local_batch), steps and arrival records (mark_step,
arrivals, gather_arrivals), and the monitored barrier."""

import contextlib
from datetime import timedelta

import torch
import torch.distributed as dist

from .backend import ProcessGroupRingtail


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


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for ringtail groups (torch 1.13
    allows it only on Gloo): every rank reports to rank 0, which waits at
    most `timeout` (a timedelta; default: the group's timeout) and raises
    a RuntimeError (RingtailError, kind "timeout") naming the ranks that
    did not arrive, "Ranks 1, 3 failed to pass monitoredBarrier in 5000
    ms", as Gloo words it; the ranks that arrived raise in Gloo's words,
    "Rank 2 successfully reached monitoredBarrier, but received errors
    while waiting for send/recv from rank 0", with rank 0's verdict
    relayed, instead of timing out. With wait_all_ranks rank 0 waits for
    every rank and names all the missing ones, else only the first; a zero
    timeout leaves it no time ("Rank 0 timed out in monitoredBarrier after
    0 ms."). A group of another backend goes to torch's own."""
    pg = group
    if pg is None or pg is dist.GroupMember.WORLD:
        pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupRingtail):
        return dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError("monitored_barrier: timeout must be a datetime.timedelta, got %r" % (timeout,))
    pg.monitored_barrier(timeout, wait_all_ranks)
