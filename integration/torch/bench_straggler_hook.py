"""Benchmark of the DDP straggler hook (ringtail_torch/straggler.py): the
same unmodified DDP script (tests/straggler_worker.py train: the digits
MLP 64-32-10, DistributedSampler, 16 samples per rank per step, SGD with
momentum, each step's compute padded to --pad-ms, one rank --slow times
slower) run over Gloo, and over ringtail with RINGTAIL_DDP_STRAGGLER set —
nothing else differs. Runs alternate, trial by trial; the table gives
medians over trials of each run's mean epoch time, the ratio to Gloo's,
the held-out accuracy after --early epochs and after the last, and its
mean over the last 5 epochs (one epoch's accuracy on the 359 held-out
rows moves by a point or two from epoch to epoch). docs/pytorch.md has the
numbers.

    /usr/bin/python3 integration/torch/bench_straggler_hook.py [--trials 3] [--epochs 20] [--policies star]
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))

import launch  # noqa: E402

WORKER = os.path.join(HERE, "tests", "straggler_worker.py")


def run(backend, hook, args):
    env = {"RINGTAIL_DDP_STRAGGLER": hook, "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "300"}
    outs = launch.run_world(args.world, [WORKER, "train", "--backend", backend, "--epochs", str(args.epochs),
                                         "--pad-ms", str(args.pad_ms), "--slow", str(args.slow)],
                            timeout=1200, extra_env=env)
    res, stats = None, {}
    for out in outs:
        for line in out.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
            elif line.startswith("STATS rank="):
                head, body = line[len("STATS rank="):].split(" ", 1)
                stats[int(head)] = json.loads(body)
    if res is None:
        raise RuntimeError("no result:\n" + "\n".join(outs))
    res["stats"] = stats
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--pad-ms", type=float, default=100.0)
    p.add_argument("--slow", type=float, default=3.0)
    p.add_argument("--early", type=int, default=8, help="also report the accuracy after this many epochs")
    p.add_argument("--policies", default="star", help="comma-separated RINGTAIL_DDP_STRAGGLER values to run")
    args = p.parse_args()
    configs = [("gloo", "")] + [("ringtail", pol) for pol in args.policies.split(",") if pol]
    runs = {c: [] for c in configs}
    for t in range(args.trials):
        for c in configs:
            r = run(c[0], c[1], args)
            runs[c].append(r)
            print(json.dumps({"trial": t, "backend": c[0], "hook": c[1], "epoch_s": r["epoch_s"],
                              "acc_by_epoch": r["acc_by_epoch"], "spread": r["spread"]}), flush=True)
    base = statistics.median(statistics.mean(r["epoch_s"]) for r in runs[configs[0]])
    print()
    print("world %d, rank %d %.0fx slow, %.0f ms padded step, %d steps per epoch, %d epochs, %d trials (medians)" % (
        args.world, args.world - 1, args.slow, args.pad_ms, runs[configs[0]][0]["steps_per_epoch"], args.epochs,
        args.trials))
    print()
    early = min(args.early, args.epochs)
    last = min(5, args.epochs)
    print("| run | epoch time (s) | of Gloo's | accuracy after %d / %d epochs (%%) | mean accuracy of the last %d epochs (%%) "
          "| slow rank: child steps, batches skipped | staleness (max) | replicas' max difference |" % (early, args.epochs, last))
    print("|---|---|---|---|---|---|---|---|")
    for c in configs:
        rs = runs[c]
        ep = statistics.median(statistics.mean(r["epoch_s"]) for r in rs)
        acc = statistics.median(r["acc"] for r in rs)
        acc_early = statistics.median(r["acc_by_epoch"][early - 1] for r in rs)
        acc_last = statistics.median(statistics.mean(r["acc_by_epoch"][-last:]) for r in rs)
        name = "Gloo" if c[0] == "gloo" else "ringtail + RINGTAIL_DDP_STRAGGLER=%s" % c[1]
        child = skipped = stale = ""
        if c[1]:
            slow = [r["stats"].get(args.world - 1, {}) for r in rs]
            child = "%d, %d" % (statistics.median(s.get("roles", {}).get("child", 0) for s in slow),
                                statistics.median(s.get("skipped", 0) for s in slow))
            stale = "%.0f" % max(s.get("max_staleness", 0) for r in rs for s in r["stats"].values())
        print("| %s | %.2f | %.2f | %.1f / %.1f | %.1f | %s | %s | %g |" % (
            name, ep, ep / base, acc_early, acc, acc_last, child, stale, max(r["spread"] for r in rs)))


if __name__ == "__main__":
    main()
