"""One rank of the conformance test: the same calls over a Gloo group and
over a ringtail group, in the same processes, results compared call by
call.

For every case both backends run the same function. A case passes when
both return equal values, or both raise a RuntimeError (Gloo's error
behaviour: the call fails, on the ranks Gloo fails it on); when Gloo does
not implement the call (torch 1.13's Gloo lacks AVG, all_to_all of lists,
reduce_scatter, all_gather_into_tensor), ringtail's value is checked
against the value computed locally instead. Each rank prints one line
"CONF <json>": [[case, verdict, detail], ...] with verdict one of "same",
"same-error", "ringtail-only", "MISMATCH".
"""

import datetime
import json
import sys
import traceback

import torch
import torch.distributed as dist

import ringtail_torch as rt

SHORT = datetime.timedelta(seconds=2)
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def L(t):
    return t.tolist()


# -- collectives ---------------------------------------------------------------


@case
def allreduce_sum_f32(g, r, w):
    t = torch.arange(6, dtype=torch.float32) * (r + 1)
    dist.all_reduce(t, group=g)
    return L(t)


@case
def allreduce_max_i64(g, r, w):
    t = (torch.arange(5) * (r % 3)).to(torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g)
    return L(t)


@case
def allreduce_avg(g, r, w):
    t = torch.full((3,), float(r))
    dist.all_reduce(t, op=dist.ReduceOp.AVG, group=g)
    return L(t)


def expect_allreduce_avg(r, w):
    return [sum(range(w)) / w] * 3


@case
def broadcast(g, r, w):
    t = torch.full((4,), float(r))
    dist.broadcast(t, 2, group=g)
    return L(t)


@case
def all_gather(g, r, w):
    outs = [torch.zeros(3, dtype=torch.int32) for _ in range(w)]
    dist.all_gather(outs, torch.full((3,), r, dtype=torch.int32), group=g)
    return [L(o) for o in outs]


@case
def all_gather_into_tensor(g, r, w):
    out = torch.zeros(2 * w)
    dist.all_gather_into_tensor(out, torch.full((2,), float(r)), group=g)
    return L(out)


def expect_all_gather_into_tensor(r, w):
    return [float(q) for q in range(w) for _ in range(2)]


@case
def reduce_to_1(g, r, w):
    t = torch.full((3,), float(r + 1))
    dist.reduce(t, 1, group=g)
    return L(t) if r == 1 else None  # only the root's tensor is defined


@case
def gather_to_0(g, r, w):
    outs = [torch.zeros(2) for _ in range(w)] if r == 0 else None
    dist.gather(torch.full((2,), float(r)), outs, dst=0, group=g)
    return [L(o) for o in outs] if r == 0 else None


@case
def scatter_from_3(g, r, w):
    out = torch.zeros(2)
    ins = [torch.full((2,), float(10 * q)) for q in range(w)] if r == 3 else None
    dist.scatter(out, ins, src=3, group=g)
    return L(out)


@case
def reduce_scatter(g, r, w):
    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.full((2,), float(r * 10 + q)) for q in range(w)], group=g)
    return L(out)


def expect_reduce_scatter(r, w):
    return [float(sum(q * 10 + r for q in range(w)))] * 2


@case
def all_gather_coalesced(g, r, w):
    outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(w)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(r)), torch.arange(3.0) + r], group=g)
    return [[L(o) for o in lst] for lst in outs]


@case
def barrier(g, r, w):
    dist.barrier(group=g)


@case
def monitored_barrier(g, r, w):
    if dist.get_backend(g) == "gloo":
        return dist.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=30))
    return rt.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=30))


# -- object collectives ---------------------------------------------------------


@case
def all_gather_object(g, r, w):
    objs = [None] * w
    dist.all_gather_object(objs, {"rank": r, "s": "x" * r, "t": (r, [r] * r)}, group=g)
    return repr(objs)


@case
def broadcast_object_list(g, r, w):
    lst = [{"from": r}, "hello" * r] if r == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1, group=g)
    return repr(lst)


@case
def gather_object(g, r, w):
    out = [None] * w if r == 0 else None
    dist.gather_object(("obj", r), out, dst=0, group=g)
    return repr(out)


@case
def scatter_object_list(g, r, w):
    out = [None]
    dist.scatter_object_list(out, [{"for": q} for q in range(w)] if r == 0 else None, src=0, group=g)
    return repr(out)


# -- all-to-all -----------------------------------------------------------------


@case
def all_to_all_single_even(g, r, w):
    inp = torch.arange(2 * w, dtype=torch.float32) + 100 * r
    out = torch.empty(2 * w)
    dist.all_to_all_single(out, inp, group=g)
    return L(out)


