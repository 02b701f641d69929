"""Straggler handling for DDP scripts that change nothing but the backend
name: a DDP comm hook that runs ringtail's straggler driver
(straggler/driver, through the C ABI's rt_straggler_* calls).

    RINGTAIL_DDP_STRAGGLER=star python train.py     # or exact, adaptive

makes ``import ringtail_torch`` register the hook on every
DistributedDataParallel the script builds; or, in code, one call:

    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), ...)
    ringtail_torch.enable_straggler_handling(model, opt, policy="star")

Every decision is made in Go by straggler.Policy from the ranks' reported
step times. Policies: ``star`` (eviction: a slow rank becomes a *child*
that computes at its own pace; its parent folds each of its gradients into
a later step, within a staleness bound, and sends it fresh parameters),
``exact`` (StragglAR's overlap mode: the late rank joins a reduce-scatter
the others have begun; every step is the exact sum), ``adaptive`` (the
policy picks ring, overlap or eviction by predicted time to progress),
``shares`` (per-step shares of each global batch, exact), ``bsp`` (the
plain ring).

With an in-process map-style DataLoader over torch's BatchSampler and a
DistributedSampler (the common script), ``adaptive`` and ``shares`` split
each global batch — the union of every rank's sampler batch of the step —
by the plan's shares (share_of_batch) and weight the average by rows: a
slower rank computes fewer rows and every step is synchronous SGD's.
Otherwise a DistributedSampler's batches are fixed, and the policy takes
no shares and no compute budget.

In a loop without a DataLoader (it indexes its own tensors or draws from a
generator), ``adaptive`` trims rows inside DDP's forward instead
(rows.RowTrim): while the plan's shares predict a persistent straggler,
that rank runs the model on a random subset of its batch, its share, and
the step's average is weighted by the rows computed on every rank. Every
rank applies the same update, but it is not synchronous SGD's (the rows a
slow rank skips are not trained on that step); eval-mode and no_grad
forwards are never trimmed. Where a forward cannot be cut (the output not
a tensor or tuple of tensors with the batch's rows, the batch not the
first positional tensor, no_sync, several forwards or models per step)
the job runs the exact ring and says why.

A policy that evicts first checks the script (docs/pytorch-straggler.md,
"Every rank exits, whatever the script does"): at the first step a loop without a DataLoader (unless
adaptive trims its rows), several
batches per optimizer step or two hooked models run the exact ring; the
first epoch is watched with the exact ring, and a collective of the
script's own inside it, an early exit from the loop or accumulation turn
eviction off for the job. Whenever a rank's loop ends while a driver is
open it leaves with a flag in the reduced payload (leave()), so every rank
ends the epoch, or training, after the same step with the same state.

What the hook does each iteration (DDP calls it per gradient bucket; the
last bucket runs the step and completes every bucket's future):

* a member hands the flat gradient to the driver, which reduces it with
  the members (folding children's gradients into its sum) and returns the
  sum over the gradients applied; DDP writes the mean into ``.grad`` and
  the script's ``optimizer.step()`` applies it, identically on every
  member. The unit is one rank's gradient, as in DDP's own average.
* a child sends its gradient to its parent and returns at once. After the
  backward pass (an autograd callback queued after DDP's own) its
  ``.grad`` are set to None, so the script's ``optimizer.step()`` leaves
  parameters and optimizer state alone, and the parameters its parent
  posted (when newer ones came) are copied into the model.
* the state a parent posts is the model's parameters, and — when a child
  rejoins and at the end of an epoch — the optimizer's state tensors too
  (SGD's momentum, Adam's moments and step), so every rank's parameters
  and optimizer state are identical after the epoch's flush.

Data: with the loader a script iterates (the first DataLoader whose batch
preceded a DDP backward, or ``loader=``), a child skips the batches of the
steps it is behind (it computes the batch of the step whose parameters it
holds, as STAR's evicted workers do: those samples are not trained on that
epoch), so it ends its epoch with the others instead of taking three times
as long. When the loader is exhausted (a child: when its parent sent the
final state) every rank flushes the driver: children's last gradients are
folded and applied as one more optimizer step on every rank, parameters
and optimizer state are identical everywhere, and the next epoch starts a
new driver. No gradient that was computed is dropped.

Limits (checked where possible): DDP over the default group, float32
parameters, ``find_unused_parameters=False``, no module buffers broadcast
(``broadcast_buffers=False`` or a model without buffers), one optimizer
over the model's parameters whose state is tensors. The first iteration
of the job is a plain average (the optimizer's state does not exist
before its first step).
"""

import atexit
import collections
import gc
import itertools
import os
import sys
import threading
import time
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from . import _lib
from ._lib import RT_FLOAT32, RT_ROLE_CHILD, RT_STRAGGLER_EQUAL_SHARES, RT_STRAGGLER_SAMPLED, RT_SUM
from _ringtail_env import env_bool

from .groups import agree
from .progress import StepClock, hook_started
from .rows import RowTrim
from .sampler import split_counts

ENV = "RINGTAIL_DDP_STRAGGLER"
ENV_TIMEOUT = "RINGTAIL_DDP_STRAGGLER_TIMEOUT"
# RINGTAIL_DDP_STRAGGLER_WATCH=0: a policy that evicts may evict in the
# first epoch, without watching the script's loop first (see StragglerState).
ENV_WATCH = "RINGTAIL_DDP_STRAGGLER_WATCH"

# The policies whose plans evict a rank into a parent tree: its loop runs
# fewer iterations than the members'.
EVICTING = ("star", "adaptive")

# Names accepted for a policy, and the straggler.Preset each means.
POLICIES = {"star": "star", "evict": "star", "exact": "exact", "overlap": "exact", "adaptive": "adaptive", "bsp": "bsp",
            "shares": "shares"}

