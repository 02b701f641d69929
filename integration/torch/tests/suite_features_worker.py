"""One rank of test_suite_features.py: the torch.distributed features around
the collectives that torch's own distributed suite checks of Gloo, on the
ringtail backend. argv[1] picks the part: profiler (events named
ringtail:<op> with input shapes, async, one per call, under both
profilers, and a DDP step's allreduce in a torch.profiler trace), sparse
(all_reduce of sparse COO tensors), timeout (a barrier that times out:
torch's words, op and ranks named once) or monitored (monitored_barrier's
messages, wait_all_ranks and rank 0's own timeout). Prints "PASS rank R"
or exits 1."""

import datetime
import json
import os
import re
import sys
import tempfile
from functools import reduce

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ringtail_torch  # noqa: F401 - registers the backend

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL", what, flush=True)


def events(prof, postfix):
    """torch's suite's get_profiling_event: the events whose name ends
    with postfix."""
    evs = prof.events() if isinstance(prof, torch.profiler.profile) else prof.function_events
    return [e for e in evs if e.name.endswith(postfix)]


def check_events(prof, op, count, shapes, what):
    """Torch's call_dist_op checks: count events ringtail:<op>, each async,
    counted once, with the input shapes (when shapes is not None)."""
    evs = events(prof, "ringtail:" + op)
    check(len(evs) == count, "%s: %d ringtail:%s events, want %d (%s)" % (what, len(evs), op, count,
                                                                        [e.name for e in evs]))
    for e in evs:
        check(e.name == "ringtail:" + op, "%s: event named %r" % (what, e.name))
        check(e.is_async, "%s: ringtail:%s is not async" % (what, op))
        check(e.count == 1, "%s: event count %d" % (what, e.count))
        check(e.cpu_time >= 0, "%s: negative cpu time" % what)
        if shapes is not None:
            check(e.input_shapes == shapes, "%s: shapes %s, want %s" % (what, e.input_shapes, shapes))


def autograd_profiler():
    return torch.autograd.profiler.profile(record_shapes=True)


def torch_profiler():
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True)


def profiler_part(rank, world):
    for make in (autograd_profiler, torch_profiler):
        kind = make.__name__
        t = torch.ones(3, 3, 3) * rank
        with make() as prof:
            dist.all_reduce(t)
        check_events(prof, "all_reduce", 1, [[3, 3, 3]], kind + " all_reduce")
        check(bool((t == sum(range(world))).all()), kind + " all_reduce value")

        with make() as prof:
            dist.all_reduce(t, async_op=True).wait()
        check_events(prof, "all_reduce", 1, [[3, 3, 3]], kind + " async all_reduce")

        ts = [torch.ones(2), torch.ones(4, 1)]
        with make() as prof:
            dist.all_reduce_coalesced(ts)
        check_events(prof, "all_reduce", 1, [[2], [4, 1]], kind + " all_reduce_coalesced")

        b = torch.zeros(5)
        with make() as prof:
            dist.broadcast(b, 0)
            dist.reduce(b, 1)
            outs = [torch.zeros(5) for _ in range(world)]
            dist.all_gather(outs, b)
            dist.barrier()
            o = torch.zeros(world * 2)
            dist.all_to_all_single(o, torch.ones(world * 2))
        for op, shapes in (("broadcast", [[5]]), ("reduce", [[5]]), ("all_gather", [[5]]), ("barrier", []),
                           ("all_to_all", [[world * 2]])):
            check_events(prof, op, 1, shapes, kind + " " + op)

        # Point-to-point: torch's _test_send_recv and _test_send_recv_any_source.
        with make() as prof:
            for src in range(world):
                if src == rank:
                    for dst in range(world):
                        if dst != rank:
                            dist.send(torch.full((rank + 1,) * 3, float(rank)), dst)
                else:
                    r = torch.zeros((src + 1,) * 3)
                    dist.recv(r, src)
                    check(bool((r == src).all()), kind + " recv value")
        for op in ("send", "recv"):
            evs = events(prof, "ringtail:" + op)
            check(sum(e.count for e in evs) == world - 1, "%s %s: %d events" % (kind, op, len(evs)))
            for e in evs:
                check(e.is_async, "%s %s not async" % (kind, op))
                check(e.input_shapes in [[[r + 1] * 3] for r in range(world)],
                      "%s %s: shapes %s" % (kind, op, e.input_shapes))
        with make() as prof:
            if rank == 0:
                for _ in range(world - 1):
                    dist.recv(torch.zeros(10))
            else:
                dist.send(torch.ones(10), 0)
        if rank == 0:
            check_events(prof, "recvAnySource", world - 1, [[10]], kind + " recvAnySource")
        else:
            check_events(prof, "send", 1, [[10]], kind + " send to any-source receiver")

    # Standing in for Gloo (a driver of torch's suite): the prefix follows.
    g = dist.new_group(list(range(world)))
    g.profiling_prefix = "gloo:"
    with autograd_profiler() as prof:
        dist.all_reduce(torch.ones(2), group=g)
    check(len(events(prof, "gloo:all_reduce")) == 1, "gloo: prefix: %s" % [e.name for e in events(prof, ":all_reduce")])

    # No profiler: no event machinery (and the collectives still work).
    t = torch.ones(4)
    dist.all_reduce(t)
    check(bool((t == world).all()), "unprofiled all_reduce")

    # One DDP step under torch.profiler, read back from the exported trace.
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 4))
    with torch_profiler() as prof:
        model(torch.randn(5, 8)).sum().backward()
    check_events(prof, "all_reduce", 1, [[4 * 8 + 4]], "DDP step")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    if isinstance(trace, dict):
        trace = trace["traceEvents"]
    evs = [e for e in trace if e.get("name") == "ringtail:all_reduce"]
    check(len(evs) == 1, "trace: %d ringtail:all_reduce events" % len(evs))
    # A kineto build writes each event's shapes into the trace ("Input
    # Dims"); Debian's torch 1.13 exports the legacy trace, which has none
    # for any op (the events' input_shapes above hold them).
    if any("Input Dims" in e.get("args", {}) for e in trace):
        for e in evs:
            check(e["args"].get("Input Dims") == [[36]], "trace: args %s" % e.get("args"))


