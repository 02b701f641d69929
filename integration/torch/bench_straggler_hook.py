"""Benchmark of straggler handling under PyTorch DDP, judged by time to
accuracy: the same DDP script (tests/straggler_worker.py train: the digits
MLP 64-32-10, 16 samples per rank per step, SGD with momentum, each step's
compute padded to --pad-ms, scaled by the rows computed; one rank --slow
times slower) over Gloo without the straggler (the reference), Gloo with
it, and ringtail's straggler hook with it: the DDP comm hook under each
--policies value with the script's DistributedSampler unchanged
(RINGTAIL_DDP_STRAGGLER), and the hook driving a HeteroBatchSampler with
the policy's shares (--sampler-policies). Rank 0 evaluates the held-out set
every --eval-every steps; the training time (evaluations taken out) at the
first evaluation at or above the reference's final accuracy is the run's
time to accuracy. Runs alternate, trial by trial; the table gives medians
over trials. docs/pytorch-straggler-bench.md has the numbers.

    /usr/bin/python3 integration/torch/bench_straggler_hook.py [--trials 3] [--epochs 10]

--script index runs tests/shapes_worker.py's loop without a DataLoader (it
indexes its own tensors) instead; there the simulated device sleeps in each
training forward, --pad-ms per --batch rows the model computes (times
--slow on the last rank), before the backward pass and its collectives:
a rank whose rows the hook trims inside DDP's forward (adaptive) computes
for less time, as a real device would, and Gloo's runs have the same
injection. Trial t runs every configuration with seed t (the model's
initialisation and the data order).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))

import launch  # noqa: E402

WORKER = os.path.join(HERE, "tests", "straggler_worker.py")
SHAPES = os.path.join(HERE, "tests", "shapes_worker.py")


def run(args, backend, slow, hook="", sampler_policy="", seed=0):
    env = {"RINGTAIL_DDP_STRAGGLER": hook, "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "300"}
    if args.script != "sampler":
        # The script imports nothing of ringtail: what the wheel's autoload
        # does in a user's Python.
        env["SHAPES_IMPORT_RINGTAIL"] = "1" if hook else "0"
        cmd = [SHAPES, args.script, "--backend", backend, "--epochs", str(args.epochs), "--pad-ms", str(args.pad_ms),
               "--slow", str(slow), "--curve", str(args.eval_every), "--batch", str(args.batch), "--seed", str(seed)]
        outs = launch.run_world(args.world, cmd, timeout=1800, extra_env=env)
        for out in outs:
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    r = json.loads(line[7:])
                    r.setdefault("spread", 0.0)  # every rank's DONE checksum is compared below
                    sums = {l.split('"checksum": ')[1].split(",")[0] for o in outs for l in o.splitlines()
                            if l.startswith("DONE ")}
                    r["spread"] = 0.0 if len(sums) == 1 else float("nan")
                    return r
        raise RuntimeError("no result:\n" + "\n".join(outs))
    cmd = [WORKER, "train", "--backend", backend, "--epochs", str(args.epochs), "--pad-ms", str(args.pad_ms),
           "--slow", str(slow), "--eval-every", str(args.eval_every), "--batch", str(args.batch), "--seed", str(seed)]
    if sampler_policy:
        cmd += ["--sampler", "hetero", "--policy", sampler_policy]
    outs = launch.run_world(args.world, cmd, timeout=1800, extra_env=env)
    for out in outs:
        for line in out.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
    raise RuntimeError("no result:\n" + "\n".join(outs))


def tta(res, target):
    """Training seconds at the first evaluation at or above target."""
    for seconds, _, acc in res["curve"]:
        if acc >= target:
            return seconds
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--script", choices=["sampler", "index"], default="sampler",
                   help="sampler: a DistributedSampler + DataLoader script; index: a loop without a DataLoader")
    p.add_argument("--batch", type=int, default=16, help="samples per rank per step")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0, help="trial t runs with seed first-seed + t")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--pad-ms", type=float, default=40.0)
    p.add_argument("--slow", type=float, default=3.0)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--policies", default="adaptive,star,exact",
                   help="comma-separated RINGTAIL_DDP_STRAGGLER values (the script's DistributedSampler unchanged)")
    p.add_argument("--sampler-policies", default="shares",
                   help="comma-separated policies driving a HeteroBatchSampler's shares")
    args = p.parse_args()
    if not os.environ.get("RINGTAIL_LIB"):  # the library of this checkout, not one left by an older build
        subprocess.run([os.path.join(HERE, "build_lib.sh")], check=True)
    configs = [("Gloo, no straggler", dict(backend="gloo", slow=1.0)),
               ("Gloo", dict(backend="gloo", slow=args.slow))]
    for pol in args.policies.split(","):
        if pol:
            configs += [("hook %s, no straggler" % pol, dict(backend="gloo", slow=1.0, hook=pol)),
                        ("hook %s" % pol, dict(backend="gloo", slow=args.slow, hook=pol))]
    for pol in args.sampler_policies.split(",") if args.script == "sampler" else []:
        if pol:
            configs += [("hook %s + HeteroBatchSampler, no straggler" % pol, dict(backend="gloo", slow=1.0, sampler_policy=pol)),
                        ("hook %s + HeteroBatchSampler" % pol, dict(backend="gloo", slow=args.slow, sampler_policy=pol))]
    runs = {name: [] for name, _ in configs}
    for t in range(args.trials):
        for name, kw in configs:
            r = run(args, seed=args.first_seed + t, **kw)
            runs[name].append(r)
            print(json.dumps({"trial": t, "run": name, "seconds": r["seconds"], "acc": r["acc"],
                              "acc_by_epoch": r["acc_by_epoch"], "spread": r["spread"]}), flush=True)
    ref = runs[configs[0][0]]
    print()
    print("script %s, world %d, rank %d %.0fx slower, %.0f ms padded step, %d steps per epoch, %d epochs, eval every "
          "%d steps, %d trials, seeds %d-%d (medians; each trial's target is that trial's Gloo-without-straggler final "
          "accuracy)" % (args.script, args.world, args.world - 1, args.slow, args.pad_ms, ref[0]["steps_per_epoch"],
                         args.epochs, args.eval_every, args.trials, args.first_seed, args.first_seed + args.trials - 1))
    print()
    print("| run | time to the target (s) | of Gloo w/o straggler's | of Gloo's (with it) | final accuracy (%) "
          "| vs the target (points) | last 3 epochs' mean vs the target's (points) | replicas' max difference |")
    print("|---|---|---|---|---|---|---|---|")
    gloo = runs[configs[1][0]]
    for name, _ in configs:
        rs = runs[name]
        t, r0, rg, acc, diff, last = [], [], [], [], [], []
        for i, r in enumerate(rs):
            target = ref[i]["acc"]
            x = tta(r, target)
            t.append(x if x is not None else float("inf"))
            x0, xg = tta(ref[i], target), tta(gloo[i], target)
            r0.append(t[-1] / x0 if x0 else float("inf"))
            rg.append(t[-1] / xg if xg else float("inf"))
            acc.append(r["acc"])
            diff.append(r["acc"] - target)
            # One epoch's accuracy on 359 rows swings by points: the mean of
            # the last three epochs' against the reference's.
            last.append(statistics.mean(r["acc_by_epoch"][-3:]) - statistics.mean(ref[i]["acc_by_epoch"][-3:]))
        med = statistics.median
        fmt = lambda v: "never" if v == float("inf") else "%.2f" % v
        print("| %s | %s | %s | %s | %.2f | %+.2f | %+.2f | %g |" % (name, fmt(med(t)), fmt(med(r0)), fmt(med(rg)),
                                                                med(acc), med(diff), med(last),
                                                                max(r["spread"] for r in rs)))


if __name__ == "__main__":
    main()
