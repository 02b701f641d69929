"""One rank of test_torch.py: every collective of the ringtail backend
against values computed locally, point-to-point errors, FIFO
ordering across threads, Eq. 7 weighting against the single-process
gradient, the DDP comm hook, arrival records, and a failed collective
becoming an exception on every rank. Prints "PASS rank R" or exits 1."""

import datetime
import threading

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import digits
import ringtail_torch as rt

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what, flush=True)


def expect_raise(exc, fn, what, contains=None):
    try:
        fn()
    except exc as e:
        if contains is not None and contains not in str(e):
            check(False, "%s: message %r lacks %r" % (what, str(e), contains))
        return
    except Exception as e:  # noqa: BLE001
        check(False, "%s: raised %s %s, want %s" % (what, type(e).__name__, e, _names(exc)))
        return
    check(False, "%s: did not raise %s" % (what, _names(exc)))


def _names(exc):
    """An exception class's name, or a tuple's names joined by " or "."""
    return " or ".join(e.__name__ for e in exc) if isinstance(exc, tuple) else exc.__name__


def value(rank, dtype, n=37):
    """Rank's input: small distinct values, exact in every dtype."""
    base = torch.arange(n) % 5 + rank + 1
    if dtype == torch.bool:
        return (torch.arange(n) + rank) % 3 == 0
    if dtype.is_complex:
        return torch.complex(base.float(), -base.float()).to(dtype)
    return base.to(dtype)


def reference(world, dtype, opname):
    xs = [value(r, dtype) for r in range(world)]
    acc = xs[0].clone()
    for x in xs[1:]:
        if opname in ("SUM", "AVG"):
            acc = acc + x if dtype != torch.bool else acc | x
        elif opname == "PRODUCT":
            acc = acc * x if dtype != torch.bool else acc & x
        elif opname == "MIN":
            acc = torch.minimum(acc, x)
        elif opname == "MAX":
            acc = torch.maximum(acc, x)
        elif opname == "BAND":
            acc = acc & x
        elif opname == "BOR":
            acc = acc | x
        elif opname == "BXOR":
            acc = acc ^ x
    if opname == "AVG":
        acc = acc / world if (dtype.is_floating_point or dtype.is_complex) else torch.div(acc, world, rounding_mode="trunc")
    return acc.to(dtype)


def test_sequence_numbers(rank, world):
    """torch's sequence numbers (Gloo's; init_process_group sets them on a
    group named gloo): 0 after _set_sequence_number_for_group on every rank,
    growing with every call, the same on every rank."""
    pg = dist.distributed_c10d._get_default_group()
    pg._set_sequence_number_for_group()
    check(pg._get_sequence_number_for_group() == 0, "sequence number after set: %r" % pg._get_sequence_number_for_group())
    t = torch.ones(3)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    check(pg._get_sequence_number_for_group() >= 2, "sequence number after 2 calls: %r" % pg._get_sequence_number_for_group())
    seqs = [None] * world
    dist.all_gather_object(seqs, pg._get_sequence_number_for_group())
    check(len(set(seqs)) == 1, "ranks disagree on the sequence number: %r" % seqs)