@case
def all_to_all_single_uneven(g, r, w):
    # rank r sends q+r+1 rows of 3 to rank q; receives r+q+1 rows from q
    ins = [q + r + 1 for q in range(w)]
    outs = [r + q + 1 for q in range(w)]
    inp = torch.cat([torch.full((n, 3), float(10 * r + q)) for q, n in enumerate(ins)])
    out = torch.zeros(sum(outs), 3)
    dist.all_to_all_single(out, inp, outs, ins, group=g)
    return L(out)


@case
def all_to_all_single_zero_rows(g, r, w):
    ins = [1 if q == (r + 1) % w else 0 for q in range(w)]  # only to the right neighbour
    outs = [1 if q == (r - 1) % w else 0 for q in range(w)]
    out = torch.zeros(1, 2, dtype=torch.int64)
    dist.all_to_all_single(out, torch.full((1, 2), r, dtype=torch.int64), outs, ins, group=g)
    return L(out)


@case
def all_to_all_lists(g, r, w):
    ins = [torch.full((q + 1,), float(r)) for q in range(w)]
    outs = [torch.zeros(r + 1) for _ in range(w)]
    dist.all_to_all(outs, ins, group=g)
    return [L(o) for o in outs]


def expect_all_to_all_lists(r, w):
    return [[float(q)] * (r + 1) for q in range(w)]


@case
def all_to_all_bad_splits(g, r, w):
    # split sizes that do not add up to dim 0: refused locally on every rank
    dist.all_to_all_single(torch.zeros(w), torch.zeros(w), [1] * w, [2] * w, group=g)


# -- point-to-point -------------------------------------------------------------


@case
def send_recv_ring(g, r, w):
    t = torch.empty(4)
    if r % 2 == 0:
        dist.send(torch.full((4,), float(r)), (r + 1) % w, group=g)
        dist.recv(t, (r - 1) % w, group=g)
    else:
        dist.recv(t, (r - 1) % w, group=g)
        dist.send(torch.full((4,), float(r)), (r + 1) % w, group=g)
    return L(t)


@case
def isend_irecv_both_first(g, r, w):
    # everyone sends to both neighbours before receiving
    left, right = (r - 1) % w, (r + 1) % w
    a, b = torch.empty(1000), torch.empty(1000)
    works = [dist.isend(torch.full((1000,), float(r)), right, group=g, tag=1),
             dist.isend(torch.full((1000,), float(-r)), left, group=g, tag=2),
             dist.irecv(a, left, group=g, tag=1), dist.irecv(b, right, group=g, tag=2)]
    for x in works:
        x.wait()
    return [a[0].item(), b[0].item(), bool((a == a[0]).all()), bool((b == b[0]).all())]


