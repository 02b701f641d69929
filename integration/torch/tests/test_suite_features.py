"""The torch.distributed features around the collectives that torch's own
distributed suite checks of Gloo (issue 39), on the ringtail backend:
profiler events, sparse all_reduce, timeouts in torch's words and
monitored_barrier. Each test starts its ranks as separate processes
(launch.py) running suite_features_worker.py."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import launch  # noqa: E402

WORKER = os.path.join(HERE, "suite_features_worker.py")


def run(test, part, world=3, timeout=180):
    outs = launch.run_world(world, [WORKER, part], timeout=timeout)
    for r, out in enumerate(outs):
        test.assertIn("PASS rank %d" % r, out)
    return outs


class TestProfiler(unittest.TestCase):
    """Every collective and point-to-point call records one async event
    ringtail:<op> with its input shapes, under torch.autograd.profiler and
    torch.profiler, as torch's suite checks of Gloo's gloo:<op>; one DDP
    step's gradient allreduce shows in a torch.profiler trace."""

    def test_events(self):
        run(self, "profiler")


class TestSparse(unittest.TestCase):
    """all_reduce(SUM) of sparse COO tensors, torch's
    simple_sparse_reduce_tests cases and uneven non-zeros."""

    def test_sparse_all_reduce_sum(self):
        run(self, "sparse")


class TestTimeouts(unittest.TestCase):
    """torch's test_barrier_timeout_group: a barrier only rank 0 enters
    fails in torch's words (" Timed out "), naming the op and who waited
    on whom once, with no repeated prefix."""

    def test_barrier_timeout_message(self):
        outs = run(self, "timeout")
        self.assertIn("barrier timeout message: ringtail rank 0: Timed out in Barrier waiting on rank", outs[0])


class TestMonitoredBarrier(unittest.TestCase):
    """monitored_barrier as ProcessGroupGloo: rank 0 names the first rank
    missing (every one with wait_all_ranks), the ranks that arrived say so
    in Gloo's words with rank 0's verdict, and a zero timeout makes rank 0
    report its own timeout (torch's test_monitored_barrier_* cases)."""

    def test_gloo_semantics(self):
        run(self, "monitored")


if __name__ == "__main__":
    unittest.main()