def test_allreduce(rank, world):
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
           "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG, "BAND": dist.ReduceOp.BAND,
           "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
              torch.uint8, torch.int8, torch.int16, torch.bool, torch.complex64]
    for dt in dtypes:
        for name, op in ops.items():
            bitwise = name in ("BAND", "BOR", "BXOR")
            t = value(rank, dt)
            if dt.is_complex and name not in ("SUM", "AVG"):
                # torch itself refuses these before any backend sees them
                # (RuntimeError in torch 1.13, ValueError in 2.x)
                expect_raise((RuntimeError, ValueError), lambda: dist.all_reduce(t, op=op), "allreduce %s %s" % (dt, name))
                continue
            if bitwise and dt.is_floating_point:
                expect_raise(TypeError, lambda: dist.all_reduce(t, op=op), "allreduce %s %s" % (dt, name))
                continue
            if dt == torch.bool and name == "AVG":
                expect_raise(NotImplementedError, lambda: dist.all_reduce(t, op=op), "allreduce %s %s" % (dt, name), name)
                continue
            dist.all_reduce(t, op=op)
            want = reference(world, dt, name)
            ok = torch.equal(t, want) if not dt.is_floating_point else torch.allclose(t.double(), want.double(), rtol=1e-2)
            check(ok, "allreduce %s %s: %s want %s" % (dt, name, t[:6].tolist(), want[:6].tolist()))
    # complex straight through the process group (dist.all_reduce passes
    # complex tensors as view_as_real)
    pg = dist.distributed_c10d._get_default_group()
    c = value(rank, torch.complex64)
    pg.allreduce([c]).wait()
    check(torch.equal(c, reference(world, torch.complex64, "SUM")), "ProcessGroup.allreduce complex64")
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    expect_raise(NotImplementedError, lambda: pg.allreduce([c], opts), "ProcessGroup.allreduce complex MAX", "MAX")
    # large (ring algorithm) and non-contiguous
    big = torch.full((1 << 20,), float(rank + 1))
    dist.all_reduce(big)
    check(bool((big == world * (world + 1) / 2).all()), "allreduce 4 MiB")
    m = torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (rank + 1)
    dist.all_reduce(m)
    check(torch.equal(m, torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (world * (world + 1) / 2)),
          "allreduce non-contiguous")
    # coalesced
    a, b = torch.ones(3) * rank, torch.ones(5) * 2 * rank
    dist.all_reduce_coalesced([a, b])
    s = world * (world - 1) / 2
    check(bool((a == s).all() and (b == 2 * s).all()), "all_reduce_coalesced")


def test_data_movement(rank, world):
    for root in range(world):
        for dt in (torch.float32, torch.int64, torch.bool, torch.float16, torch.int8):
            t = value(rank, dt)
            dist.broadcast(t, root)
            check(torch.equal(t, value(root, dt)), "broadcast %s root %d" % (dt, root))
    outs = [torch.zeros(4, dtype=torch.int16) for _ in range(world)]
    dist.all_gather(outs, torch.full((4,), rank, dtype=torch.int16))
    check(all(torch.equal(o, torch.full((4,), r, dtype=torch.int16)) for r, o in enumerate(outs)), "all_gather")
    big = torch.zeros(world * 3)
    dist.all_gather_into_tensor(big, torch.full((3,), float(rank)))
    check(torch.equal(big, torch.arange(world).float().repeat_interleave(3)), "all_gather_into_tensor")
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    check(objs == [{"rank": r, "s": "x" * r} for r in range(world)], "all_gather_object")
    lst = [rank, "hello"] if rank == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1)
    check(lst == [1, "hello"], "broadcast_object_list")
    # reduce_scatter (list and tensor forms)
    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.full((2,), float(rank * 10 + i)) for i in range(world)])
    want = sum(r * 10 + rank for r in range(world))
    check(torch.equal(out, torch.full((2,), float(want))), "reduce_scatter: %s want %s" % (out.tolist(), want))
    out = torch.zeros(2, dtype=torch.int32)
    inp = torch.arange(2 * world, dtype=torch.int32) + rank
    dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.MAX)
    check(torch.equal(out, torch.arange(2 * rank, 2 * rank + 2, dtype=torch.int32) + world - 1), "reduce_scatter_tensor max")
    # reduce, gather, scatter
    t = torch.full((3,), float(rank + 1))
    dist.reduce(t, dst=world - 1)
    if rank == world - 1:
        check(torch.equal(t, torch.full((3,), world * (world + 1) / 2)), "reduce at root")
    else:
        check(torch.equal(t, torch.full((3,), float(rank + 1))), "reduce leaves non-root input")
    g = [torch.zeros(2) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank)), g, dst=0)
    if rank == 0:
        check(all(torch.equal(x, torch.full((2,), float(r))) for r, x in enumerate(g)), "gather")
    s = torch.zeros(2)
    dist.scatter(s, [torch.full((2,), float(r * 7)) for r in range(world)] if rank == 1 else None, src=1)
    check(torch.equal(s, torch.full((2,), float(rank * 7))), "scatter")
    dist.barrier()


