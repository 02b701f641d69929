"""One rank of the CUDA test (test_torch.TestCUDA, skipped without a GPU):
collectives and point-to-point on CUDA tensors staged through pinned host
memory, checked against values computed locally; tensors produced on a
side stream (the staging copy must wait for the kernel that wrote them);
and DDP on a CUDA model against DDP on the same model on the CPU over
gloo. Ranks share the GPUs round-robin (one GPU serves every rank).
Prints "PASS rank R" or exits 1."""

import datetime

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import digits
import ringtail_torch  # noqa: F401 - registers the backend

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what, flush=True)


def main():
    dist.init_process_group("ringtail", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    tri = world * (world + 1) / 2

    # allreduce of a tensor written by a kernel on a side stream: the
    # device-to-host copy is queued on that stream, after the kernel.
    side = torch.cuda.Stream(dev)
    with torch.cuda.stream(side):
        big = torch.ones(1 << 22, device=dev)  # 16 MiB
        torch.cuda._sleep(50_000_000)  # keep the stream busy
        big.mul_(rank + 1)
        w = dist.all_reduce(big, async_op=True)
    w.wait()  # complete only once the result is back on the device
    check(bool((big == tri).all().item()), "allreduce on a side stream")

    t = torch.full((37,), float(rank + 1), device=dev, dtype=torch.float16)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(bool((t == world).all().item()), "allreduce fp16 max")
    nc = torch.arange(12.0, device=dev).reshape(3, 4).t() * (rank + 1)
    dist.all_reduce(nc)
    check(torch.equal(nc.cpu(), torch.arange(12.0).reshape(3, 4).t() * tri), "allreduce non-contiguous")

    b = torch.full((5,), float(rank), device=dev)
    dist.broadcast(b, world - 1)
    check(bool((b == world - 1).all().item()), "broadcast")
    outs = [torch.zeros(3, device=dev) for _ in range(world)]
    dist.all_gather(outs, torch.full((3,), float(rank), device=dev))
    check(all(bool((o == q).all().item()) for q, o in enumerate(outs)), "all_gather")
    out = torch.zeros(2, device=dev)
    dist.reduce_scatter(out, [torch.full((2,), float(rank * 10 + q), device=dev) for q in range(world)])
    check(bool((out == sum(q * 10 + rank for q in range(world))).all().item()), "reduce_scatter")

    inp = torch.arange(2 * world, dtype=torch.float32, device=dev) + 100 * rank
    a2a = torch.empty(2 * world, device=dev)
    dist.all_to_all_single(a2a, inp)
    want = torch.tensor([100.0 * q + 2 * rank + i for q in range(world) for i in range(2)])
    check(torch.equal(a2a.cpu(), want), "all_to_all_single")

    right, left = (rank + 1) % world, (rank - 1) % world
    s = dist.isend(torch.full((4,), float(rank), device=dev), right)
    got = torch.zeros(4, device=dev)
    dist.recv(got, left)
    s.wait()
    check(bool((got == left).all().item()), "send/recv")

    # DDP on CUDA equals DDP on the CPU over gloo, step by step.
    gloo = dist.new_group(backend="gloo")
    xtr, ytr, _, _ = digits.load()
    per = 64 // world
    x, y = xtr[rank * per : (rank + 1) * per], ytr[rank * per : (rank + 1) * per]
    m_gpu = DDP(digits.mlp(seed=1).to(dev), device_ids=[dev.index])
    m_cpu = DDP(digits.mlp(seed=1), process_group=gloo)
    o_gpu = torch.optim.SGD(m_gpu.parameters(), lr=0.1)
    o_cpu = torch.optim.SGD(m_cpu.parameters(), lr=0.1)
    for _ in range(10):
        for m, o, xx, yy in ((m_gpu, o_gpu, x.to(dev), y.to(dev)), (m_cpu, o_cpu, x, y)):
            o.zero_grad()
            F.cross_entropy(m(xx), yy).backward()
            o.step()
    d = max(float((p.detach().cpu() - q.detach()).abs().max()) for p, q in zip(m_gpu.parameters(), m_cpu.parameters()))
    check(d <= 1e-4, "DDP on CUDA differs from DDP on the CPU by %g" % d)

    dist.barrier()
    if FAILS:
        raise SystemExit("rank %d: %d failures" % (rank, len(FAILS)))
    print("PASS rank %d" % rank, flush=True)


if __name__ == "__main__":
    main()
