"""One rank of a DDP script of one of the shapes users write, for the
straggler hook's "every rank exits" tests (issue 36, item 0). The script
knows nothing of ringtail: RINGTAIL_DDP_STRAGGLER in the environment makes
``import ringtail_torch`` (the autoload) register the hook on every DDP
model, as it does for a user's script. Each shape is a training loop as
found in tutorials and user code:

  index        the loop indexes its own tensors (no DataLoader)
  generator    batches from a Python generator (no DataLoader)
  iterable     a DataLoader over an IterableDataset (no sampler)
  eval0        DistributedSampler + DataLoader; rank 0 evaluates every
               --eval-every steps (a pause the others do not take)
  collectives  DistributedSampler + DataLoader; the script's own
               collectives: an all_reduce of the loss every --eval-every
               steps and of the epoch's loss at its end, a
               broadcast_object_list of an early-stop flag, a barrier
               before rank 0 saves a checkpoint
  nosync       gradient accumulation: --accum batches of the DataLoader a
               step, all but the last backward under DDP's no_sync()
  break        leaves the loop after --max-steps steps (every rank counts
               alike) and stops training there
  two          two DDP models trained in the same loop
  crash        eval0's loop, whose rank 0 raises an exception at step
               --max-steps: the other ranks must fail too (naming it),
               never wait for it
  dictout      index's loop over a model whose output is a dict
               ({"logits": ...}; the loss reads its logits)

A simulated device: each training forward (grad enabled) sleeps --pad-ms
per --batch rows the model computes (in its first layer, before the
backward pass and its collectives, where a device's compute is; a
straggler hook that trims rows in DDP's forward gives the rank less of
it), times --slow on --slow-rank (a rank whose device is slower). With --check-eval
every rank also runs the DDP model on each step's batch in eval mode and
under no_grad and counts the outputs that differ from the module's own
(a trimmed evaluation would). Every rank prints "DONE {json}" (its final
parameters' checksum, steps, held-out accuracy) as its last line; the
test compares them.
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset

import digits

if os.environ.get("SHAPES_IMPORT_RINGTAIL") == "1":
    # What the ringtail-torch wheel's autoload does in a user's Python
    # (the tests run from the source tree, without the wheel installed).
    import ringtail_torch  # noqa: F401


def out(line):
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


class Rows(IterableDataset):
    """This rank's rows of a tensor data set, streamed."""

    def __init__(self, x, y, rank, world, epoch_seed):
        self.x, self.y, self.rank, self.world, self.seed = x, y, rank, world, epoch_seed

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed[0])
        n = len(self.x) // self.world * self.world
        perm = torch.randperm(len(self.x), generator=g)[:n][self.rank::self.world]
        for i in perm.tolist():
            yield self.x[i], self.y[i]