def test_p2p_errors(rank, world):
    """What Gloo cannot show (it aborts the process on a size mismatch):
    a message that does not fit its receive fails that receive only; bad
    tags and peers are refused up front; Work.wait(timeout) gives up
    without breaking anything."""
    right, left = (rank + 1) % world, (rank - 1) % world
    dist.send(torch.ones(4), right, tag=5)
    expect_raise(RuntimeError, lambda: dist.recv(torch.ones(3), left, tag=5), "recv of a larger message", "16 bytes")
    dist.send(torch.full((2,), float(rank)), right, tag=5)
    t = torch.zeros(2)
    dist.recv(t, left, tag=5)
    check(torch.equal(t, torch.full((2,), float(left))), "recv after a failed one: %s" % t.tolist())
    expect_raise(ValueError, lambda: dist.isend(torch.ones(1), right, tag=-1), "negative tag", "tag")
    expect_raise(RuntimeError, lambda: dist.isend(torch.ones(1), rank), "send to self", "not another rank")
    w = dist.irecv(torch.zeros(1), left, tag=77)
    expect_raise(RuntimeError, lambda: w.wait(datetime.timedelta(milliseconds=50)), "irecv wait(timeout)", "nothing arrived")
    check(w.is_completed() and not w.is_success(), "withdrawn irecv completed, not a success")
    uneven = [torch.zeros(r + 1) for r in range(world)]
    expect_raise(NotImplementedError, lambda: dist.all_gather(uneven, torch.zeros(rank + 1)), "uneven all_gather", "uneven")
    dist.barrier()


def test_fifo_threads(rank, world):
    # Many async collectives in flight, issued alternately by two threads
    # in a fixed order: results prove they met in issue order.
    works, tensors = [None] * 40, [None] * 40
    turn = [threading.Event() for _ in range(41)]
    turn[0].set()

    def issuer(parity):
        for i in range(parity, 40, 2):
            turn[i].wait(10)
            tensors[i] = torch.full((1000 + 97 * i,), float(i * (rank + 1)))
            works[i] = dist.all_reduce(tensors[i], async_op=True)
            turn[i + 1].set()

    th = [threading.Thread(target=issuer, args=(p,)) for p in (0, 1)]
    for x in th:
        x.start()
    for x in th:
        x.join(30)
    for i, w in enumerate(works):
        w.wait()
        check(bool((tensors[i] == i * world * (world + 1) / 2).all()), "fifo op %d" % i)
    fut = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    check(torch.equal(fut.wait()[0], torch.full((3,), float(world))), "work.get_future value")
    # Works waited on or whose future was taken are not kept alive
    pg = dist.distributed_c10d._get_default_group()
    for _ in range(50):
        dist.all_reduce(torch.ones(1 << 16))
    check(len(pg._keep) == 0, "%d finished Works still kept" % len(pg._keep))


def test_eq7(rank, world):
    """Ranks hold different amounts of data; weighted DDP gradients equal
    the single-process gradient of all the data."""
    xtr, ytr, _, _ = digits.load()
    counts = [3 + 4 * r for r in range(world)]
    starts = [sum(counts[:r]) for r in range(world)]
    total = sum(counts)
    xs, ys = xtr[:total], ytr[:total]
    ref = digits.mlp(seed=3)
    F.cross_entropy(ref(xs), ys).backward()
    mine = slice(starts[rank], starts[rank] + counts[rank])
    for mode in ("scoped", "persistent"):
        model = DDP(digits.mlp(seed=3))
        loss = F.cross_entropy(model(xs[mine]), ys[mine])
        if mode == "scoped":
            with rt.local_batch(counts[rank]):
                loss.backward()
        else:
            rt.set_local_batch(counts[rank])
            loss.backward()
            rt.set_local_batch(None)
        d = max(float((p.grad - q.grad).abs().max()) for p, q in zip(model.parameters(), ref.parameters()))
        check(d <= 1e-6, "eq7 %s: gradient differs from single-process by %g" % (mode, d))
    # unweighted DDP would not match (so the test can fail)
    model = DDP(digits.mlp(seed=3))
    F.cross_entropy(model(xs[mine]), ys[mine]).backward()
    d = max(float((p.grad - q.grad).abs().max()) for p, q in zip(model.parameters(), ref.parameters()))
    check(d > 1e-4, "unweighted DDP unexpectedly equals the weighted gradient (%g)" % d)
    # a weighted AVG of per-rank means is the global mean
    rt.set_local_batch(counts[rank])
    m = torch.tensor([float(ys[mine].float().mean())])
    dist.all_reduce(m, op=dist.ReduceOp.AVG)
    rt.set_local_batch(None)
    check(abs(float(m) - float(ys.float().mean())) < 1e-5, "weighted AVG of means: %g vs %g" % (float(m), float(ys.float().mean())))
    return ref, xs, ys, mine, counts


