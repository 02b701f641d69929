"""A DDP job with the straggler hook on (a second ringtail communicator in
each process) under ``ringtail run --metrics-port``: rank 0 reports its
progress and prints its own ringtail_train_* metrics, which hold the
report and the hook's step clock."""

import os
import time
import urllib.request

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringtail_torch


def main():
    dist.init_process_group("ringtail")
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 2), broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ringtail_torch.enable_straggler_handling(model, opt, policy="star")
    data = torch.utils.data.TensorDataset(torch.randn(640, 8, generator=torch.Generator().manual_seed(1)),
                                          torch.randint(0, 2, (640,), generator=torch.Generator().manual_seed(2)))
    loader = torch.utils.data.DataLoader(data, batch_size=8, sampler=torch.utils.data.distributed.DistributedSampler(data))
    for _ in range(2):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            time.sleep(0.03)  # 40 steps an epoch: the hook's clock reports
    ok = ringtail_torch.report_progress(loss=torch.tensor(0.5), accuracy=0.75, step=80, epoch=2)
    if dist.get_rank() == 0:
        body = urllib.request.urlopen("http://%s/metrics" % os.environ["RINGTAIL_METRICS_ADDR"], timeout=30).read().decode()
        for line in body.splitlines():
            if line.startswith("ringtail_train_"):
                print("METRIC", line, flush=True)
    print("PROGRESS rank %d reported %s" % (dist.get_rank(), ok), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