def timeline_part(rank, world):
    """A few DDP steps under torch.profiler, exported to
    $TRACE_DIR/torch.rank<r>.json, while ringtail writes the rank's timeline
    ($RINGTAIL_TIMELINE): the test lays the first on the second."""
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    dist.all_reduce(torch.ones(1))  # a call before the profiler: the session's clock event is its own
    with torch_profiler() as prof:
        for _ in range(3):
            model(torch.randn(8, 32)).sum().backward()
        dist.broadcast(torch.ones(3), 0)
    clocks = [e for e in prof.events() if e.name.startswith("ringtail:clock unix_ns=")]
    check(len(clocks) == 1, "%d clock events in one profiler session" % len(clocks))
    prof.export_chrome_trace(os.path.join(os.environ["TRACE_DIR"], "torch.rank%d.json" % rank))


def sparse_inputs(rank, world, sparse_dims=1, dense_dims=0):
    """torch's simple_sparse_reduce_tests generator (common_distributed.py)."""
    indices = torch.reshape(torch.arange(rank + 1), (1, rank + 1))
    shape = [world] + [2 for _ in range(dense_dims)]
    for _ in range(sparse_dims - 1):
        indices = torch.cat((indices, torch.zeros(1, rank + 1, dtype=torch.int64)))
        shape.append(world)
    values = torch.ones([rank + 1] + [2 for _ in range(dense_dims)])
    return torch.sparse_coo_tensor(indices, values, shape)


