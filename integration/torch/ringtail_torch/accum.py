"""AntDT-DD's gradient accumulation run for an unchanged DDP script: each
rank's share of a step is computed in micro-batches that fit its device's
memory, and DDP reduces their summed gradient once (issue 38, item 3).

The cap. A rank's largest micro-batch is rt_micro_cap (Go's
balance.MaxBatchFromMemory: 95% of the memory over the bytes one sample
takes) of

* its memory: ``RINGTAIL_MEM_CAP`` (bytes, or with a suffix such as GiB;
  or a comma list, one per rank, to emulate a mix such as a V100 beside a
  P100 on CPU; parsed by the library as ringtail-train parses it), else on CUDA the
  free memory of ``torch.cuda.mem_get_info``, else NVML's (pynvml, where
  installed);
* the bytes a sample takes: ``RINGTAIL_SAMPLE_BYTES``, else on CUDA the
  first training step's peak (``torch.cuda.max_memory_allocated`` above
  what was allocated before its forward) over its rows.

Every rank's cap is gathered (StragglerState) so the shares policy plans
every rank's share within ``RINGTAIL_MAX_ACCUM`` micro-batches of its cap
(rt_straggler_open_memory: straggler.Memory, AntDT-DD's Eq. 4 in Go), and
each rank splits the rows it is given into the fewest near-equal
micro-batches under its cap (rt_micro_split: balance.SplitShare). No part
of the plan is computed here.

Why inside the forward, not a loop under ``no_sync``. An unchanged script
runs one forward, one ``loss.backward()`` and one ``optimizer.step()`` per
batch its DataLoader yields, and the loss is its own code: the hook cannot
run a_r forwards and backwards under ``no_sync`` around the script's loss
without changing the loop (yielding a_r micro-batches would make the
script call ``optimizer.step()`` a_r times; DDP's reducer reduces once per
backward outside ``no_sync``). So the patched DataLoader yields the rank's
whole share as one batch, and MicroBatches wraps the forward of the module
DDP holds (as rows.RowTrim does): in a training forward through DDP with
more rows than the cap, the module runs on each micro-batch under
``no_grad`` (one micro-batch's activations alive at a time) and the outputs
are concatenated into the batch's output, tied to the parameters by one
autograd function. The script's loss and ``backward()`` run on that output
as usual; the function's backward recomputes each micro-batch's forward
with grad and back-propagates that micro-batch's slice of the output's
gradient with ``torch.autograd.grad`` — which does not accumulate into
``.grad`` and so does not fire DDP's per-parameter hooks — summing the
micro-batches' parameter gradients. The sum is returned as the function's
gradient for each parameter: DDP's reducer sees each parameter's gradient
once, the accumulated one, exactly as after a_r−1 backwards under
``no_sync`` and a last one outside it. The update is exact: for a loss that
is a function of the per-row outputs (a mean over the batch, DDP's usual)
the gradient equals the whole batch's, and the straggler hook's shares path
weights every rank's gradient by its rows, so the step applies the mean over
the global batch — synchronous SGD's update — on every rank.

Costs and limits: each micro-batch's forward runs twice (the recompute; the
backward runs once), as in activation checkpointing. The random state and the
autocast state are replayed for the recompute (dropout draws the same
masks). Modules whose
forward updates buffers (BatchNorm's running statistics) see each
micro-batch twice; the batch statistics are per micro-batch, as under any
accumulation. A forward whose batch is not the first positional tensor or
whose output is not a tensor (or a tuple, list or dict of them) with the
batch's rows runs whole, and ``unfit`` says why.
"""

import contextlib
import os
import weakref

import torch
from torch.nn.parallel import DistributedDataParallel

from . import _lib
from .rows import batch_rows, output_unfit

ENV_MEM_CAP = "RINGTAIL_MEM_CAP"
ENV_SAMPLE_BYTES = "RINGTAIL_SAMPLE_BYTES"
ENV_MAX_ACCUM = "RINGTAIL_MAX_ACCUM"