_IDS = itertools.count()
# The live hook states, for the DataLoader patch (module state is what a
# patch of torch's classes can reach).
_ACTIVE = weakref.WeakSet()
# The DataLoader iterator that yielded last while some state had no loader.
_LAST_YIELD = [None]
_ORIG = {}
# Set while a patched torch.distributed call runs on this thread (a
# collective that calls another counts once).
_IN_CALL = threading.local()
# Set by the excepthook: the process ends on an uncaught exception, so the
# exit handler closes the hooks' communicators instead of flushing.
_FAILED = [False]


def _no_loader():
    return None


def note(line):
    """Prints one line of the straggler hook on stderr, at once."""
    sys.stderr.write("ringtail straggler: %s\n" % line)
    sys.stderr.flush()


def policy_name(name):
    """The straggler.Preset name for a policy name (see POLICIES)."""
    key = (name or "").strip().lower()
    if key not in POLICIES:
        raise ValueError("ringtail straggler policy %r: want one of %s" % (name, ", ".join(sorted(POLICIES))))
    return POLICIES[key]


class StragglerState:
    """State of straggler_hook for one DDP model: its own ringtail
    communicator (agreed through the default store: create it on every
    rank at the same point, as DDP itself), the flat gradient and state
    buffers, the driver of the current epoch, and statistics (``stats``).
    Use enable_straggler_handling rather than building it."""

    def __init__(self, model, optimizer=None, policy="star", loader=None, timeout=None, sampler=None):
        if not isinstance(model, DistributedDataParallel):
            raise TypeError("ringtail straggler handling needs a DistributedDataParallel model, got %s" % type(model).__name__)
        if getattr(model, "find_unused_parameters", False):
            raise ValueError("ringtail straggler handling: find_unused_parameters=True runs a collective every "
                             "step that an evicted rank would miss; build DDP without it")
        if model.process_group.size() != dist.get_world_size():
            raise ValueError("ringtail straggler handling: DDP over a subgroup is not supported (the default group only)")
        syncs = getattr(model, "will_sync_module_buffers", None)
        if syncs is not None and syncs():
            raise ValueError("ringtail straggler handling: DDP broadcasts module buffers every forward, which an "
                             "evicted rank would miss; pass broadcast_buffers=False")
        self.requested = policy_name(policy)
        # The policy the job runs: the requested one, or the exact ring
        # where the script's shape cannot take eviction (_check_shape).
        self.policy = self.requested
        # A policy that evicts watches the first epoch with the exact ring:
        # eviction starts once a whole epoch showed a loop it can serve.
        self._watching = self.requested in EVICTING and env_bool(ENV_WATCH, True)
        self._unfit = []  # why eviction cannot serve this script
        self.note = ""  # the hook's last line about its mode
        self._over = False  # training ended on the members: nothing left to do
        self._in_epoch = False  # the bound loader has yielded and is not exhausted
        self._since_step = 0  # batches of the bound loader since the last step
        self._epoch_steps = 0  # steps fed by the bound loader's current iterator
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        if sampler is not None and not (hasattr(sampler, "set_weights") and hasattr(sampler, "global_batch")):
            raise TypeError("ringtail straggler handling: sampler must be a ringtail_torch.HeteroBatchSampler, got %s"
                            % type(sampler).__name__)
        # With a HeteroBatchSampler the policy's shares split every global
        # batch (exact: the update is the whole batch's mean gradient, every
        # step, while a slow rank gets fewer rows).
        self._sampler = sampler
        # With a DistributedSampler the hook drives (_check_shape): its
        # per-rank batch size, and the plan's shares of the next step.
        self._split = None
        self._shares = None
        self._lists = None  # every rank's indices this epoch (the sampler's own)
        self._batch_len = None
        # A loop without a DataLoader under adaptive: the trim of rows in
        # DDP's forward (rows.RowTrim), and whether the job uses it.
        self._trim = RowTrim(model, self.rank) if self.requested == "adaptive" else None
        self._rows = False
        self._rows_off = False  # this rank stopped trimming (said once)
        self._rows_batch = None  # the batch rows the driver's global batch counts per rank
        self._last_batch = None
        self._params = [p for p in model.module.parameters() if p.requires_grad]
        for p in self._params:
            if p.dtype != torch.float32:
                raise TypeError("ringtail straggler handling: parameters must be float32, got %s" % p.dtype)
        self._offsets, off = {}, 0
        for p in self._params:
            self._offsets[id(p)] = (off, p.numel())
            off += p.numel()
        self.payload = off
        self._optimizer = optimizer
        if timeout is None:
            env = os.environ.get(ENV_TIMEOUT)
            timeout = float(env) if env else dist.distributed_c10d.default_pg_timeout.total_seconds()
        elif hasattr(timeout, "total_seconds"):
            timeout = timeout.total_seconds()
        if not timeout > 0:
            raise ValueError("ringtail straggler handling: timeout %r s must be positive" % timeout)
        self._timeout_ms = int(timeout * 1000)
        store = dist.distributed_c10d._get_default_store()
        prefix = "ringtail/straggler/%d/" % next(_IDS)
        self._store, self._over_key = store, prefix + "over"
        self._comm = _lib.Comm(agree(store, self.rank, self.size, timedelta(seconds=timeout), key=prefix + "coordinator"))
        # The reduced buffers hold the flat gradient and one more element,
        # the leave flag: a rank whose loop has ended reduces 1 there, so
        # every member learns it from the same step's sum (see leave()).
        self._grad = torch.zeros(self.payload + 1, dtype=torch.float32)
        self._late = torch.zeros(self.payload + 1, dtype=torch.float32)
        self._ending = False  # a step's sum carried a leave flag
        self._state = None  # parameters, then the optimizer's tensors (flat)
        self._opt_tensors = []
        self._drv = None
        self._pending = []
        self._warm = False
        self._role = _lib.RT_ROLE_MEMBER
        self._next = 0
        self._done = False
        self._base = 0
        self._epoch = 0
        self._last_return = None
        self._iter_start = None
        # The loader: the batch sampler of its iterators identifies it.
        self._loader_key = weakref.ref(loader._index_sampler) if loader is not None else None
        self._it = None
        self._pos = 0
        self._yielded = 0
        self._cache = None
        self.stats = {
            "computed": 0, "applied": {}, "flushed": [], "roles": collections.Counter(), "modes": collections.Counter(),
            "folded": 0, "max_staleness": 0.0, "replaced": 0, "skipped": 0, "repeated": 0, "waits": 0, "epochs": 0, "rejoined": 0,
        }
        if self._trim is not None:
            self.stats["rows"] = self._trim.stats
        # Rank 0 reports step time and throughput to the dashboard.
        self._clock = StepClock(self._comm) if self.rank == 0 else None
        self._finalizer = weakref.finalize(self, _shutdown, self._comm, [None])
        _ACTIVE.add(self)
        hook_started(self)
        _install_loader_patch()
        _install_end_patches()

    # --- the hook ---------------------------------------------------------

    def _reduce(self, pending):
        """Runs one iteration's step on every bucket's gradient and
        completes their futures."""
        if self._ending or self._over:
            # Training (or the epoch) ended with the others: nothing reduces
            # this gradient and no update follows. A flush still due runs
            # once the backward pass is over (it may apply an update).
            if self._trim is not None:
                self._trim.take()
            for bucket, fut in pending:
                fut.set_result(bucket.buffer())
            self._after_backward(True, False, False)
            if self._ending or self._drv is not None:
                end = self._end_with_the_others if self._ending else self.flush
                engine = torch.autograd.Variable._execution_engine
                engine.queue_callback(lambda: engine.queue_callback(end))
            return
        now = time.perf_counter()
        start = self._last_return or self._iter_start or now
        arrival_us = max(0, int((now - start) * 1e6))
        if not self._warm:
            self._bind_loader()
            if self._loader_key is None:
                self._loader_key = _no_loader
        elif self._loader_key is not _no_loader and self._since_step == 0 and self._fresh_iterator() is not None:
            # A DataLoader other than the bound one fed this step (the
            # script builds its loader anew each epoch): it is the loop's
            # loader now.
            it = self._fresh_iterator()
            if self._drv is not None:
                self.flush()  # the previous loader was left before it ran out
            if self._in_epoch and self._epoch_steps > 0:
                self._end_watch("a new DataLoader began first")
            self._bind_loader()
            self._in_epoch, self._since_step, self._epoch_steps = True, it._num_yielded, 0
            if self._split and self._agree_unfit(_split_batch_size(it) != self._split)[1]:
                self._split = None
                self._say("the script's new DataLoader cannot be split by shares: every rank keeps its "
                          "DistributedSampler's batches (the exact ring) from here on")
        if self._watching and self._drv is not None and self._since_step != 1:
            self._unfit.append("%d batches of its DataLoader went into one optimizer step (gradient accumulation)"
                               % self._since_step)
        self._since_step = 0
        self._epoch_steps += 1
        _LAST_YIELD[0] = None
        g = self._grad
        for bucket, _ in pending:
            for p, grad in zip(bucket.parameters(), bucket.gradients()):
                off, n = self._offsets[id(p)]
                g[off:off + n].copy_(grad.reshape(-1))
        self.stats["computed"] += 1
        rows, batch = self._take_rows()
        samples = 1  # the unit is one rank's (mean) gradient, as in DDP
        if (self._sampler is not None or self._split) and self._warm:
            # A share of the global batch: the gradient summed over its
            # rows, and the step divides by the rows applied.
            samples = self._batch_len or 1
            g.mul_(samples)
        elif self._rows and self._warm:
            # rows of its batch of batch rows computed (the others' outputs
            # were constants): the mean loss's gradient times batch is the
            # sum over the rows computed, and the step divides by the rows
            # computed on every rank.
            samples = rows
            g.mul_(batch)
        g[-1] = 0.0
        if not self._warm:
            # The optimizer has no state before its first step: the job's
            # first iteration is a plain average.
            self._comm.allreduce(g.data_ptr(), self.payload + 1, RT_FLOAT32, RT_SUM)
            applied, replaced, full = self.size, False, False
            self.stats["applied"][(self._epoch, -1)] = applied
            self.stats["roles"]["member"] += 1
            self.stats["modes"]["ring"] += 1
            self._warm = True
            self._check_shape()
        else:
            if self._drv is None:
                self._open()
            if self._role != RT_ROLE_CHILD:
                self._save_state()
            res = self._drv.step(g.data_ptr(), samples, arrival_us, arrival_us)
            member = res.role != RT_ROLE_CHILD
            applied, replaced, full = self._record(res)
            if member and g[-1].item() > 0:
                # A rank left its loop: every member ends with this step.
                self._ending = True
            if self._sampler is not None or self._split or self._rows:
                shares = self._drv.shares(self.size)
                if self._sampler is not None:
                    self._sampler.set_weights(shares)
                if self._rows:
                    self._trim.plan(shares, self.rank)
                self._shares = shares
                self.stats["shares"] = shares
        if applied > 0:
            g.div_(applied)
            for bucket, _ in pending:
                for p, grad in zip(bucket.parameters(), bucket.gradients()):
                    off, n = self._offsets[id(p)]
                    grad.copy_(g[off:off + n].view_as(grad))
        for bucket, fut in pending:
            fut.set_result(bucket.buffer())
        if applied == 0 or replaced:
            self._after_backward(applied == 0, replaced, full)
        self._tick()
        self._last_return = time.perf_counter()

    def _take_rows(self):
        """The rows the step's forward computed and its batch's rows (the
        trim's count; (1, 1) without a trim). A step that did not run one
        training forward through DDP cannot be cut: the trim says why, and
        the step counts as a whole batch."""
        if self._trim is None:
            return 1, 1
        rows, batch, forwards = self._trim.take()
        if forwards != 1:
            self._trim.note_unfit("%d forwards through DDP went into one optimizer step" % forwards)
        if self._rows and self._trim.unfit and not self._rows_off:
            # (Each rank on its own: a rank that computes whole batches
            # reports them, and every rank's update stays the same.)
            self._rows_off = True
            note("rank %d cannot trim rows any more (%s): it computes whole batches from here on"
                 % (self.rank, "; ".join(self._trim.unfit)))
        if rows is None:
            rows = batch = self._rows_batch or 1
        elif forwards != 1:
            rows = batch
        self._last_batch = batch
        return rows, batch

    # --- the script's shape -----------------------------------------------

    def _agree_flags(self, flags):
        """Collective over the hook's communicator: the largest of each
        value over the ranks (every rank decides the same)."""
        flag = torch.tensor([float(f) for f in flags], dtype=torch.float32)
        self._comm.allreduce(flag.data_ptr(), len(flags), RT_FLOAT32, _lib.RT_MAX)
        return flag.tolist()

    def _agree_unfit(self, undrivable=False):
        """Collective over the hook's communicator: whether any rank found
        a reason eviction cannot serve the script, and whether any rank's
        loader cannot be split by shares (every rank decides the same)."""
        a, b = self._agree_flags([1 if self._unfit else 0, 1 if undrivable else 0])
        return a > 0, b > 0

    def _say(self, line):
        self.note = line
        if self.rank == 0:
            note(line)

    def _check_shape(self):
        """At the job's first step (every rank, after its first reduction):
        a policy that evicts needs a loop it can keep in step — one
        DataLoader the hook drives, one batch per optimizer step, one DDP
        model with the hook. Where the script is not such a loop, the job
        runs the exact ring and says why."""
        if self.requested not in EVICTING and self.requested != "shares":
            return
        # The shares of an unchanged DistributedSampler: the policies that
        # take shares split each of its global batches by them.
        it = self._it() if self._it is not None else None
        batch = _split_batch_size(it) if self._sampler is None and self._yielded == 1 and len(_ACTIVE) == 1 else None
        if self._loader_key is _no_loader:
            self._unfit.append("no DataLoader feeds the loop (it indexes its own data), so an evicted rank could not "
                               "skip the batches of the steps it is behind")
        elif self._yielded > 1:
            self._unfit.append("%d batches of its DataLoader went into the first optimizer step (gradient "
                               "accumulation)" % self._yielded)
        if len(_ACTIVE) > 1:
            self._unfit.append("%d DDP models have the hook: each would evict on its own" % len(_ACTIVE))
        # A loop without a DataLoader under adaptive: rows trimmed inside
        # DDP's forward (rows.RowTrim), where every rank's forwards can be.
        trying = self._trim is not None and self._loader_key is _no_loader
        rows_why = list(self._trim.unfit) if trying else []
        if trying and len(_ACTIVE) > 1:
            rows_why.append("%d DDP models have the hook" % len(_ACTIVE))
        rows = self._last_batch if trying and not rows_why and self._last_batch else 0
        unfit, undrivable, no_rows, rows = self._agree_flags(
            [1 if self._unfit else 0, 1 if batch is None else 0, 0 if rows else 1, rows])
        unfit, undrivable = unfit > 0, undrivable > 0
        if not undrivable and self.requested in ("adaptive", "shares"):
            self._split, self.policy, self._watching = batch, "shares", False
            self._say("policy %s splits each global batch of the script's DistributedSampler (%d x %d rows) by the "
                      "policy's shares: a slower rank computes fewer rows, and every step applies the whole batch's "
                      "mean gradient (synchronous SGD's update)" % (self.requested, self.size, batch))
            return
        if trying and not no_rows:
            self._rows, self._rows_batch, self.policy, self._watching = True, int(rows), "shares", False
            self._trim.on = True
            self._say("policy %s: no DataLoader feeds the loop, so it trims rows inside DDP's forward instead: while "
                      "the policy's shares predict a persistent straggler, that rank runs the model on a random subset "
                      "of its batch (its share; the other rows' outputs are zeros without gradient) and every step "
                      "applies the mean gradient over the rows computed on every rank (the same update everywhere; "
                      "not synchronous SGD: the rows skipped are not trained on that step). Forwards in eval mode "
                      "or under no_grad are never trimmed" % self.requested)
            return
        if trying:
            self._unfit.append("rows cannot be trimmed inside DDP's forward (%s)"
                               % ("; ".join(rows_why) or "another rank's forward cannot be cut"))
        if self.requested not in EVICTING:
            return
        if unfit:
            self._fall_back("at its first step")
        elif self._watching:
            self._say("policy %s watches the first epoch with the exact ring; it evicts from the second epoch on if "
                      "the loop keeps in step (no collective of the script inside the epoch, no early exit, one "
                      "batch per step)" % self.requested)

    def _fall_back(self, when):
        """The exact ring for the rest of the job, and one line why."""
        why = "; ".join(dict.fromkeys(self._unfit)) or "another rank found the script's loop unfit for eviction"
        self.policy, self._watching = "exact", False
        self._say("policy %s cannot serve this script (%s: %s): the job runs the exact ring (policy exact) instead"
                  % (self.requested, when, why))

    def _end_watch(self, how):
        """The first epoch ended (every rank, at the same point): eviction
        from the next epoch on, or the exact ring for the job."""
        if not self._watching:
            return
        if how != "exhausted":
            self._unfit.append("the loop left its DataLoader before it ran out (%s)" % how)
        if self._agree_unfit()[0]:
            self._fall_back("in the first epoch")
            return
        self._watching = False
        self._say("the first epoch kept in step: policy %s evicts from the next epoch on" % self.requested)

    def script_collective(self, name):
        """The script calls torch.distributed.<name> (a collective of its
        own): inside an epoch whose driver is open, an evicted rank (which
        runs fewer iterations) would miss it."""
        if self._over or not self._in_epoch:
            return
        if self._watching:
            self._unfit.append("the script calls dist.%s inside an epoch" % name)
        elif self.policy in EVICTING and self._drv is not None and self._role != RT_ROLE_CHILD:
            # The first epoch did not show it: the members end the epoch's
            # eviction here (the evicted ranks get the final state and leave
            # their epoch's loop) and the job runs the exact ring.
            self._unfit.append("the script calls dist.%s inside an epoch" % name)
            self.leave("rank %d called dist.%s inside an epoch" % (self.rank, name), over=False)
            self._fall_back("in epoch %d" % self._epoch)

    def end(self, why):
        """Training ends on this rank (destroy_process_group, the process's
        exit) while its epoch's driver is open: the rank leaves (the other
        ranks end training with it), so every rank ends with the same
        parameters."""
        if self._drv is None:
            return
        if self._over:
            # An evicted rank that took the final state (training is over)
            # still owes the epoch's flush.
            self.flush()
            return
        self.leave(why, over=True)

    def leave(self, why, over):
        """This rank has left its epoch's loop while the epoch's driver is
        open (over: and training). It says so in the store when training is
        over (the other ranks read why there), makes one more step with an
        empty gradient and the leave flag — every member sees the flag in
        that step's sum (a child's reaches the members through its parent's
        fold), so all ranks end the epoch after the same step, whatever
        their loops' counts — and flushes: every rank then holds the same
        parameters and optimizer state."""
        if over:
            try:
                self._store.set(self._over_key + "/why", why)
                self._store.add(self._over_key, 1)
            except Exception:  # noqa: BLE001 - the store's host may be gone
                pass
        # Until this rank sees the flag in a member step's sum (a member: at
        # once) or its parent sends the final state (a child: once the
        # members saw its flag), each step is an empty one with the flag.
        # A child may be readmitted meanwhile: its next step is a member's.
        g = self._grad
        while not self._done and not self._ending:
            g.zero_()
            g[-1] = 1.0
            if self._role != RT_ROLE_CHILD:
                self._save_state()
            res = self._drv.step(g.data_ptr(), 0, 0, 0)
            self.stats["waits"] += 1
            member = res.role != RT_ROLE_CHILD
            applied, replaced, full = self._record(res)
            if replaced:
                self._load_state(full)
            if member:
                self._ending = g[-1].item() > 0  # its own flag is in the sum
            if applied > 0:
                self._apply(g, applied)
        self._ending = False
        self.flush()
        self._over = self._over or over

    def _end_with_the_others(self):
        """A step's sum carried a leave flag: this rank ends the epoch with
        the rank that left (its later batches of the epoch are not
        computed), and training too if that rank's training is over."""
        self._ending = False
        step, epoch = self._next, self._epoch
        if self._drv is not None:
            self.flush()
        self._in_epoch = False
        try:
            over = self._store.add(self._over_key, 0) > 0
            why = self._store.get(self._over_key + "/why").decode() if over else "it began a new epoch"
        except Exception as e:  # noqa: BLE001 - the store's host (rank 0) is gone
            over, why = True, "the store is gone: %s" % e
        self._over = self._over or over
        note("rank %d: another rank left its epoch's loop (%s); this rank ends %s with it after step %d of epoch %d "
             "(every rank holds the same parameters)" % (self.rank, why, "training" if over else "the epoch", step,
                                                         epoch))

    def _learn_over(self):
        """A child that got the final state asks whether training is over
        (the members said so in the store) or only the epoch."""
        try:
            over = self._store.add(self._over_key, 0) > 0
            why = self._store.get(self._over_key + "/why").decode() if over else ""
        except Exception as e:  # noqa: BLE001 - the store's host (rank 0) is gone: so are the members
            over, why = True, "the store is gone: %s" % e
        if over:
            self._over = True
            note("rank %d: the members ended training (%s) at step %d of epoch %d; this evicted rank took the final "
                 "parameters and stops: its remaining batches are not computed" % (self.rank, why, self._next,
                                                                                   self._epoch))

    def _tick(self):
        """Counts the step for the dashboard (rank 0): the bound loader's
        batch size on every rank makes the throughput."""
        if self._clock is None:
            return
        sampler = self._loader_key() if self._loader_key is not None else None
        batch = getattr(sampler, "batch_size", None) or 0
        try:
            self._clock.tick(batch * self.size)
        except _lib.RingtailError:
            self._clock = None  # a library without rt_record_progress

    def _record(self, res):
        """Takes a step's result: role, next step, statistics; returns
        (applied, replaced, whether the replacing state was whole)."""
        was_child = res.role == RT_ROLE_CHILD
        self._role, self._next = res.next_role, res.next_step
        st = self.stats
        st["roles"][_lib.ROLE_NAMES.get(res.role, str(res.role))] += 1
        if not was_child:
            st["modes"][_lib.MODE_NAMES.get(res.mode, str(res.mode))] += 1
            st["applied"][(self._epoch, int(res.step))] = int(res.applied)
            st["folded"] += int(res.folded)
            st["max_staleness"] = max(st["max_staleness"], float(res.staleness))
        replaced = bool(res.replaced)
        if replaced:
            st["replaced"] += 1
        if was_child and res.next_role != RT_ROLE_CHILD and not res.done:
            st["rejoined"] += 1
        if res.done:
            self._done = True
            if was_child:
                self._learn_over()
        # A child gets the whole state (optimizer included) when it rejoins
        # and at the end; otherwise the parameters alone.
        full = replaced and (bool(res.done) or res.next_role != RT_ROLE_CHILD)
        return int(res.applied), replaced, full

    def _after_backward(self, no_update, replaced, full):
        """Queues, behind DDP's own end-of-backward callback (which writes
        .grad), one that drops this rank's .grad (no update) and loads the
        state its parent sent."""
        engine = torch.autograd.Variable._execution_engine

        def then():
            engine.queue_callback(apply)

        def apply():
            with torch.no_grad():
                if replaced:
                    self._load_state(full)
                if no_update:
                    for p in self._params:
                        p.grad = None

        engine.queue_callback(then)

    # --- the driver -------------------------------------------------------

    def _open(self):
        """Starts the epoch's driver over the current parameters and
        optimizer state."""
        if self._optimizer is None:
            self._optimizer = find_optimizer(self._params)
        self._opt_tensors = self._optimizer_tensors()
        total = self.payload + sum(t.numel() for t in self._opt_tensors)
        if self._state is None or self._state.numel() != total:
            self._state = torch.zeros(total, dtype=torch.float32)
        policy = "exact" if self._watching else self.policy
        if self._sampler is not None or self._split or self._rows:
            if self._sampler is not None:
                batch = self._sampler.global_batch
            else:
                batch = (self._split or self._rows_batch) * self.size
            self._drv = _lib.Straggler(self._comm, self.payload + 1, policy, batch, RT_STRAGGLER_SAMPLED,
                                       self._timeout_ms)
        else:
            self._drv = _lib.Straggler(self._comm, self.payload + 1, policy, self.size, RT_STRAGGLER_EQUAL_SHARES,
                                       self._timeout_ms)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self._comm, [self._drv])
        self._drv.set_state(self._state.data_ptr(), self.payload, total)
        self._role, self._next, self._done = _lib.RT_ROLE_MEMBER, 0, False
        self._base = self._pos - 1  # the batch being computed is step 0's
        self.stats["epochs"] += 1

    def _optimizer_tensors(self):
        """The optimizer's state tensors, by parameter then key: what a
        rejoining child needs besides the parameters."""
        out = []
        for p in self._params:
            for k in sorted(self._optimizer.state.get(p, {})):
                v = self._optimizer.state[p][k]
                if v is None:
                    continue
                if not torch.is_tensor(v) or not v.is_floating_point():
                    raise TypeError("ringtail straggler handling: optimizer state %r of type %s cannot be shared; "
                                    "use an optimizer whose state is float tensors" % (k, type(v).__name__))
                out.append(v)
        return out

    def _save_state(self):
        """Copies the parameters and optimizer state into the flat state (a
        member: what it posts to its children)."""
        s = self._state
        with torch.no_grad():
            for p in self._params:
                off, n = self._offsets[id(p)]
                s[off:off + n].copy_(p.detach().reshape(-1))
            now = self._optimizer_tensors()
            if len(now) != len(self._opt_tensors) or any(a.shape != b.shape for a, b in zip(now, self._opt_tensors)):
                raise RuntimeError("ringtail straggler handling: the optimizer's state changed shape during an epoch")
            self._opt_tensors = now
            off = self.payload
            for t in now:
                s[off:off + t.numel()].copy_(t.detach().reshape(-1))
                off += t.numel()

    def _load_state(self, full):
        """Copies the flat state (from the parent) into the parameters and,
        when full, the optimizer state."""
        s = self._state
        with torch.no_grad():
            for p in self._params:
                off, n = self._offsets[id(p)]
                p.copy_(s[off:off + n].view_as(p))
            if full:
                off = self.payload
                for t in self._opt_tensors:
                    t.copy_(s[off:off + t.numel()].view_as(t))
                    off += t.numel()

    def _await_final(self):
        """A child out of batches: hands in empty gradients (they carry no
        sample) until its parent sends the final state."""
        while not self._done and self._role == RT_ROLE_CHILD:
            res = self._drv.step(None, 0, 0, 0)
            self.stats["waits"] += 1
            _, replaced, full = self._record(res)
            if replaced:
                self._load_state(full)

    def _finish_epoch(self, batches):
        """Ends this rank's epoch when its loader has run out: the epoch
        ends where the members' steps end (the loader's length), whatever
        this rank's own loader did. A child that ran ahead of its
        parameters (it computes while it waits for them) waits for the final
        state; if it is readmitted meanwhile, it runs the remaining member
        steps with an empty gradient and applies each step's sum as the
        members do (its optimizer, the same update), so every rank flushes
        at the same point with the same parameters."""
        if self._drv is None:
            return
        while not self._done:
            if self._role == RT_ROLE_CHILD:
                self._await_final()
                continue
            if self._target() >= batches:
                return
            self._save_state()
            g = self._grad
            g.zero_()
            res = self._drv.step(g.data_ptr(), 0, 0, 0)
            self.stats["waits"] += 1
            applied, replaced, full = self._record(res)
            if replaced:
                self._load_state(full)
            if applied > 0:
                self._apply(g, applied)

    def _apply(self, g, applied):
        """Applies a summed gradient over applied ranks' gradients with the
        script's optimizer, outside its loop (the flush's leftovers, a
        rank's member steps after its loader ran out)."""
        g.div_(applied)
        saved = [p.grad for p in self._params]
        for p in self._params:
            off, n = self._offsets[id(p)]
            p.grad = g[off:off + n].view_as(p).to(p.device, copy=True)
        self._optimizer.step()
        for p, old in zip(self._params, saved):
            p.grad = old

    def flush(self):
        """Ends the epoch's driver: children's last gradients are folded
        and applied as one more optimizer step on every rank, and every
        rank holds the same parameters and optimizer state. Called when the
        bound loader is exhausted; call it yourself (every rank, at the same
        point) when training without one."""
        if self._drv is None:
            return
        if self._role == RT_ROLE_CHILD and not self._done:
            self._await_final()
        if self._role != RT_ROLE_CHILD and not self._done:
            self._save_state()
        res = self._drv.flush(self._late.data_ptr())
        applied = int(res.applied)
        self.stats["flushed"].append(applied)
        if applied > 0:
            self._apply(self._late, applied)
        self._drv.close()
        self._drv = None
        self._shares = None  # the next epoch's driver starts from equal shares
        if self._trim is not None:
            self._trim.reset()
        self._role, self._next, self._done = _lib.RT_ROLE_MEMBER, 0, False
        self._epoch += 1
        self._last_return = None

    def shutdown(self):
        """Closes the hook's driver and communicator (also done when the
        state is garbage-collected)."""
        self._finalizer()

    # --- the loader -------------------------------------------------------

    @staticmethod
    def _fresh_iterator():
        """The DataLoader iterator (not a hook's) that yielded since the
        last step, or None."""
        ref = _LAST_YIELD[0]
        it = ref() if ref is not None else None
        return it if it is not None and getattr(it, "_index_sampler", None) is not None else None

    def _bind_loader(self):
        ref = _LAST_YIELD[0]
        it = ref() if ref is not None else None
        if it is None or getattr(it, "_index_sampler", None) is None:
            return
        self._loader_key = weakref.ref(it._index_sampler)
        self._it, self._pos, self._yielded = weakref.ref(it), it._num_yielded, it._num_yielded

    def _target(self):
        """The batch of this epoch the next iteration computes."""
        if self._drv is None:
            return self._pos
        return self._base + self._next

    def _next_batch(self, it, orig):
        if self._ending:
            self._end_with_the_others()
            if not self._over and self._it is not None and self._it() is it:
                raise StopIteration  # the epoch ended with the others'
        if self._over:
            # Training ended on the members: every later batch is theirs
            # to skip too.
            if self._drv is not None:
                self.flush()
            raise StopIteration
        if self._it is None or self._it() is not it or (it._num_yielded == 0 and self._yielded > 0):
            # A new epoch (a new iterator, or a persistent one reset).
            if self._drv is not None:
                # The script left the previous epoch's loop early.
                self.leave("rank %d began a new epoch" % self.rank, over=False)
            if self._in_epoch and self._epoch_steps > 0:
                # (An iterator that fed no step — `next(iter(loader))` to
                # peek at a batch — is not the loop's.)
                self._end_watch("a new epoch began first")
            self._in_epoch, self._epoch_steps = False, 0
            self._it, self._pos, self._yielded, self._cache = weakref.ref(it), 0, 0, None
        self._iter_start = time.perf_counter()
        if self._done:
            self.flush()
            raise StopIteration
        target = self._target()
        if target < self._pos and self._role != RT_ROLE_CHILD and self._cache is not None:
            # A rank that rejoined ahead of its step: the batch again.
            self.stats["repeated"] += 1
            return self._cache
        try:
            while self._pos < target:
                _skip(it, orig)
                self._pos += 1
                self.stats["skipped"] += 1
            data = self._split_next(it) if self._split else orig(it)
        except StopIteration:
            self._finish_epoch(self._pos)  # the epoch's batches: an iterable one has no len()
            self.flush()
            self._in_epoch = False
            self._end_watch("exhausted")
            raise
        self._in_epoch = True
        self._since_step += 1
        self._pos += 1
        self._yielded += 1
        self._cache = data
        self._batch_len = _rows(data)
        return data


    def _split_next(self, it):
        """This rank's share of the epoch's next global batch: the union
        of every rank's next DistributedSampler batch (the same global
        batch as an even split), cut by the plan's shares in rank order."""
        it._next_index()  # the loader's own batch: its length and end stay the script's
        if self._lists is None or self._lists[0] is not it:
            self._lists = (it, _rank_lists(it._index_sampler.sampler, self.size))
        rows = share_of_batch(self._lists[1], self._pos, self._split, self._shares, self.rank)
        data = it._dataset_fetcher.fetch(rows)
        if it._pin_memory:
            from torch.utils.data._utils.pin_memory import pin_memory
            data = pin_memory(data)
        it._num_yielded += 1
        return data