def sparse_part(rank, world):
    cases = [dict(sparse_dims=s) for s in (1, 2, 3)] + [dict(dense_dims=d) for d in (1, 2, 3)]
    for kw in cases:
        t = sparse_inputs(rank, world, **kw)
        want = reduce(lambda a, b: a + b, [sparse_inputs(r, world, **kw) for r in range(world)])
        dist.all_reduce(t, dist.ReduceOp.SUM)
        check(t.is_sparse and t.is_coalesced(), "sparse %s: result not a coalesced sparse tensor" % kw)
        check(torch.equal(t.to_dense(), want.to_dense()), "sparse %s: %s, want %s" % (kw, t, want))
    # Uneven non-zeros, doubles, and async.
    t = torch.sparse_coo_tensor(torch.tensor([[rank, 3]]), torch.tensor([1.5, 2.0], dtype=torch.float64), [8])
    dist.all_reduce(t, async_op=True).wait()
    want = torch.zeros(8, dtype=torch.float64)
    for r in range(world):
        want[r] += 1.5
    want[3] += 2.0 * world
    check(torch.equal(t.to_dense(), want), "sparse uneven: %s" % t.to_dense())
    try:
        dist.all_reduce(sparse_inputs(rank, world), dist.ReduceOp.MAX)
        check(False, "sparse MAX did not raise")
    except NotImplementedError as e:
        check("SUM" in str(e), "sparse MAX: %s" % e)


# torch's _test_barrier_timeout asserts this on the rank that times out.
TORCH_TIMEOUT_RE = re.compile(" (Timed out|closed|timeout) ")


def timeout_part(rank, world):
    # torch's test_barrier_timeout_full_group (and _group): only rank 0
    # enters the barrier of a group with a short timeout.
    group = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=1))
    if rank == 0:
        try:
            dist.barrier(group)
            check(False, "barrier alone did not time out")
        except RuntimeError as e:
            msg = str(e)
            print("barrier timeout message:", msg, flush=True)
            check(TORCH_TIMEOUT_RE.search(msg) is not None, "message lacks torch's ' Timed out ': %r" % msg)
            check("barrier" in msg.lower(), "message does not name the op: %r" % msg)
            check(msg.count("timeout") + msg.count("Timed out") == 1, "timeout said more than once: %r" % msg)
            check(msg.count("ringtail") == 1, "repeated prefix: %r" % msg)
            check(re.search(r"waiting on rank [12]\b", msg) is not None, "no rank waited on: %r" % msg)
            check(msg.count("rank 0") <= 1, "rank 0 named twice: %r" % msg)
            check(getattr(e, "kind", None) == "timeout", "kind %r" % getattr(e, "kind", None))


def expect_error(fn, pattern, what):
    """fn raises a RuntimeError whose message matches the regex pattern
    (torch's assertRaisesRegex)."""
    try:
        fn()
    except RuntimeError as e:
        check(re.search(pattern, str(e)) is not None, "%s: %r does not match %r" % (what, str(e), pattern))
        return str(e)
    check(False, "%s: did not raise" % what)
    return None


def monitored_part(rank, world):
    td = datetime.timedelta
    mb = ringtail_torch.monitored_barrier
    # torch's test_monitored_barrier_gloo: passes after collectives, with
    # and without wait_all_ranks; then rank 1 stays away.
    g = dist.new_group(list(range(world)))
    for _ in range(3):
        dist.all_reduce(torch.ones(10) * rank, group=g)
    mb(g, timeout=td(seconds=20))
    mb(g, timeout=td(seconds=20), wait_all_ranks=True)
    if rank == 0:
        msg = expect_error(lambda: mb(g, timeout=td(seconds=1)), "Rank 1 failed to pass monitoredBarrier", "rank 0")
        print("rank 0 message:", msg, flush=True)
    elif rank != 1:
        msg = expect_error(lambda: mb(g, timeout=td(seconds=1)),
                           "Rank %d successfully reached monitoredBarrier, but received errors while waiting "
                           "for send/recv from rank 0" % rank, "rank %d" % rank)
        print("rank %d message:" % rank, msg, flush=True)
        check(msg is None or "Rank 1 failed to pass monitoredBarrier in 1000 ms" in msg, "verdict not relayed: %r" % msg)
    # test_monitored_barrier_failure_order: ranks 2.. stay away; rank 0
    # names the first, rank 1 says it arrived.
    g = dist.new_group(list(range(world)))
    if rank == 0:
        expect_error(lambda: mb(g, timeout=td(seconds=1)), "Rank 2 failed to pass monitoredBarrier", "failure order")
    elif rank == 1:
        expect_error(lambda: mb(g, timeout=td(seconds=1)),
                     "Rank 1 successfully reached monitoredBarrier, but received errors while waiting "
                     "for send/recv from rank 0", "failure order rank 1")
    # test_monitored_barrier_wait_all_ranks: rank 0 alone names them all.
    g = dist.new_group(list(range(world)))
    if rank == 0:
        names = ", ".join(str(r) for r in range(1, world))
        expect_error(lambda: mb(g, timeout=td(seconds=0.1), wait_all_ranks=True),
                     "Ranks %s failed to pass monitoredBarrier" % names, "wait_all_ranks")
    # test_monitored_barrier_gloo_rank_0_timeout: a zero timeout, the
    # group's own method, rank 0 alone.
    g = dist.new_group(list(range(world)))
    if rank == 0:
        msg = expect_error(lambda: g.monitored_barrier(td(seconds=0)), "Rank 0 timed out in monitoredBarrier", "rank 0 timeout")
        check(msg is None or msg.count("ringtail") == 1, "repeated prefix: %r" % msg)
    # test_monitored_barrier_gloo_subgroup: a float timeout; ranks outside
    # the group do nothing.
    sub = dist.new_group([0, 1])
    if rank == 0:
        expect_error(lambda: sub.monitored_barrier(0.1), "Rank 1 failed to pass monitoredBarrier", "subgroup")


