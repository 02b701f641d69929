"""A plain DDP training script on ringtail: the UCI digits (data/ of the
repository), an MLP, DistributedSampler, SGD. The one ringtail-specific
line is the backend name; the installed ringtail-torch wheel registers it
by itself (no import needed):

    ringtail-torchrun --nproc_per_node 2 train_ddp.py
    ringtail run -np 2 --dashboard 127.0.0.1:8080 -- python train_ddp.py

Rank 0 prints one line per epoch (training loss, held-out accuracy) and
reports it to ringtail's dashboard, whose training curve draws it. The
ranks end with identical parameters, or exit 1.
"""

import csv
import gzip
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data", "digits.csv.gz")


def digits():
    """The digits as (features scaled to [0, 1], labels), split 80/20 with a
    fixed seed: every rank holds the same sets."""
    with gzip.open(DATA, "rt") as f:
        rows = [[int(v) for v in row] for row in csv.reader(f)]
    t = torch.tensor(rows, dtype=torch.float32)
    x, y = t[:, :-1] / 16.0, t[:, -1].long()
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1))
    cut = int(0.8 * len(y))
    return (x[perm[:cut]], y[perm[:cut]]), (x[perm[cut:]], y[perm[cut:]])


def main(epochs=int(os.environ.get("EPOCHS", "5"))):
    dist.init_process_group("ringtail")  # was: "gloo"
    rank, world = dist.get_rank(), dist.get_world_size()
    (xtr, ytr), (xte, yte) = digits()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(train, shuffle=True, seed=1)
    loader = DataLoader(train, batch_size=64 // world, sampler=sampler)
    # Optional: the dashboard's training curve (ringtail_torch is imported
    # by now: the backend's registration did it).
    try:
        from ringtail_torch import report_progress
    except ImportError:
        report_progress = None
    start, step = time.monotonic(), 0
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        total, n = torch.zeros(2), 0
        t0 = time.monotonic()
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(y), len(y)])
            n += 1
        dist.all_reduce(total)  # the epoch's mean loss over every rank's samples
        step += n
        with torch.no_grad():
            accuracy = (model(xte).argmax(dim=1) == yte).float().mean().item()
        if rank == 0:
            mean_loss, took = (total[0] / total[1]).item(), time.monotonic() - t0
            print("epoch %d  loss %.4f  test-acc %.2f%%  samples/s %.0f" % (epoch, mean_loss, 100 * accuracy, total[1] / took),
                  flush=True)
            if report_progress is not None:
                report_progress(loss=mean_loss, accuracy=accuracy, step=step, epoch=epoch,
                                samples_per_sec=total[1].item() / took, step_time=took / n, elapsed=time.monotonic() - start)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    replicas = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(replicas, flat)
    same = all(torch.equal(replicas[0], r) for r in replicas)
    print("rank %d of %d: done, parameters %s" % (rank, world, "identical on every rank" if same else "DIFFER"), flush=True)
    dist.destroy_process_group()
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
