#!/usr/bin/env python3
"""Gloo peer probe for bench/compare: torch.distributed allreduce over localhost.

Run it with the Python that has torch (Debian's python3-torch is for
/usr/bin/python3):

    /usr/bin/python3 bench/gloo_allreduce.py --np 4 --iters 20 --warmup 5 8:1000 1048576

Sizes are bytes, optionally with their own iteration count (8:1000).

The launcher starts N worker processes of this script (env:// init with
MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, backend gloo, TCP over 127.0.0.1)
and relays rank 0's output. Timing matches `ringtail bench allreduce`
(nccl-tests style): check once, warmup, barrier, `iters` back-to-back
float32 SUM allreduces, mean time per call, maximum over ranks. Rank 0
prints one JSON object per size with ringtail's field names.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_size(spec, default_iters):
    """'BYTES' or 'BYTES:ITERS' -> (bytes, iters)."""
    size, _, iters = spec.partition(":")
    return int(size), int(iters) if iters else default_iters


def launch(args):
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(args.np), GLOO_SOCKET_IFNAME="lo",
               OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
    worker = [sys.executable, os.path.abspath(__file__), "--worker",
              "--iters", str(args.iters), "--warmup", str(args.warmup)] + [str(s) for s in args.sizes]
    procs = []
    for r in range(args.np):
        env_r = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen(worker, env=env_r, stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL))
    for line in procs[0].stdout:
        sys.stdout.write(line.decode())
        sys.stdout.flush()
    rc = 0
    for r, p in enumerate(procs):
        code = p.wait()
        if code != 0:
            print(f"gloo_allreduce: rank {r} exited with {code}", file=sys.stderr)
            rc = 1
    return rc


def work(args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    for spec in args.sizes:
        size, iters = parse_size(spec, args.iters)
        count = max(1, size // 4)
        pattern = (torch.arange(count, dtype=torch.int64) % 7 + 1).to(torch.float32)
        buf = pattern * (rank + 1)
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        wrong = int((buf != pattern * (n * (n + 1) // 2)).sum())
        for _ in range(args.warmup):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        avg = (time.perf_counter() - start) / iters
        agg = torch.tensor([avg], dtype=torch.float64)
        dist.all_reduce(agg, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(w, op=dist.ReduceOp.SUM)
        t = float(agg[0])
        if rank == 0:
            nbytes = count * 4
            alg = nbytes / t / 1e9 if t > 0 else 0.0
            print(json.dumps({"collective": "allreduce", "ranks": n, "size_bytes": nbytes, "count": count,
                              "type": "float32", "redop": "sum", "time_us": round(t * 1e6, 3),
                              "algbw_gbps": alg, "busbw_gbps": alg * 2 * (n - 1) / n,
                              "wrong": int(w[0])}), flush=True)
    dist.destroy_process_group()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=2, help="ranks to launch")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("sizes", nargs="+", help="message sizes in bytes, optionally BYTES:ITERS")
    args = p.parse_args()
    if args.iters < 1 or args.np < 1:
        p.error("--iters and --np must be positive")
    for spec in args.sizes:
        try:
            size, iters = parse_size(spec, args.iters)
        except ValueError:
            size, iters = 0, 0
        if size < 1 or iters < 1:
            p.error(f"bad size {spec!r} (want BYTES or BYTES:ITERS)")
    return work(args) if args.worker else launch(args)


if __name__ == "__main__":
    sys.exit(main())