@case
def batch_isend_irecv(g, r, w):
    left, right = (r - 1) % w, (r + 1) % w
    x, y = torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.int64)
    ops = [dist.P2POp(dist.isend, torch.full((3,), r, dtype=torch.int64), right, g),
           dist.P2POp(dist.isend, torch.full((3,), 10 * r, dtype=torch.int64), left, g),
           dist.P2POp(dist.irecv, x, left, g), dist.P2POp(dist.irecv, y, right, g)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    return [L(x), L(y)]


@case
def recv_anysource(g, r, w):
    if r == 0:
        got = []
        for _ in range(w - 1):
            t = torch.empty(2)
            src = dist.recv(t, group=g)
            got.append((src, L(t)))
        return sorted(got)
    dist.send(torch.full((2,), float(r * r)), 0, group=g)


@case
def tags_out_of_order(g, r, w):
    if r == 0:
        a = dist.isend(torch.full((2,), 1.0), 1, group=g, tag=11)
        b = dist.isend(torch.full((2,), 2.0), 1, group=g, tag=22)
        a.wait()
        b.wait()
    elif r == 1:
        second, first = torch.empty(2), torch.empty(2)
        q2 = dist.irecv(second, 0, group=g, tag=22)
        q1 = dist.irecv(first, 0, group=g, tag=11)
        q2.wait()
        q1.wait()
        return [L(first), L(second)]


@case
def same_tag_keeps_order(g, r, w):
    if r == 2:
        for i in range(5):
            dist.send(torch.full((1,), float(i)), 3, group=g)
    elif r == 3:
        out = []
        for _ in range(5):
            t = torch.empty(1)
            dist.recv(t, 2, group=g)
            out.append(t.item())
        return out


@case
def send_recv_non_contiguous(g, r, w):
    # Gloo refuses non-contiguous tensors; ringtail stages them
    if r == 0:
        dist.send(torch.arange(12.0).reshape(3, 4).t(), 1, group=g)
    elif r == 1:
        t = torch.zeros(3, 4).t()
        dist.recv(t, 0, group=g)
        return L(t)


def expect_send_recv_non_contiguous(r, w):
    return L(torch.arange(12.0).reshape(3, 4).t()) if r == 1 else None


@case
def all_to_all_single_large(g, r, w):
    n = 1 << 18  # 1 MiB per rank pair: many frames, both channels
    inp = torch.arange(w * n, dtype=torch.float32) + 1e7 * r
    out = torch.empty(w * n)
    dist.all_to_all_single(out, inp, group=g)
    return [float(out.sum()), L(out[::n + 1])]


# -- subgroups ------------------------------------------------------------------


def subgroup_case(g, r, w, sub):
    if r not in (1, 3):
        return None
    t = torch.full((2,), float(r))
    dist.all_reduce(t, group=sub)
    out = torch.empty(2)
    dist.all_to_all_single(out, torch.tensor([float(r), float(-r)]), group=sub)
    x = torch.empty(1)
    if r == 1:
        dist.send(torch.tensor([5.0]), 3, group=sub)
        dist.recv(x, 3, group=sub)
    else:
        dist.recv(x, 1, group=sub)
        dist.send(torch.tensor([7.0]), 1, group=sub)
    return [L(t), L(out), L(x), dist.get_rank(sub), dist.get_world_size(sub)]


# -- timeouts and failures (one group each: the call breaks it) ------------------


def timeout_collective(g, r, w, short):
    if r == 0:
        dist.all_reduce(torch.ones(1), group=short)  # nobody else comes


def timeout_recv(g, r, w, short):
    if r == 1:
        dist.recv(torch.empty(1), 0, group=short)  # nobody sends


def monitored_barrier_missing(g, r, w, mb):
    if r == w - 1:
        return None  # never arrives
    if dist.get_backend(mb) == "gloo":
        dist.monitored_barrier(group=mb, timeout=SHORT, wait_all_ranks=True)
    else:
        rt.monitored_barrier(group=mb, timeout=SHORT, wait_all_ranks=True)


# -- driver ---------------------------------------------------------------------


def run(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared across backends
        return ("error", isinstance(e, RuntimeError), "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200]))


UNSUPPORTED = ("does not support", "not supported", "Cannot use ReduceOp.AVG", "no support", "not implemented",
               "has to be contiguous")


def verdict(name, r, w, gloo, ring):
    if gloo[0] == "ok" and ring[0] == "ok":
        return ("same", "") if gloo[1] == ring[1] else ("MISMATCH", "gloo %r, ringtail %r" % (gloo[1], ring[1]))
    if gloo[0] == "error" and ring[0] == "error":
        if gloo[1] and ring[1]:
            return ("same-error", "gloo: %s | ringtail: %s" % (gloo[2], ring[2]))
        return ("MISMATCH", "error types differ: gloo %s, ringtail %s" % (gloo[2], ring[2]))
    if gloo[0] == "error" and any(u in gloo[2] for u in UNSUPPORTED):
        expect = globals().get("expect_" + name)
        if ring[0] == "ok" and expect is not None and expect(r, w) == ring[1]:
            return ("ringtail-only", "gloo: %s" % gloo[2])
        return ("MISMATCH", "gloo unsupported (%s), ringtail %r, expected %r" % (gloo[2], ring, expect and expect(r, w)))
    return ("MISMATCH", "gloo %r, ringtail %r" % (gloo, ring))


def main():
    dist.init_process_group("ringtail", timeout=datetime.timedelta(seconds=60))
    r, w = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.new_group(backend="gloo"), "ringtail": dist.GroupMember.WORLD}
    subs = {b: dist.new_group(ranks=[1, 3], backend=b) for b in groups}
    shorts = {b: dist.new_group(backend=b, timeout=SHORT) for b in groups}
    shorts2 = {b: dist.new_group(backend=b, timeout=SHORT) for b in groups}
    mbs = {b: dist.new_group(backend=b, timeout=SHORT) for b in groups}
    table = []
    plan = [(fn.__name__, fn, ()) for fn in CASES]
    plan.append(("subgroup_ranks_1_3", subgroup_case, "subs"))
    plan.append(("timeout_collective", timeout_collective, "shorts"))
    plan.append(("timeout_recv", timeout_recv, "shorts2"))
    plan.append(("monitored_barrier_missing", monitored_barrier_missing, "mbs"))
    extra = {"subs": subs, "shorts": shorts, "shorts2": shorts2, "mbs": mbs}
    for name, fn, more in plan:
        res = {}
        for b, g in groups.items():
            args = (g, r, w) + ((extra[more][b],) if more else ())
            res[b] = run(fn, *args)
            dist.barrier(group=groups["ringtail"])  # keep the ranks in step between cases
        v, detail = verdict(name, r, w, res["gloo"], res["ringtail"])
        table.append([name, v, detail])
    print("CONF " + json.dumps(table), flush=True)
    dist.barrier()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(1)