def share_of_batch(lists, step, batch, shares, rank):
    """Rank's rows of a step's global batch: the union of every rank's
    step-th batch of batch indices (lists: each rank's indices this epoch,
    as its DistributedSampler yields them), in rank order, cut by shares
    (None: equal; a short last batch is cut in proportion, at least one row
    each while there are as many rows as ranks)."""
    block = [i for lst in lists for i in lst[step * batch:(step + 1) * batch]]
    if shares is None or sum(shares) != len(block):
        shares = split_counts(len(block), shares or [1] * len(lists), min_one=len(block) >= len(lists))
    lo = sum(shares[:rank])
    return block[lo:lo + shares[rank]]


def _split_batch_size(it):
    """The per-rank batch size of a DataLoader iterator the hook can split
    by shares — in-process, map-style, a plain BatchSampler over a
    DistributedSampler of this world — else None."""
    from torch.utils.data import BatchSampler, DistributedSampler
    from torch.utils.data.dataloader import _DatasetKind, _SingleProcessDataLoaderIter

    if not isinstance(it, _SingleProcessDataLoaderIter) or it._dataset_kind != _DatasetKind.Map:
        return None
    bs = getattr(it, "_index_sampler", None)
    if type(bs) is not BatchSampler or not isinstance(bs.sampler, DistributedSampler):
        return None
    if bs.sampler.num_replicas != dist.get_world_size() or bs.sampler.rank != dist.get_rank():
        return None
    return int(bs.batch_size)


