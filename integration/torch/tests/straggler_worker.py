"""One rank of the straggler-hook tests and benchmark (ringtail_torch's
straggler.py), run through launch.py. Modes:

  train   a plain DDP script — DistributedSampler, DataLoader, DDP, SGD
          with momentum, each step's compute padded to --pad-ms (times
          --slow on --slow-rank, for the first --slow-for seconds) — on
          init_process_group(--backend). With
          RINGTAIL_DDP_STRAGGLER set in the environment, `import
          ringtail_torch` registers the straggler hook on the DDP model; the
          training loop is the same either way. Rank 0 prints
          "RESULT {json}" (epoch times, held-out accuracy after each epoch,
          the replicas' parameter spread); every rank prints "STATS {json}" (the hook's
          statistics) when the hook is on.
  parity  the hook (--policy, no straggler) on a DDP model over the default
          ringtail group against plain DDP over a gloo group, the same
          batches in the same loop: the largest parameter difference after
          20 steps and at the end.
"""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import digits
import ringtail_torch as rt


def loader_for(x, y, batch, seed=0):
    sampler = DistributedSampler(TensorDataset(x, y), shuffle=True, seed=seed)
    return sampler, DataLoader(TensorDataset(x, y), batch_size=batch, sampler=sampler)


def spread(model):
    """The largest difference of any parameter across ranks."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    return float((hi - lo).abs().max().item())


def out(line):
    # One write(2): ranks sharing a pipe cannot interleave inside it.
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


def train(args, rank, world):
    xtr, ytr, xte, yte = digits.load()
    if args.sampler == "hetero":
        # ringtail's HeteroBatchSampler: the same global batches, split by
        # the straggler policy's shares (enable_straggler_handling below).
        sampler = rt.HeteroBatchSampler(TensorDataset(xtr, ytr), rank, world, global_batch=args.batch * world,
                                        seed=args.seed)
        loader = DataLoader(TensorDataset(xtr, ytr), batch_sampler=sampler)
    else:
        sampler, loader = loader_for(xtr, ytr, args.batch, seed=args.seed)
    model = DDP(digits.mlp(hidden=(args.hidden,), seed=1 + args.seed))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if args.sampler == "hetero":
        rt.enable_straggler_handling(model, opt, policy=args.policy, loader=loader, sampler=sampler)
    slow = args.slow if rank == args.slow_rank else 1.0
    epochs, accs, curve, step, evals = [], [], [], 0, 0.0
    dist.barrier()
    begin = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0 = time.perf_counter()
        for x, y in loader:
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            factor = slow if args.slow_for <= 0 or start - begin < args.slow_for else 1.0
            # The simulated device's compute scales with the rows computed
            # (a sampler may give this rank more or fewer than --batch).
            factor *= len(y) / args.batch
            left = args.pad_ms / 1000.0 * factor - (time.perf_counter() - start)
            if left > 0:
                time.sleep(left)  # the simulated device's compute
            loss.backward()
            opt.step()
            step += 1
            if rank == 0 and args.eval_every > 0 and step % args.eval_every == 0:
                # Rank 0 evaluates every few steps, as real scripts do: a
                # pause between steps the other ranks do not take. The
                # curve's time is training time: evaluations taken out.
                e0 = time.perf_counter()
                curve.append([round(e0 - begin - evals, 3), step, round(digits.accuracy(model.module, xte, yte), 2)])
                if args.eval_ms > 0:
                    time.sleep(args.eval_ms / 1000.0)
                evals += time.perf_counter() - e0
        epochs.append(time.perf_counter() - t0)
        if rank == 0:
            e0 = time.perf_counter()
            accs.append(round(digits.accuracy(model.module, xte, yte), 2))
            if args.eval_every > 0:
                curve.append([round(e0 - begin - evals, 3), step, accs[-1]])
            evals += time.perf_counter() - e0
    res = {"mode": "train", "world": world, "backend": dist.get_backend(), "hook": os.environ.get(rt.straggler.ENV, ""),
           "slow_rank": args.slow_rank, "slow": args.slow, "pad_ms": args.pad_ms, "batch": args.batch,
           "steps_per_epoch": len(loader), "epoch_s": [round(e, 3) for e in epochs],
           "acc": digits.accuracy(model.module, xte, yte), "acc_by_epoch": accs, "spread": spread(model),
           "params": [round(float(v), 6) for v in torch.cat([p.detach().reshape(-1) for p in model.parameters()])[:200]],
           "curve": curve, "steps": step, "seconds": round(time.perf_counter() - begin, 3)}
    st = rt.straggler_state(model)
    if st is not None:
        s = dict(st.stats)
        s["applied"] = [[e, k, n] for (e, k), n in sorted(s["applied"].items())]
        s["roles"], s["modes"] = dict(s["roles"]), dict(s["modes"])
        out("STATS rank=%d %s" % (rank, json.dumps(s)))
    if rank == 0:
        out("RESULT " + json.dumps(res))


def parity(args, rank, world):
    xtr, ytr, xte, yte = digits.load()
    gloo = dist.new_group(backend="gloo")
    sampler, loader = loader_for(xtr, ytr, args.batch)
    m_rt = DDP(digits.mlp(seed=1))
    m_gl = DDP(digits.mlp(seed=1), process_group=gloo)
    o_rt = torch.optim.SGD(m_rt.parameters(), lr=args.lr, momentum=0.9)
    o_gl = torch.optim.SGD(m_gl.parameters(), lr=args.lr, momentum=0.9)
    st = rt.enable_straggler_handling(m_rt, o_rt, policy=args.policy)
    step, diff20 = 0, None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            for m, o in ((m_rt, o_rt), (m_gl, o_gl)):
                o.zero_grad(set_to_none=True)
                F.cross_entropy(m(x), y).backward()
                o.step()
            step += 1
            if step == 20:
                diff20 = max(float((p - q).abs().max().item()) for p, q in zip(m_rt.parameters(), m_gl.parameters()))
    res = {"mode": "parity", "policy": args.policy, "world": world, "steps": step, "diff20": diff20,
           "diff_final": max(float((p - q).abs().max().item()) for p, q in zip(m_rt.parameters(), m_gl.parameters())),
           "spread": spread(m_rt), "modes": dict(st.stats["modes"]), "roles": dict(st.stats["roles"]),
           "epochs": st.stats["epochs"], "flushed": st.stats["flushed"]}
    if rank == 0:
        out("RESULT " + json.dumps(res))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["train", "parity"])
    p.add_argument("--backend", default="ringtail")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16, help="samples per rank per step")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow", type=float, default=1.0)
    p.add_argument("--pad-ms", type=float, default=0.0)
    p.add_argument("--slow-for", type=float, default=0.0, help="seconds the slow rank is slow (0: throughout)")
    p.add_argument("--policy", default="exact", help="parity mode's policy")
    p.add_argument("--sampler", choices=["distributed", "hetero"], default="distributed",
                   help="hetero: ringtail's HeteroBatchSampler, split by the straggler policy's shares (--policy)")
    p.add_argument("--eval-every", type=int, default=0, help="rank 0 evaluates the held-out set every N steps (0: never)")
    p.add_argument("--seed", type=int, default=0, help="train mode: the model's and the sampler's seed")
    p.add_argument("--eval-ms", type=float, default=0.0, help="extra pause of each evaluation, ms (a bigger held-out set)")
    args = p.parse_args()
    dist.init_process_group(args.backend if args.mode == "train" else "ringtail",
                            timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.slow_rank < 0:
        args.slow_rank = world - 1
    {"train": train, "parity": parity}[args.mode](args, rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
