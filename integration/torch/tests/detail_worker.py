"""TORCH_DISTRIBUTED_DEBUG=DETAIL on the ringtail backend: two all_reduce
calls of the same shape, and rank 1 skips the first one in the second
step. Without the call-site check every rank would get a wrong sum and no
error; with it, every rank raises naming both call sites. Prints
"PASS rank R" when its rank saw that error (test_torch.TestDetail)."""

import inspect
import os
import sys

import torch
import torch.distributed as dist

import ringtail_torch  # noqa: F401 - registers the backend


def line_below():
    return inspect.currentframe().f_back.f_lineno + 1


def main():
    assert os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL"
    dist.init_process_group("ringtail")
    rank = dist.get_rank()
    t = torch.ones(16)
    site_a = site_b = 0
    try:
        for step in range(3):
            if not (rank == 1 and step == 1):
                site_a = line_below()
                dist.all_reduce(t)
            site_b = line_below()
            dist.all_reduce(t)
    except RuntimeError as e:
        msg = str(e)
        want = ["detail_worker.py:%d" % site_a, "detail_worker.py:%d" % site_b]
        if all(w in msg for w in want) and "call sites differ" in msg:
            print("PASS rank %d: %s" % (rank, msg), flush=True)
            os._exit(0)  # the communicator has failed: no orderly shutdown
        print("FAIL rank %d: the error does not name %s: %s" % (rank, want, msg), flush=True)
        os._exit(1)
    print("FAIL rank %d: no error although rank 1 skipped a call" % rank, flush=True)
    os._exit(1)


if __name__ == "__main__":
    main()
    sys.exit(0)