def _rank_lists(sampler, world):
    """Every rank's indices of a DistributedSampler's current epoch, as
    the sampler itself yields them on each rank."""
    rank = sampler.rank
    try:
        out = []
        for r in range(world):
            sampler.rank = r
            out.append(list(iter(sampler)))
        return out
    finally:
        sampler.rank = rank


def _rows(data):
    """The rows of a batch as a DataLoader yields it (a tensor, or a tuple,
    list or dict whose first tensor has them), or None."""
    if torch.is_tensor(data):
        return int(data.shape[0]) if data.dim() > 0 else None
    if isinstance(data, dict):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        for x in data:
            n = _rows(x)
            if n is not None:
                return n
    return None


def _skip(it, orig):
    """Advances a DataLoader iterator by one batch: without loading it for
    a map-style data set read in this process, else by loading and
    dropping it (worker processes and iterable data sets produce batches in
    order)."""
    from torch.utils.data.dataloader import _DatasetKind, _SingleProcessDataLoaderIter

    if isinstance(it, _SingleProcessDataLoaderIter) and it._dataset_kind == _DatasetKind.Map:
        it._next_index()
    else:
        orig(it)


def _shutdown(comm, drivers):
    for d in drivers:
        if d is not None:
            try:
                d.close()
            except _lib.RingtailError:
                pass
    try:
        comm.close()
    except _lib.RingtailError:
        pass


