"""Row shares inside DDP's forward: the straggler hook's way to give a
slower rank less work in a loop that feeds DDP without a DataLoader (it
indexes its own tensors, or draws batches from a generator), where the hook
cannot choose which rows a rank loads (issue 36).

RowTrim wraps the forward of the module a DDP model holds. In DDP's own
forward (DistributedDataParallel._active_ddp_module is that model), in
training mode, with grad enabled and outside no_sync, on a step where the
plan gives this rank a fraction f < 1 of its batch, the module runs on
k = round(f·B) rows of the B rows of its first positional tensor (a fresh
random subset each step, from the trim's seeded generator, so that no
fixed rows are always dropped; every other tensor argument with B rows is
cut alike) and the output is returned at the full batch shape: the rows
not computed are zeros, constants without gradient. A loss that is a mean
over the batch (cross_entropy(out, y), DDP's usual) then gives
(1/B)·Σ_{computed rows} ∇l: the hook multiplies it by B and reports k
samples, and the step divides the sum by the rows computed on every rank,
so every rank applies the mean gradient over the rows computed.

It is not synchronous SGD: the rows a rank skips are not trained on in
that step. Forwards outside DDP, in eval mode or under no_grad are never
cut (a rank-0-only evaluation sees the whole batch). A forward that cannot
be cut — the batch not in the first positional tensor, an output that is
not a tensor (or a tuple or list of tensors) with the input's rows, no_sync
accumulation — is run whole and named in ``unfit``.
"""

import weakref

import torch
from torch.nn.parallel import DistributedDataParallel

# A rank is trimmed when the plan's shares predict it at most this
# fraction of the fastest rank's speed (straggler.DefaultThreshold's 0.2
# slower), for PERSIST plans in a row: a persistent straggler, not a
# noisy step.
KEEP = 0.8
PERSIST = 3


def batch_rows(x):
    """The rows of a forward's first positional argument, or None."""
    if torch.is_tensor(x) and x.dim() > 0 and x.shape[0] > 0:
        return int(x.shape[0])
    return None


def output_unfit(out, rows):
    """Why a module output cannot be returned at the batch's shape from a
    cut of it (None: it can): a tensor, or a tuple or list of tensors,
    each with rows in dim 0."""
    if torch.is_tensor(out):
        if out.dim() == 0 or out.shape[0] != rows:
            return "the model's output has shape %s, not the batch's %d rows in dim 0" % (tuple(out.shape), rows)
        return None
    if isinstance(out, (tuple, list)) and out:
        for o in out:
            why = output_unfit(o, rows)
            if why is not None:
                return why
        return None
    return "the model's output is a %s, not a tensor (or a tuple of tensors) with the batch's rows" % type(out).__name__


def expand(out, idx, rows):
    """The output at the full batch's shape: a cut's rows at idx, zeros
    (no gradient) elsewhere."""
    if torch.is_tensor(out):
        full = out.new_zeros((rows,) + tuple(out.shape[1:]))
        return full.index_copy(0, idx.to(out.device), out)
    items = [expand(o, idx, rows) for o in out]
    if hasattr(out, "_fields"):  # a namedtuple
        return type(out)(*items)
    return type(out)(items)


def plan_fraction(shares, rank):
    """The fraction of its batch the plan's shares give rank: its share
    over the largest (the fastest rank keeps its whole batch)."""
    top = max(shares) if shares else 0
    if top <= 0:
        return 1.0
    return shares[rank] / top


class RowTrim:
    """The forward wrapper of one DDP model's module (see the module doc).
    Used from the training loop's thread only."""

    def __init__(self, ddp, rank, seed=0):
        self._ddp = weakref.ref(ddp)  # the model holds this wrapper: no cycle through it
        module = ddp.module
        self._orig = module.forward
        self._gen = torch.Generator()
        self._gen.manual_seed(0x5EED + 7919 * int(seed) + int(rank))
        self.unfit = []  # why this rank's training forwards cannot be cut
        self.on = False  # the job trims rows (the hook chose it)
        self.fraction = 1.0  # of its batch, this rank's next training forward
        self._slow = 0  # plans in a row that predicted this rank a straggler
        self._forwards = 0  # DDP training forwards since the last take()
        self._last = None  # (rows computed, batch) of the last one
        self.stats = {"computed": 0, "batch": 0, "trimmed": 0, "whole": 0, "untouched": 0}
        module.forward = self._forward

    def note_unfit(self, why):
        """Records a reason this rank's training forwards cannot be cut."""
        if why not in self.unfit:
            self.unfit.append(why)

    def _forward(self, *args, **kwargs):
        ddp = self._ddp()
        inside = ddp is not None and DistributedDataParallel._active_ddp_module is ddp
        if not inside or not ddp.module.training or not torch.is_grad_enabled():
            if inside:
                self.stats["untouched"] += 1  # an evaluation through DDP: whole
            return self._orig(*args, **kwargs)
        if not ddp.require_backward_grad_sync:
            self.note_unfit("a forward under no_sync (gradient accumulation)")
            return self._orig(*args, **kwargs)
        self._forwards += 1
        rows = batch_rows(args[0]) if args else None
        if rows is None:
            self.note_unfit("the batch is not the first positional tensor of the model's forward")
            return self._orig(*args, **kwargs)
        k = rows
        if self.on and self.fraction < 1.0 and not self.unfit:
            k = max(1, min(rows, int(rows * self.fraction + 0.5)))
        if k < rows:
            idx = torch.randperm(rows, generator=self._gen)[:k].sort().values
            cut = lambda t: t.index_select(0, idx.to(t.device)) if torch.is_tensor(t) and t.dim() > 0 and t.shape[0] == rows else t
            out = self._orig(*[cut(a) for a in args], **{n: cut(v) for n, v in kwargs.items()})
            why = output_unfit(out, k)
            if why is None:
                self._count(k, rows)
                self.stats["trimmed"] += 1
                return expand(out, idx, rows)
            # The cut's output cannot take the batch's shape: the whole
            # batch, and no cut on this rank from here on.
            self.note_unfit(why)
            del out
        out = self._orig(*args, **kwargs)
        why = output_unfit(out, rows)
        if why is not None:
            self.note_unfit(why)
        self._count(rows, rows)
        self.stats["whole"] += 1
        return out

    def _count(self, k, rows):
        self._last = (k, rows)
        self.stats["computed"] += k
        self.stats["batch"] += rows

    def take(self):
        """(rows computed, batch rows, training forwards) since the last
        call; rows are None when no training forward ran."""
        forwards, last = self._forwards, self._last
        self._forwards, self._last = 0, None
        if last is None:
            return None, None, forwards
        return last[0], last[1], forwards

    def plan(self, shares, rank):
        """Takes the next step's shares: the fraction of its batch this
        rank computes (1 unless a persistent straggler is predicted)."""
        f = plan_fraction(shares, rank)
        self._slow = self._slow + 1 if f < KEEP else 0
        self.fraction = f if self._slow >= PERSIST else 1.0

    def reset(self):
        """A new driver starts from equal shares: whole batches."""
        self._slow, self.fraction = 0, 1.0
