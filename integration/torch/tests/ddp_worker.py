"""One rank of the DDP tests (run by test_ddp.py through launch.py, or by
torchrun / ringtail-torchrun / ringtail run). Modes:

  parity     DDP over init_process_group("ringtail") and DDP over a gloo
             group, same data, same init, side by side: parameter
             difference after 20 steps and held-out accuracy after full
             training. Rank 0 prints one JSON line.
  straggler  one rank slowed `--slow` times, compute padded to --pad-ms per
             even share: a gloo run with an even split, then a ringtail run
             with HeteroBatchSampler weights measured in --calib steps and
             Eq. 7 weighting. Rank 0 prints one JSON line of wall times.
  smoke      a few DDP steps over ringtail with a consistency check (for the
             launcher tests).

With --hook powersgd, parity registers torch's PowerSGD comm hook (low-rank
gradient compression with error feedback) on both models: its allreduces
of the P and Q factors then run over ringtail and over gloo.
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

import digits
import ringtail_torch as rt


def batches(rank, world, n, global_batch, epoch, weights=None, seed=0):
    s = rt.HeteroBatchSampler(range(n), rank, world, weights=weights, global_batch=global_batch, seed=seed)
    s.set_epoch(epoch)
    return list(s)


def train_step(model, opt, x, y, weighted_group=None):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    if weighted_group is not None:
        with rt.local_batch(len(y), weighted_group):
            loss.backward()
    else:
        loss.backward()
    opt.step()
    return float(loss.item())


def max_param_diff(a, b):
    return max(float((p - q).abs().max().item()) for p, q in zip(a.parameters(), b.parameters()))


def parity(args, rank, world):
    xtr, ytr, xte, yte = digits.load()
    gloo = dist.new_group(backend="gloo")
    m_rt = DDP(digits.mlp(seed=1))
    m_gl = DDP(digits.mlp(seed=1), process_group=gloo)
    o_rt = torch.optim.SGD(m_rt.parameters(), lr=args.lr, momentum=0.9)
    o_gl = torch.optim.SGD(m_gl.parameters(), lr=args.lr, momentum=0.9)
    if args.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        for m, group in ((m_rt, None), (m_gl, gloo)):
            m.register_comm_hook(psgd.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                                    start_powerSGD_iter=10, random_seed=0), psgd.powerSGD_hook)
    step, diff20 = 0, None
    for epoch in range(args.epochs):
        for idx in batches(rank, world, len(xtr), args.global_batch, epoch):
            x, y = xtr[idx], ytr[idx]
            train_step(m_rt, o_rt, x, y)
            train_step(m_gl, o_gl, x, y)
            step += 1
            if step == 20:
                diff20 = max_param_diff(m_rt.module, m_gl.module)
    # every rank's ringtail replica must be identical too
    flat = torch.cat([p.detach().reshape(-1) for p in m_rt.parameters()])
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    out = {
        "mode": "parity",
        "hook": args.hook,
        "world": world,
        "steps": step,
        "diff20": diff20,
        "diff_final": max_param_diff(m_rt.module, m_gl.module),
        "replica_spread": float((hi - lo).abs().max().item()),
        "acc_ringtail": digits.accuracy(m_rt.module, xte, yte),
        "acc_gloo": digits.accuracy(m_gl.module, xte, yte),
    }
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def timed_epochs(args, rank, world, model, opt, xtr, ytr, weights, weighted_group):
    """Runs the epochs (capped at --max-steps per epoch); returns seconds."""
    slow = args.slow if rank == args.slow_rank else 1.0
    dist.barrier()
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        for k, idx in enumerate(batches(rank, world, len(xtr), args.global_batch, epoch, weights)):
            if args.max_steps and k >= args.max_steps:
                break
            start = time.perf_counter()
            x, y = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            digits.pad_compute(start, len(idx), args.global_batch, world, args.pad_ms, slow)
            if weighted_group is not None:
                with rt.local_batch(len(idx), weighted_group):
                    loss.backward()
            else:
                loss.backward()
            opt.step()
    dist.barrier()
    return time.perf_counter() - t0


def straggler(args, rank, world):
    xtr, ytr, xte, yte = digits.load()
    slow = args.slow if rank == args.slow_rank else 1.0
    gloo = dist.new_group(backend="gloo")
    res = {"mode": "straggler", "world": world, "slow_rank": args.slow_rank, "slow": args.slow,
           "pad_ms": args.pad_ms, "epochs": args.epochs, "max_steps": args.max_steps}
    # gloo: even split
    m = DDP(digits.mlp(seed=1), process_group=gloo)
    opt = torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9)
    res["gloo_s"] = timed_epochs(args, rank, world, m, opt, xtr, ytr, None, None)
    res["acc_gloo"] = digits.accuracy(m.module, xte, yte)
    # ringtail: calibrate throughput on even batches, then weighted batches
    m = DDP(digits.mlp(seed=1))
    opt = torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9)
    dist.barrier()
    t0 = time.perf_counter()
    samples, busy = 0, 0.0
    for idx in batches(rank, world, len(xtr), args.global_batch, 1000)[: args.calib]:
        start = time.perf_counter()
        x, y = xtr[idx], ytr[idx]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x), y)
        digits.pad_compute(start, len(idx), args.global_batch, world, args.pad_ms, slow)
        busy += time.perf_counter() - start
        samples += len(idx)
        with rt.local_batch(len(idx)):
            loss.backward()
        opt.step()
    weights = rt.measure_weights(samples, busy)
    calib = time.perf_counter() - t0
    res["weights"] = [round(w, 3) for w in weights]
    res["ringtail_epochs_s"] = timed_epochs(args, rank, world, m, opt, xtr, ytr, weights, dist.GroupMember.WORLD)
    res["ringtail_s"] = calib + res["ringtail_epochs_s"]
    res["acc_ringtail"] = digits.accuracy(m.module, xte, yte)
    steps, arrive, wait = rt.gather_arrivals(last=4)
    res["arrival_wait_s"] = [[round(v, 4) for v in row] for row in wait.tolist()]
    if rank == 0:
        print("RESULT " + json.dumps(res), flush=True)


def smoke(args, rank, world):
    xtr, ytr, _, _ = digits.load()
    m = DDP(digits.mlp(seed=rank))  # DDP must broadcast rank 0's weights
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for idx in batches(rank, world, len(xtr), 64, 0)[:5]:
        train_step(m, opt, xtr[idx], ytr[idx])
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, 0)
    diff = float((flat - ref).abs().max().item())
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if rank == args.fail_first_round and restart == "0":
        os._exit(3)  # the elastic agent restarts every worker (--max-restarts)
    # One write(2) of a short line: ranks sharing a stdout pipe cannot
    # interleave inside it (print may split text and newline).
    sys.stdout.flush()
    os.write(1, ("SMOKE rank=%d world=%d local_rank=%s backend=%s diff=%g restart=%s\n" % (
        rank, world, os.environ.get("LOCAL_RANK"), dist.get_backend(), diff, restart)).encode())
    if diff != 0:
        sys.exit("replicas differ")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["parity", "straggler", "smoke"])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow", type=float, default=3.0)
    p.add_argument("--pad-ms", type=float, default=100.0)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--calib", type=int, default=2)
    p.add_argument("--backend", default="ringtail", help="default group backend (smoke mode)")
    p.add_argument("--hook", choices=["none", "powersgd"], default="none",
                   help="parity mode: the DDP comm hook of both models (powersgd: torch's PowerSGD, error feedback)")
    p.add_argument("--fail-first-round", type=int, default=-1,
                   help="smoke mode: this rank exits 3 in the elastic agent's first round (TORCHELASTIC_RESTART_COUNT 0)")
    p.add_argument("--init-method", default=None, help="init_method (smoke mode); 'tcp-master' is tcp://MASTER_ADDR:MASTER_PORT")
    args = p.parse_args()
    backend = args.backend if args.mode == "smoke" else "ringtail"
    init = args.init_method
    if init == "tcp-master":
        init = "tcp://%s:%s?rank=%s&world_size=%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"],
                                                        os.environ["RANK"], os.environ["WORLD_SIZE"])
    dist.init_process_group(backend, init_method=init, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.slow_rank < 0:
        args.slow_rank = world - 1
    {"parity": parity, "straggler": straggler, "smoke": smoke}[args.mode](args, rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
