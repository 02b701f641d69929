"""Benchmark of the ringtail c10d backend against gloo, same processes,
same run (docs/pytorch-bench.md has the numbers and how they were taken).

    /usr/bin/python3 integration/torch/bench.py [--worlds 2,4] [--quick] [--cuda]

For each world size it starts that many local ranks (torchrun's
environment) which measure, alternating the two backends trial by trial:

  * allreduce bus bandwidth of float32 tensors of 16 and 64 MiB issued
    from Python (dist.all_reduce); busbw = 2(W-1)/W * bytes / time;
  * the latency of an 8-byte allreduce (300 in a row);
  * DDP step time (forward, backward with the gradient allreduce,
    optimizer step) of the digits MLP (64-32-10, 2.4k parameters) and of a
    wide one (64-1024-1024-10, 1.1M parameters, 4.3 MB of gradients), with
    the same step without communication (DDP's no_sync) measured in the
    same trials as the control for the machine's noise;

and then runs tests/ddp_worker.py's straggler mode: full digits epochs with
each step's compute padded to 100 ms per even share and the last rank 3x
slower; gloo with an even split, ringtail with HeteroBatchSampler weights
measured in 2 calibration steps and Eq. 7 weighting.

With --cuda (a GPU machine) it measures only the allreduce bus bandwidth,
of CUDA tensors (ranks share the GPUs round-robin): ringtail stages them
through pinned host memory, gloo through its own host copies; each trial
ends with torch.cuda.synchronize(), so the time includes the copies back.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))


def worker(args):
    import datetime

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import digits
    import ringtail_torch  # noqa: F401 - registers the backend

    dist.init_process_group("ringtail", timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cpu")
    if args.cuda:
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)

    def sync():
        if args.cuda:
            torch.cuda.synchronize(dev)
    groups = {"ringtail": dist.GroupMember.WORLD, "gloo": dist.new_group(backend="gloo")}
    trials = 2 if args.quick else 5 if (args.latency_only or args.ddp_only) else 3
    res = {"world": world, "allreduce": {}, "ddp": {}}

    for mib in () if (args.latency_only or args.ddp_only) else (16, 64):
        t = torch.ones(mib * (1 << 20) // 4, device=dev)
        iters = max(2, (64 // mib) * (3 if args.quick else 5))
        times = {name: [] for name in groups}
        for name, g in groups.items():  # warm-up
            dist.all_reduce(t, group=g)
        sync()
        for _ in range(trials):
            for name, g in groups.items():
                dist.barrier(group=g)
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(t, group=g)
                sync()
                times[name].append((time.perf_counter() - t0) / iters)
        for name in groups:
            dt = statistics.median(times[name])
            busbw = 2 * (world - 1) / world * t.numel() * 4 / dt / 1e9
            res["allreduce"].setdefault(str(mib), {})[name] = {"ms": dt * 1e3, "busbw_GBps": busbw}

    if args.cuda:
        if rank == 0:
            res["device"] = torch.cuda.get_device_name(dev)
            print("RESULT " + json.dumps(res), flush=True)
        dist.destroy_process_group()
        return

    t = torch.ones(2)
    times = {name: [] for name in groups}
    for _ in range(0 if args.ddp_only else trials):
        for name, g in groups.items():
            dist.barrier(group=g)
            t0 = time.perf_counter()
            for _ in range(300):
                dist.all_reduce(t, group=g)
            times[name].append((time.perf_counter() - t0) / 300)
    if not args.ddp_only:
        res["latency_us"] = {name: statistics.median(v) * 1e6 for name, v in times.items()}

    xtr, ytr, _, _ = digits.load()
    models_to_run = () if args.latency_only else (("mlp-64-32-10", (32,)), ("mlp-64-1024-1024-10", (1024, 1024)))
    for model_name, hidden in models_to_run:
        steps = 10 if args.quick else 30
        times = {name: [] for name in groups}
        models = {}
        for name, g in groups.items():
            m = DDP(digits.mlp(hidden, seed=1), process_group=g)
            models[name] = (m, torch.optim.SGD(m.parameters(), lr=0.01))
        per = 64 // world
        x, y = xtr[rank * per : (rank + 1) * per], ytr[rank * per : (rank + 1) * per]

        def step(m, opt):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(m(x), y).backward()
            opt.step()

        def compute_only(m, opt):  # the same step without the gradient allreduce
            with m.no_sync():
                step(m, opt)

        # The control: the same step with no communication, measured in
        # the same trials. Its spread is the machine's noise, against which
        # the backends' difference has to be read.
        runs = [(name, m, opt, step) for name, (m, opt) in models.items()]
        runs.append(("compute_only", models["gloo"][0], models["gloo"][1], compute_only))
        times["compute_only"] = []
        for name, (m, opt) in models.items():
            for _ in range(3):
                step(m, opt)
        for _ in range(trials):
            for name, m, opt, fn in runs:
                dist.barrier(group=groups["gloo"])
                t0 = time.perf_counter()
                for _ in range(steps):
                    fn(m, opt)
                times[name].append((time.perf_counter() - t0) / steps)
        res["ddp"][model_name] = {name: {"step_ms": statistics.median(v) * 1e3, "min_ms": min(v) * 1e3, "max_ms": max(v) * 1e3}
                                  for name, v in times.items()}
    if rank == 0:
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--quick", action="store_true", help="fewer trials, 1 straggler epoch")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-straggler", action="store_true")
    p.add_argument("--latency-only", action="store_true", help="only the 8-byte allreduce latency (5 trials)")
    p.add_argument("--ddp-only", action="store_true", help="only the DDP step times (5 trials, no straggler run)")
    p.add_argument("--cuda", action="store_true", help="only the allreduce busbw, of CUDA tensors (a GPU machine)")
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    import launch

    def result(outs):
        for out in outs:
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    return json.loads(line[7:])
        raise RuntimeError("no result:\n" + "\n".join(outs))

    all_res = []
    for w in [int(x) for x in args.worlds.split(",")]:
        extra = (["--quick"] if args.quick else []) + (["--latency-only"] if args.latency_only else []) + (
            ["--ddp-only"] if args.ddp_only else []) + (["--cuda"] if args.cuda else [])
        r = result(launch.run_world(w, [os.path.abspath(__file__), "--worker"] + extra, timeout=600))
        if not (args.no_straggler or args.latency_only or args.ddp_only or args.cuda):
            r["straggler"] = result(launch.run_world(w, [os.path.join(HERE, "tests", "ddp_worker.py"), "straggler",
                                                         "--epochs", "1" if args.quick else "2", "--pad-ms", "100",
                                                         "--slow", "3"], timeout=600))
        all_res.append(r)
        print(json.dumps(r), flush=True)
    print()
    print("| W | measure | ringtail | gloo | ringtail advantage |")
    print("|---|---|---|---|---|")
    for r in all_res:
        w = r["world"]
        for mib, v in r["allreduce"].items():
            a, b = v["ringtail"]["busbw_GBps"], v["gloo"]["busbw_GBps"]
            print("| %d | allreduce %s MiB %sbusbw (GB/s, higher is better) | %.2f | %.2f | %.2fx |" % (
                w, mib, "CUDA (%s) " % r["device"] if "device" in r else "", a, b, a / b))
        if "latency_us" in r:
            a, b = r["latency_us"]["ringtail"], r["latency_us"]["gloo"]
            print("| %d | allreduce 8 B latency (us, lower is better) | %.0f | %.0f | %.2fx |" % (w, a, b, b / a))
        for m, v in r["ddp"].items():
            a, b = v["ringtail"]["step_ms"], v["gloo"]["step_ms"]
            c = v["compute_only"]
            print("| %d | DDP step %s (ms, lower is better; compute only %.2f, trials %.2f-%.2f) | %.2f | %.2f | %.2fx |" % (
                w, m, c["step_ms"], c["min_ms"], c["max_ms"], a, b, b / a))
        if "straggler" in r:
            s = r["straggler"]
            print("| %d | 3x straggler, wall time of the epochs (s) | %.2f (%.2f + %.2f calib.) | %.2f | %.2f of gloo's time |" % (
                w, s["ringtail_s"], s["ringtail_epochs_s"], s["ringtail_s"] - s["ringtail_epochs_s"], s["gloo_s"],
                s["ringtail_s"] / s["gloo_s"]))
            print("| %d | 3x straggler, held-out accuracy (%%) | %.1f | %.1f | |" % (w, s["acc_ringtail"], s["acc_gloo"]))


if __name__ == "__main__":
    main()