def test_hook(rank, world, eq7):
    ref, xs, ys, mine, counts = eq7
    gloo = dist.new_group(backend="gloo")
    plain = DDP(digits.mlp(seed=4), process_group=gloo)
    hooked = DDP(digits.mlp(seed=4), process_group=gloo)
    state = rt.HookState(process_group=gloo)
    hooked.register_comm_hook(state, rt.allreduce_hook)
    x, y = xs[mine], ys[mine]
    F.cross_entropy(plain(x), y).backward()
    F.cross_entropy(hooked(x), y).backward()
    d = max(float((p.grad - q.grad).abs().max()) for p, q in zip(plain.parameters(), hooked.parameters()))
    check(d <= 1e-6, "comm hook gradient differs from gloo DDP by %g" % d)
    weighted = DDP(digits.mlp(seed=3), process_group=gloo)
    weighted.register_comm_hook(state, rt.allreduce_hook)
    state.set_local_batch(counts[rank])
    F.cross_entropy(weighted(x), y).backward()
    d = max(float((p.grad - q.grad).abs().max()) for p, q in zip(weighted.parameters(), ref.parameters()))
    check(d <= 1e-6, "weighted comm hook differs from single-process by %g" % d)
    state.shutdown()


def test_arrivals(rank, world):
    rt.mark_step()
    for _ in range(3):
        dist.all_reduce(torch.ones(8))
    recs = rt.arrivals()
    check(len(recs) > 0 and all(a.issued <= a.started <= a.finished for a in recs), "arrival records ordered")
    check(recs[-1].op == "allreduce.sum" and recs[-1].nbytes == 32, "arrival record fields %s" % (recs[-1],))
    steps, arrive, wait = rt.gather_arrivals(last=3)
    check(tuple(arrive.shape) == (world, len(steps)) and len(steps) >= 1, "gather_arrivals shape %s" % (tuple(arrive.shape),))


def test_subgroup_and_failure(rank, world):
    sub = dist.new_group(ranks=[0, world - 1], backend="ringtail")
    if rank in (0, world - 1):
        t = torch.ones(4) * (rank + 1)
        dist.all_reduce(t, group=sub)
        check(torch.equal(t, torch.full((4,), float(1 + world))), "subgroup allreduce")
    bad = dist.new_group(backend="ringtail", timeout=datetime.timedelta(seconds=20))
    t = torch.ones(10 + rank)  # sizes disagree across ranks
    try:
        dist.all_reduce(t, group=bad)
        check(False, "mismatched allreduce did not fail")
    except rt.RingtailError as e:
        check(e.kind in ("mismatch", "local", "peer died", "closed"), "mismatch error kind %r: %s" % (e.kind, e))
    # the default group is untouched
    t = torch.ones(2)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((2,), float(world))), "default group after a failed subgroup")


def main():
    dist.init_process_group("ringtail", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "ringtail", "backend name %s" % dist.get_backend())
    test_sequence_numbers(rank, world)
    test_allreduce(rank, world)
    test_data_movement(rank, world)
    test_p2p_errors(rank, world)
    test_fifo_threads(rank, world)
    eq7 = test_eq7(rank, world)
    test_hook(rank, world, eq7)
    test_arrivals(rank, world)
    test_subgroup_and_failure(rank, world)
    dist.barrier()
    if FAILS:
        raise SystemExit("rank %d: %d failures" % (rank, len(FAILS)))
    print("PASS rank %d" % rank, flush=True)


if __name__ == "__main__":
    main()