def find_optimizer(params):
    """The one torch.optim optimizer holding params (searched among live
    objects)."""
    ids = {id(p) for p in params}
    found = []
    for o in gc.get_objects():
        try:
            if not isinstance(o, torch.optim.Optimizer):
                continue
        except ReferenceError:
            continue
        held = {id(p) for group in o.param_groups for p in group["params"]}
        if held & ids:
            found.append((o, held))
    if len(found) != 1 or not ids <= found[0][1]:
        raise RuntimeError("ringtail straggler handling: found %d optimizers over the model's parameters; pass the "
                           "one optimizer holding all of them: enable_straggler_handling(model, optimizer)" % len(found))
    return found[0][0]


def straggler_hook(state, bucket):
    """DDP comm hook: collects the buckets of an iteration; the last runs
    the straggler driver's step (see the module doc) and completes them."""
    fut = torch.futures.Future()
    state._pending.append((bucket, fut))
    if bucket.is_last():
        pending, state._pending = state._pending, []
        state._reduce(pending)
    return fut


def enable_straggler_handling(model, optimizer=None, policy=None, loader=None, timeout=None, sampler=None):
    """Registers straggler_hook on a DDP model with the named policy
    (default: $RINGTAIL_DDP_STRAGGLER, else "star"; "shares" with a
    sampler) and returns its state. A collective (it opens a
    communicator): every rank calls it at the same point. optimizer
    defaults to the one optimizer over the model's parameters, found at the
    first step; loader to the DataLoader whose batch preceded the first
    backward. With sampler (the loader's ringtail_torch.HeteroBatchSampler)
    the policy splits every global batch by its shares — a slow rank gets
    fewer rows, every step applies the whole batch: the exact way to
    balance a slower rank; the loss must be a mean over the batch (DDP's
    usual)."""
    existing = getattr(model, "_ringtail_straggler", None)
    if existing is not None:
        raise RuntimeError("ringtail straggler handling is already enabled on this model")
    default = "shares" if sampler is not None else "star"
    state = StragglerState(model, optimizer, policy or os.environ.get(ENV) or default, loader, timeout, sampler)
    model.register_comm_hook(state, straggler_hook)
    model._ringtail_straggler = state
    return state