def _size(name, text, rank, world):
    try:
        v = _lib.parse_size(text, rank, world)
    except ValueError as e:
        raise ValueError("$%s=%r: %s" % (name, text, e)) from None
    if v <= 0:
        raise ValueError("$%s=%r: want a positive size (bytes, or e.g. 16GiB)" % (name, text))
    return v


def mem_cap_setting(rank, world, environ=None):
    """This rank's memory in bytes from $RINGTAIL_MEM_CAP (one size for
    every rank, or a comma list with one per rank; bytes, or with a suffix
    such as GiB, as ringtail-train reads it), or None when unset."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_MEM_CAP, "").strip()
    return _size(ENV_MEM_CAP, text, rank, world) if text else None


def sample_bytes_setting(environ=None):
    """$RINGTAIL_SAMPLE_BYTES (bytes one sample takes, with an optional
    suffix), or None when unset."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_SAMPLE_BYTES, "").strip()
    if not text:
        return None
    if "," in text:
        raise ValueError("$%s=%r: want one size" % (ENV_SAMPLE_BYTES, text))
    return _size(ENV_SAMPLE_BYTES, text, 0, 1)


def max_accum_setting(environ=None):
    """$RINGTAIL_MAX_ACCUM (the most micro-batches a share is planned in),
    or 0 (the library's default) when unset."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_MAX_ACCUM, "").strip()
    if not text:
        return 0
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise ValueError("$%s=%r: want a whole number of micro-batches >= 1" % (ENV_MAX_ACCUM, text))
    return v


def device_free_bytes(device):
    """The free memory of a CUDA device: torch.cuda.mem_get_info, else
    NVML (pynvml) where installed; None when neither answers."""
    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except Exception:  # noqa: BLE001 - an old torch or a driver without it: try NVML
        pass
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            index = device.index if device.index is not None else torch.cuda.current_device()
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).free)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no pynvml or no driver
        return None


def wanted(model, environ=None):
    """Whether a DDP model's forwards are split under a memory cap: a cap
    or a sample size is configured, or its parameters are on CUDA (the cap
    is then measured)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_MEM_CAP, "").strip() or env.get(ENV_SAMPLE_BYTES, "").strip():
        return True
    p = next(iter(model.module.parameters()), None)
    return p is not None and p.is_cuda


class _Accumulate(torch.autograd.Function):
    """The micro-batches' outputs, concatenated, tied to the cut inputs
    and the parameters; backward recomputes each micro-batch and sums its
    gradients (see the module doc)."""

    @staticmethod
    def forward(ctx, runner, sizes, n_cut, *tensors):
        inputs, params = tensors[:n_cut], tensors[n_cut:]
        parts, states, lo = [], [], 0
        with torch.no_grad():
            for size in sizes:
                states.append(runner.rng_state())
                outs = runner.run(runner.layout, [x[lo:lo + size] for x in inputs], size)
                parts.append(outs)
                lo += size
        ctx.runner, ctx.layout, ctx.sizes, ctx.states, ctx.n_cut = runner, runner.layout, sizes, states, n_cut
        # The recompute runs under the forward's autocast, as
        # torch.utils.checkpoint's does.
        ctx.autocast = (torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype(), torch.is_autocast_cpu_enabled(),
                        torch.get_autocast_cpu_dtype())
        ctx.save_for_backward(*tensors)
        return tuple(torch.cat([p[i] for p in parts]) for i in range(len(parts[0])))

    @staticmethod
    def backward(ctx, *grad_outs):
        tensors = ctx.saved_tensors
        inputs, params = tensors[:ctx.n_cut], tensors[ctx.n_cut:]
        trained = [p for p in params if p.requires_grad]
        sums = [None] * len(trained)  # each parameter's gradient, summed over the micro-batches
        in_grads = [[] for _ in inputs]  # each input's gradient, micro-batch by micro-batch
        lo = 0
        for size, state in zip(ctx.sizes, ctx.states):
            cut = [x[lo:lo + size].detach().requires_grad_(x.requires_grad) for x in inputs]
            with torch.enable_grad(), torch.random.fork_rng(devices=ctx.runner.rng_devices()), _autocast(ctx.autocast):
                ctx.runner.set_rng_state(state)
                outs = ctx.runner.run(ctx.layout, cut, size)
            pairs = [(o, g[lo:lo + size]) for o, g in zip(outs, grad_outs) if g is not None and o.requires_grad]
            wrt = [c for c in cut if c.requires_grad] + trained
            got = [None] * len(wrt)
            if pairs:
                got = list(torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True))
            k = 0
            for j, c in enumerate(cut):
                if c.requires_grad:
                    in_grads[j].append(got[k] if got[k] is not None else torch.zeros_like(c))
                    k += 1
            for i, g in enumerate(got[k:]):
                if g is not None:
                    sums[i] = g if sums[i] is None else sums[i] + g
            lo += size
        out = [torch.cat(g) if g else None for g in in_grads]
        it = iter(sums)
        for p in params:
            if p.requires_grad:
                # A parameter the output does not use gets zeros: DDP's
                # reducer waits for every parameter's gradient.
                g = next(it)
                out.append(g if g is not None else torch.zeros_like(p))
            else:
                out.append(None)
        return (None, None, None) + tuple(out)


