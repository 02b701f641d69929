"""One rank (world 1, Gloo) of the accumulation's exactness test
(ringtail_torch/accum.py): modules of the shapes MicroBatches splits —
dropout (the random state replayed for the recompute), a tuple output, a
dict output, a keyword tensor with the batch's rows, a non-batch keyword,
an input that requires grad — each
trained for a few steps under DDP with micro-batches of at most --cap rows
and without, from the same seed. Prints "RESULT {json}": per module the
largest difference of any gradient (and input gradient) at any step, the
micro-batch sizes seen, and how many times DDP's comm hook ran per
backward (once per bucket: the reducer saw each gradient once)."""

import argparse
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from ringtail_torch.accum import MicroBatches


class Tuple(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x, weight=None, scale=1.0):
        h = self.drop(torch.relu(self.a(x)))
        if weight is not None:
            h = h * weight[:, None]
        return self.b(h) * scale, h


class Dict(Tuple):
    def forward(self, x, weight=None, scale=1.0):
        logits, h = super().forward(x, weight=weight, scale=scale)
        return {"logits": logits, "features": h}


def loss_of(out, y):
    if isinstance(out, dict):
        return F.cross_entropy(out["logits"], y) + 0.1 * out["features"].pow(2).mean()
    return F.cross_entropy(out[0], y) + 0.1 * out[1].pow(2).mean()


def train(kind, cap, rows, steps, autocast=False):
    torch.manual_seed(1)
    model = DDP(kind(), find_unused_parameters=False)
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    model.register_comm_hook(None, hook)
    micro = MicroBatches(model, cap=cap) if cap else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(2)
    grads, hooks = [], []
    for step in range(steps):
        x = torch.randn(rows, 8, generator=data).requires_grad_(True)
        y = torch.randint(0, 3, (rows,), generator=data)
        w = torch.rand(rows, generator=data)
        torch.manual_seed(100 + step)  # dropout's masks: the same stream either way
        opt.zero_grad(set_to_none=True)
        before = calls[0]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(x, weight=w, scale=0.5)
        loss_of(out, y).backward()
        hooks.append(calls[0] - before)
        grads.append([p.grad.clone() for p in model.parameters()] + [x.grad.clone()])
        opt.step()
    return grads, hooks, (micro.stats if micro else None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cap", type=int, default=7)
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    res = {}
    for kind in (Tuple, Dict):
        whole, whole_hooks, _ = train(kind, 0, args.rows, args.steps)
        split, split_hooks, stats = train(kind, args.cap, args.rows, args.steps)
        diff = max(float((a - b).abs().max()) for ga, gb in zip(whole, split) for a, b in zip(ga, gb))
        res[kind.__name__] = {"diff": diff, "sizes": stats["sizes"], "split": stats["split"],
                              "unfit": stats.get("unfit", []), "hooks": split_hooks, "whole_hooks": whole_hooks}
    # Under CPU autocast (bfloat16): the recompute must run under it too,
    # or the micro-batches' gradients would be float32's, not the whole
    # batch's bfloat16 ones.
    whole, _, _ = train(Tuple, 0, args.rows, args.steps, autocast=True)
    split, _, stats = train(Tuple, args.cap, args.rows, args.steps, autocast=True)
    res["autocast"] = {"diff": max(float((a - b).abs().max()) for ga, gb in zip(whole, split) for a, b in zip(ga, gb)),
                       "scale": max(float(a.abs().max()) for g in whole for a in g), "split": stats["split"]}
    print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