class DictOut(nn.Module):
    """A model whose output is a dict, as Hugging Face's models return."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return {"logits": self.net(x)}


def logits(out):
    return out["logits"] if isinstance(out, dict) else out


def checksum(models):
    return float(sum(float(p.detach().double().sum()) + float(p.detach().double().abs().sum())
                     for m in models for p in m.parameters()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shape", choices=["index", "generator", "iterable", "eval0", "collectives", "nosync", "break", "two",
                                     "crash", "dictout"])
    # The user's change: the backend's name. (Over Gloo, torch 1.13's DDP
    # can deadlock at exit: the Reducer's last reference destroys
    # ProcessGroupGloo, which joins its worker while that worker frees a
    # tensor and waits for the GIL the destructor holds.)
    p.add_argument("--backend", default="ringtail")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow", type=float, default=1.0)
    p.add_argument("--pad-ms", type=float, default=5.0)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--rows", type=int, default=0, help="train on the first N rows (0: all)")
    p.add_argument("--seed", type=int, default=0, help="the model's and the data order's seed")
    p.add_argument("--check-eval", action="store_true",
                   help="compare the DDP model's eval-mode and no_grad outputs with the module's every step")
    p.add_argument("--curve", type=int, default=0,
                   help="rank 0 records held-out accuracy every N steps and prints RESULT {json} (the bench's time "
                        "to accuracy; evaluation time taken out)")
    args = p.parse_args()
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.slow_rank < 0:
        args.slow_rank = world - 1
    slow = args.slow if rank == args.slow_rank else 1.0
    xtr, ytr, xte, yte = digits.load()
    if args.rows > 0:
        xtr, ytr = xtr[:args.rows], ytr[:args.rows]
    torch.manual_seed(args.seed)
    net = digits.mlp(seed=1 + args.seed)

    def compute(module, inp):
        # The padded compute of the rows this forward computes.
        if torch.is_grad_enabled() and args.pad_ms > 0:
            time.sleep(args.pad_ms / 1000.0 * slow * int(inp[0].shape[0]) / args.batch)

    net[0].register_forward_pre_hook(compute)
    model = DDP(DictOut(net) if args.shape == "dictout" else net)
    models = [model]
    if args.shape == "two":
        models.append(DDP(digits.mlp(hidden=(16,), seed=2 + args.seed)))

    def accuracy():
        return digits.accuracy(lambda x: logits(model.module(x)), xte, yte)

    opts = [torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9) for m in models]

    def step(x, y):
        for o in opts:
            o.zero_grad(set_to_none=True)
        for m in models:
            F.cross_entropy(logits(m(x)), y).backward()
        for o in opts:
            o.step()

    steps, stop, epoch_seed, evals_differ = 0, False, [0], 0
    curve, accs, evals, steps_per_epoch = [], [], 0.0, 0
    begin = time.perf_counter()
    for epoch in range(args.epochs):
        epoch_seed[0] = epoch + 1000 * args.seed
        first = steps
        loss_sum = torch.zeros(1)
        if args.shape in ("index", "dictout"):
            g = torch.Generator()
            g.manual_seed(epoch + 1000 * args.seed)
            perm = torch.randperm(len(xtr), generator=g)[:len(xtr) // world * world][rank::world]
            batches = ((xtr[perm[i:i + args.batch]], ytr[perm[i:i + args.batch]])
                       for i in range(0, len(perm) - args.batch + 1, args.batch))
        elif args.shape == "generator":
            def gen(epoch=epoch):
                g = torch.Generator()
                g.manual_seed(100 + epoch + 1000 * args.seed)
                for _ in range(len(xtr) // (args.batch * world)):
                    idx = torch.randint(0, len(xtr), (args.batch,), generator=g)
                    yield xtr[idx], ytr[idx]
            batches = gen()
        elif args.shape == "iterable":
            batches = DataLoader(Rows(xtr, ytr, rank, world, epoch_seed), batch_size=args.batch, drop_last=True)
        else:
            sampler = DistributedSampler(TensorDataset(xtr, ytr), shuffle=True, seed=args.seed, drop_last=True)
            sampler.set_epoch(epoch)
            batches = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch, sampler=sampler)
        for i, (x, y) in enumerate(batches):
            if args.shape == "nosync":
                if (i + 1) % args.accum:
                    with model.no_sync():
                        (F.cross_entropy(model(x), y) / args.accum).backward()
                    continue
                (F.cross_entropy(model(x), y) / args.accum).backward()
                for o in opts:
                    o.step()
                    o.zero_grad(set_to_none=True)
            else:
                step(x, y)
            steps += 1
            with torch.no_grad():
                loss_sum += F.cross_entropy(logits(model.module(x)), y)
            if args.check_eval:
                with torch.no_grad():
                    want = logits(model.module(x))
                    evals_differ += int(not torch.equal(logits(model(x)), want))
                    model.eval()
                    evals_differ += int(not torch.equal(logits(model(x)), want))
                    model.train()
            if args.shape == "eval0" and rank == 0 and steps % args.eval_every == 0:
                accuracy()
                time.sleep(0.02)
            if args.shape == "collectives" and steps % args.eval_every == 0:
                t = loss_sum.clone()
                dist.all_reduce(t)
            if args.curve > 0 and rank == 0 and steps % args.curve == 0:
                e0 = time.perf_counter()
                curve.append([round(e0 - begin - evals, 3), steps, round(accuracy(), 2)])
                evals += time.perf_counter() - e0
            if args.shape == "crash" and rank == 0 and steps == args.max_steps:
                raise RuntimeError("injected failure at step %d" % steps)
            if args.shape == "break" and steps >= args.max_steps:
                stop = True
                break
        steps_per_epoch = max(steps_per_epoch, steps - first)
        if args.curve > 0 and rank == 0:
            e0 = time.perf_counter()
            accs.append(round(accuracy(), 2))
            curve.append([round(e0 - begin - evals, 3), steps, accs[-1]])
            evals += time.perf_counter() - e0
        if args.shape == "collectives":
            dist.all_reduce(loss_sum)
            flag = [bool(loss_sum.item() < 0)]  # never true: every rank decides alike
            dist.broadcast_object_list(flag, src=0)
            if flag[0]:
                stop = True
        if stop:
            break
    if args.shape == "collectives":
        dist.barrier()
        if rank == 0:
            with tempfile.TemporaryDirectory() as d:
                torch.save(model.module.state_dict(), os.path.join(d, "ckpt.pt"))
    # The job ends here: under an evicting policy the members' final flush
    # (the evicted ranks' last gradients, the final state sent to them)
    # happens in destroy_process_group, so the parameters are compared
    # after it.
    dist.destroy_process_group()
    hook = {}
    rt = sys.modules.get("ringtail_torch")
    st = rt.straggler_state(model) if rt is not None else None
    if st is not None:
        hook = {"roles": dict(st.stats["roles"]), "modes": dict(st.stats["modes"]), "skipped": st.stats["skipped"],
                "flushed": st.stats["flushed"], "policy": st.policy, "note": st.note, "rows": st.stats.get("rows")}
    out("DONE " + json.dumps({"rank": rank, "steps": steps, "checksum": checksum(models), "evals_differ": evals_differ,
                              "acc": accuracy(), "hook": hook}))
    if args.curve > 0 and rank == 0:
        out("RESULT " + json.dumps({"shape": args.shape, "world": world, "seed": args.seed, "steps": steps,
                                    "steps_per_epoch": steps_per_epoch, "acc": accuracy(),
                                    "acc_by_epoch": accs, "curve": curve, "hook": hook,
                                    "seconds": round(time.perf_counter() - begin, 3)}))


if __name__ == "__main__":
    main()