class MicroBatches:
    """The forward wrapper of one DDP model's module (see the module doc):
    splits each training forward through DDP with more rows than ``cap``
    into micro-batches. Used from the training loop's thread only."""

    def __init__(self, ddp, cap=0, sample_bytes=None, memory=None):
        self._ddp = weakref.ref(ddp)  # the model holds this wrapper: no cycle through it
        module = ddp.module
        self._orig = module.forward
        self._module = weakref.ref(module)
        self.cap = int(cap)  # 0: not known yet (measured at the first step on CUDA) or unbounded
        self._memory = memory  # bytes this rank's micro-batches may take (None: the device's free memory)
        self._sample_bytes = sample_bytes
        self.layout = None  # the forward being split: its arguments, and which are cut
        self._shape = None  # the module output's structure
        self._measure = None  # (rows, allocated before) of the first training forward, on CUDA
        self.unfit = []
        self.stats = {"cap": self.cap, "max_micro": 0, "max_accum": 0, "passes": 0, "forwards": 0, "split": 0,
                      "sizes": []}
        module.forward = self._forward

    def _device(self):
        p = next(iter(self._module().parameters()), None)
        return p.device if p is not None else torch.device("cpu")

    # --- the cap ------------------------------------------------------------

    def settle(self):
        """After the first training step's backward (every rank, before
        the caps are gathered): on CUDA without $RINGTAIL_SAMPLE_BYTES, the
        sample size from the step's peak, and the cap from the memory."""
        if self.cap > 0 or self._measure is None:
            return
        rows, before = self._measure
        self._measure = None
        dev = self._device()
        per = self._sample_bytes
        if per is None and dev.type == "cuda":
            per = max(1, (torch.cuda.max_memory_allocated(dev) - before) // max(rows, 1))
        free, measured = self._memory, False
        if free is None and dev.type == "cuda":
            free = device_free_bytes(dev)
            if free is not None:
                # What the step's activations may use: the device's free
                # memory and the allocator's cache (the step's own freed
                # activations are held there), above what was allocated
                # before the step's forward.
                free += max(0, torch.cuda.memory_reserved(dev) - before)
                measured = True
        if per is None or free is None:
            return
        self.cap = _lib.micro_cap(free, per)
        if measured:
            # A batch the device has just computed whole fits: a measured
            # cap never splits a batch the size of the first.
            self.cap = max(self.cap, rows)
        self.stats["cap"] = self.cap

    # --- the forward ----------------------------------------------------------

    def rng_devices(self):
        dev = self._device()
        return [dev] if dev.type == "cuda" else []

    def rng_state(self):
        dev = self._device()
        cuda = torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None
        return torch.get_rng_state(), cuda

    def set_rng_state(self, state):
        cpu, cuda = state
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, self._device())

    def run(self, layout, cut, rows):
        """The module on one micro-batch of rows (cut: the cut tensors in
        the order the call's layout names them): its outputs, flat."""
        args, kwargs = layout
        it = iter(cut)
        a = [next(it) if c else v for v, c in args]
        kw = {n: (next(it) if c else v) for n, (v, c) in kwargs.items()}
        out = self._orig(*a, **kw)
        why = _output_unfit(out, rows)
        if why is not None:
            raise _Unfit(why)
        self._shape = _shape(out)
        return _flatten(out)

    def _forward(self, *args, **kwargs):
        ddp = self._ddp()
        inside = ddp is not None and DistributedDataParallel._active_ddp_module is ddp
        if not inside or not ddp.module.training or not torch.is_grad_enabled():
            return self._orig(*args, **kwargs)
        rows = batch_rows(args[0]) if args else None
        if rows is None:
            self._note("the batch is not the first positional tensor of the model's forward")
            return self._orig(*args, **kwargs)
        self.stats["forwards"] += 1
        if self.cap <= 0 and self._measure is None and self.stats["forwards"] == 1:
            dev = self._device()
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
                self._measure = (rows, torch.cuda.memory_allocated(dev))
            else:
                self._measure = (rows, 0)
        sizes = _lib.micro_split(rows, self.cap) if self.cap > 0 and not self.unfit else [rows]
        if len(sizes) > 1:
            cuts = lambda v: torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == rows
            self.layout = ([(v, cuts(v)) for v in args], {n: (v, cuts(v)) for n, v in kwargs.items()})
            cut = [v for v in args if cuts(v)] + [v for v in kwargs.values() if cuts(v)]
            params = [p for p in self._module().parameters()]
            try:
                flat = _Accumulate.apply(self, sizes, len(cut), *cut, *params)
            except _Unfit as e:
                self._note(str(e))
                sizes = [rows]
            else:
                self._count(sizes)
                self.stats["split"] += 1
                return _unflatten(self._shape, list(flat))
            finally:
                self.layout = None
        self._count(sizes)
        return self._orig(*args, **kwargs)

    def _count(self, sizes):
        st = self.stats
        st["max_micro"] = max(st["max_micro"], max(sizes))
        st["max_accum"] = max(st["max_accum"], len(sizes))
        st["passes"] += len(sizes)
        if len(st["sizes"]) < 64:
            st["sizes"].append(list(sizes))

    def _note(self, why):
        if why not in self.unfit:
            self.unfit.append(why)
            self.stats["unfit"] = list(self.unfit)


