"""Benchmark of the straggler hook's accumulation (issue 38, item 3), judged
by time to synchronous SGD's accuracy: the unchanged DDP script of
tests/straggler_worker.py train (the digits MLP 64-32-10, --batch samples
per rank per step, SGD with momentum, each step's compute padded to
--pad-ms scaled by the rows the rank computes) on a mocked two-device mix
on CPU: rank 1 --slow times slower (injected compute), rank 0 faster but
with the smaller memory (RINGTAIL_MEM_CAP=--mem-caps at
RINGTAIL_SAMPLE_BYTES=--sample-bytes: micro-batches of at most 6 and 12
rows by default). Three runs per seed, alternating:

* Gloo: plain DDP, equal batches (the reference: its final accuracy is the
  seed's target; a real device of the small cap could not hold its batch);
* hook bsp + caps: the hook's accumulation with equal batches (every rank
  computes --batch rows in micro-batches under its cap);
* hook shares + caps: the policy's shares of each global batch, planned
  under every rank's cap (rt_straggler_open_memory), computed in
  micro-batches under the cap.

Rank 0 evaluates the held-out set every --eval-every steps; the training
time (evaluations taken out) at the first evaluation at or above the
seed's target is the run's time to accuracy. Per-rank step time is the
hook's measured time from a step's end to the rank's next gradient (its
compute), averaged over the run; the spread is the slowest rank's over the
fastest's, minus one. docs/pytorch.md has the numbers.

    /usr/bin/python3 integration/torch/bench_accum.py [--seeds 3] [--first-seed 0] [--epochs 4]
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


def run(args, seed, hook, caps):
    env = {"RINGTAIL_DDP_STRAGGLER": hook or "off", "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "300"}
    if caps:
        env.update(RINGTAIL_MEM_CAP=args.mem_caps, RINGTAIL_SAMPLE_BYTES=str(args.sample_bytes))
    cmd = [WORKER, "train", "--backend", "gloo", "--epochs", str(args.epochs), "--pad-ms", str(args.pad_ms),
           "--slow", str(args.slow), "--slow-rank", "1", "--eval-every", str(args.eval_every), "--batch",
           str(args.batch), "--seed", str(seed)]
    outs = launch.run_world(2, cmd, timeout=1800, extra_env=env)
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


def tta(res, target):
    """Training seconds at the first evaluation at or above target."""
    for seconds, _, acc in res["curve"]:
        if acc >= target:
            return seconds
    return None


def busy_ms(res):
    """Each rank's mean compute time per member step (ms), by rank."""
    return [res["stats"][r]["busy_us"] / max(1, res["stats"][r]["busy_steps"]) / 1000 for r in sorted(res["stats"])]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=16, help="samples per rank per step (equal batches)")
    p.add_argument("--pad-ms", type=float, default=20.0)
    p.add_argument("--slow", type=float, default=2.0)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--mem-caps", default="6400,12800", help="RINGTAIL_MEM_CAP: bytes of rank 0 (fast), rank 1 (slow)")
    p.add_argument("--sample-bytes", type=int, default=1000)
    args = p.parse_args()
    if not os.environ.get("RINGTAIL_LIB"):  # the library of this checkout, not one left by an older build
        subprocess.run([os.path.join(HERE, "build_lib.sh")], check=True)
    configs = [("Gloo, equal batches", "", False), ("hook bsp + caps, equal batches", "bsp", True),
               ("hook shares + caps", "shares", True)]
    runs = {name: [] for name, _, _ in configs}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name, hook, caps in configs:
            r = run(args, seed, hook, caps)
            runs[name].append(r)
            line = {"seed": seed, "run": name, "seconds": r["seconds"], "acc": r["acc"], "spread": r["spread"]}
            if r["stats"]:
                line.update(busy_ms=[round(b, 1) for b in busy_ms(r)], shares=r["stats"][0].get("shares"),
                            micro=[{k: r["stats"][q]["micro"][k] for k in ("cap", "max_micro", "max_accum")}
                                   for q in sorted(r["stats"])])
            print(json.dumps(line), flush=True)
    ref = runs[configs[0][0]]
    print()
    print("world 2, rank 1 %.0fx slower, %.0f ms padded step of %d rows, memory caps %s bytes at %d bytes a sample, %d "
          "epochs, eval every %d steps, seeds %d-%d (medians; each seed's target is its Gloo run's final accuracy)"
          % (args.slow, args.pad_ms, args.batch, args.mem_caps, args.sample_bytes, args.epochs, args.eval_every,
             args.first_seed, args.first_seed + args.seeds - 1))
    print()
    print("| run | time to the target (s) | of Gloo's | final accuracy (%) | per-rank step time r0 / r1 (ms) "
          "| spread | largest micro-batch r0 / r1 (cap) | replicas' max difference |")
    print("|---|---|---|---|---|---|---|---|")
    med = statistics.median
    for name, _, _ in configs:
        rs = runs[name]
        t, rel = [], []
        for i, r in enumerate(rs):
            x, x0 = tta(r, ref[i]["acc"]), tta(ref[i], ref[i]["acc"])
            t.append(x if x is not None else float("inf"))
            rel.append(t[-1] / x0 if x0 else float("inf"))
        fmt = lambda v: "never" if v == float("inf") else "%.2f" % v
        busy, spread, micro = "—", "—", "—"
        if rs[0]["stats"]:
            b = [busy_ms(r) for r in rs]
            b0, b1 = med([x[0] for x in b]), med([x[1] for x in b])
            busy = "%.1f / %.1f" % (b0, b1)
            spread = "%.1f%%" % (100 * med([max(x) / min(x) - 1 for x in b]))
            m = [r["stats"][k]["micro"] for r in rs for k in (0, 1)]
            micro = "%d / %d (%d / %d)" % (max(x["max_micro"] for x in m[0::2]), max(x["max_micro"] for x in m[1::2]),
                                           m[0]["cap"], m[1]["cap"])
        print("| %s | %s | %s | %.2f | %s | %s | %s | %g |" % (name, fmt(med(t)), fmt(med(rel)), med([r["acc"] for r in rs]),
                                                              busy, spread, micro, max(r["spread"] for r in rs)))


if __name__ == "__main__":
    main()
