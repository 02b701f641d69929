"""A plain DDP script as a new user would write it, with one line changed
for ringtail (the backend name, and the import that registers it), that
also uses all_to_all and send/recv:

    ringtail-torchrun --nproc_per_node 4 train_example.py

Every rank checks its results (DDP replicas equal, all_to_all and a ring of
send/recv against values computed locally) and prints
"TRAIN rank R world W ok loss L lib PATH", or exits 1.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import ringtail_torch  # registers the "ringtail" backend


def main():
    dist.init_process_group("ringtail")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(20):
        x = torch.randn(32, 16, generator=g)
        y = x[:, :4].argmax(dim=1)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    replicas = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(replicas, flat)
    ok = all(torch.equal(replicas[0], r) for r in replicas)

    # all_to_all: rank r sends rank q the rows [r, q]
    inp = torch.tensor([[float(rank), float(q)] for q in range(world)])
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    ok = ok and torch.equal(out, torch.tensor([[float(q), float(rank)] for q in range(world)]))

    # a ring of send/recv: everyone sends right first, then receives
    right, left = (rank + 1) % world, (rank - 1) % world
    req = dist.isend(torch.full((3,), float(rank)), right)
    got = torch.empty(3)
    dist.recv(got, left)
    req.wait()
    ok = ok and torch.equal(got, torch.full((3,), float(left)))

    dist.barrier()
    lib = ringtail_torch.library_path()
    print("TRAIN rank %d world %d %s loss %.4f lib %s" % (rank, world, "ok" if ok else "FAILED", float(loss), lib), flush=True)
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