def _autocast(state):
    """The autocast contexts a forward ran under (state: ctx.autocast)."""
    gpu, gpu_dtype, cpu, cpu_dtype = state
    stack = contextlib.ExitStack()
    if gpu:
        stack.enter_context(torch.autocast("cuda", dtype=gpu_dtype))
    if cpu:
        stack.enter_context(torch.autocast("cpu", dtype=cpu_dtype))
    return stack


class _Unfit(Exception):
    """A micro-batch's output cannot be concatenated into the batch's."""


def _output_unfit(out, rows):
    """Why a micro-batch's output cannot be concatenated (None: it can):
    rows.output_unfit's tensors, tuples and lists, and dicts of them."""
    if isinstance(out, dict):
        if not out:
            return "the model's output is an empty dict"
        for v in out.values():
            why = _output_unfit(v, rows)
            if why is not None:
                return why
        return None
    if isinstance(out, (tuple, list)) and out:
        for o in out:
            why = _output_unfit(o, rows)
            if why is not None:
                return why
        return None
    return output_unfit(out, rows)


def _shape(out):
    """The structure of a module output (None: a tensor)."""
    if torch.is_tensor(out):
        return None
    if isinstance(out, dict):
        return (type(out), [(k, _shape(v)) for k, v in out.items()])
    return (type(out), [_shape(o) for o in out])


def _flatten(out):
    if torch.is_tensor(out):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in _flatten(o)]


def _unflatten(shape, flat):
    """The output of structure shape from its tensors, in _flatten's order
    (consumed from the front of flat)."""
    if shape is None:
        return flat.pop(0)
    kind, inner = shape
    if issubclass(kind, dict):
        return kind((k, _unflatten(s, flat)) for k, s in inner)
    items = [_unflatten(s, flat) for s in inner]
    if hasattr(kind, "_fields"):  # a namedtuple
        return kind(*items)
    return kind(items)