def straggler_state(model):
    """The StragglerState of a DDP model, or None."""
    return getattr(model, "_ringtail_straggler", None)


def _install_loader_patch():
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    if "next" in _ORIG:
        return
    orig = _BaseDataLoaderIter.__next__
    _ORIG["next"] = orig

    def __next__(it):
        key = getattr(it, "_index_sampler", None)
        for st in list(_ACTIVE):
            k = st._loader_key
            if k is not None and k() is key and key is not None:
                return st._next_batch(it, orig)
        data = orig(it)
        _LAST_YIELD[0] = weakref.ref(it)
        return data

    _BaseDataLoaderIter.__next__ = __next__


# The torch.distributed collectives a script calls by name; each is
# wrapped so that the hooks see the script's own collectives.
_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "broadcast",
                "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "gather", "gather_object", "scatter",
                "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
                "all_reduce_coalesced", "all_gather_coalesced")


def _install_end_patches():
    """Wraps what ends training or runs a collective of the script's own:
    destroy_process_group and the process's exit end every hook (members
    flush, so the evicted ranks get the final state and stop); the
    collectives are shown to every hook (script_collective)."""
    if "destroy" in _ORIG:
        return
    destroy = dist.destroy_process_group
    _ORIG["destroy"] = destroy

    def destroy_process_group(group=None):
        if group is None or group is dist.GroupMember.WORLD:
            _end_all("destroy_process_group on rank %d" % dist.get_rank() if dist.is_initialized() else
                     "destroy_process_group")
        return destroy(group)

    dist.destroy_process_group = destroy_process_group
    for name in _COLLECTIVES:
        orig = getattr(dist, name, None)
        if orig is not None:
            setattr(dist, name, _watched(name, orig))
    hook = sys.excepthook

    def excepthook(kind, value, tb):
        _FAILED[0] = True
        hook(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(_at_exit)


def _watched(name, orig):
    def call(*args, **kwargs):
        if getattr(_IN_CALL, "on", False):
            return orig(*args, **kwargs)
        _IN_CALL.on = True
        try:
            for st in list(_ACTIVE):
                st.script_collective(name)
            return orig(*args, **kwargs)
        finally:
            _IN_CALL.on = False

    call.__name__ = call.__qualname__ = name
    call.__doc__ = orig.__doc__
    call.__wrapped__ = orig
    return call


def _end_all(why):
    for st in list(_ACTIVE):
        st.end(why)


def _at_exit():
    """The process exits: after a clean end every hook flushes (the evicted
    ranks get the final state); after an uncaught exception they close,
    and the other ranks' next step fails naming this rank."""
    if _FAILED[0]:
        for st in list(_ACTIVE):
            st.shutdown()
        return
    try:
        _end_all("the script's exit on rank %d" % dist.get_rank() if dist.is_initialized() else "the script's exit")
    except Exception as e:  # noqa: BLE001 - at exit, say it and close
        note("at exit: %s" % e)
        for st in list(_ACTIVE):
            st.shutdown()


def install_from_env():
    """With RINGTAIL_DDP_STRAGGLER set (star, exact, adaptive, bsp; off or
    empty: nothing), makes every DistributedDataParallel built afterwards
    register straggler_hook. Called by ``import ringtail_torch``."""
    name = os.environ.get(ENV, "").strip().lower()
    if name in ("", "off", "0", "none", "false"):
        return
    policy_name(name)  # a typo fails at import, not at the first step
    if "ddp_init" in _ORIG:
        return
    orig = DistributedDataParallel.__init__
    _ORIG["ddp_init"] = orig

    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        enable_straggler_handling(self, policy=name)

    DistributedDataParallel.__init__ = __init__