def mismatched_all_reduce(rank):
    """torch's test_collective_shape_mismatch case on a group of its own
    (it fails; the default group goes on): rank 0 reduces a [20, 10]
    tensor, the others [10, 10]. Returns the error's message, or None."""
    world = dist.get_world_size()
    g = dist.new_group(list(range(world)))
    dist.all_reduce(torch.ones(4), group=g)  # a matched call first
    t = torch.ones(20 if rank == 0 else 10, 10)
    try:
        dist.all_reduce(t, group=g)
    except RuntimeError as e:
        print("mismatch message:", e, flush=True)
        return str(e)
    check(False, "mismatched all_reduce did not raise")
    return None


TORCH_MISMATCH = "Detected mismatch between collectives on ranks"


def fingerprint(shape):
    return "CollectiveFingerPrint(OpType=ALLREDUCE, TensorShape=%s, TensorDtypes=Float, TensorDeviceTypes=cpu)" % shape


def debug_detail_part(rank, world):
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: torch's ProcessGroupWrapper words,
    # this rank's fingerprint and one that differs from it.
    msg = mismatched_all_reduce(rank) or ""
    check(TORCH_MISMATCH in msg, "no torch words: %r" % msg)
    mine, other = ("[20, 10]", "[10, 10]") if rank == 0 else ("[10, 10]", "[20, 10]")
    want = "Rank %d is running collective: %s, but Rank %d is running collective: %s" % (
        rank, fingerprint(mine), 1 if rank == 0 else 0, fingerprint(other))
    check(want in msg, "want %r in %r" % (want, msg))
    check("call sites differ" in msg, "ringtail's own message dropped: %r" % msg)


def debug_own_part(rank, world):
    # Off, or DETAIL with RINGTAIL_DEBUG=off set explicitly: ringtail's own
    # mismatch error (the frames' shapes disagree), not torch's words.
    msg = mismatched_all_reduce(rank) or ""
    check(TORCH_MISMATCH not in msg, "torch words although off: %r" % msg)
    check("collective mismatch" in msg and "they disagree on the count" in msg, "not ringtail's mismatch: %r" % msg)


def debug_info_part(rank, world):
    # INFO: ringtail logs at info level (the test reads the output).
    t = torch.ones(8)
    dist.all_reduce(t)
    check(bool((t == world).all()), "all_reduce under INFO")


def main():
    part = sys.argv[1]
    dist.init_process_group("ringtail")
    rank, world = dist.get_rank(), dist.get_world_size()
    {"profiler": profiler_part, "sparse": sparse_part, "timeout": timeout_part, "monitored": monitored_part,
     "timeline": timeline_part, "debug_detail": debug_detail_part, "debug_own": debug_own_part, "debug_info": debug_info_part}[part](rank, world)
    dist.barrier()
    if FAILS:
        print("FAILED rank %d: %d checks" % (rank, len(FAILS)), flush=True)
        sys.exit(1)
    print("PASS rank %d" % rank, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
