"""The torch.distributed features around the collectives that torch's own
distributed suite checks of Gloo (issue 39), on the ringtail backend:
profiler events, sparse all_reduce, timeouts in torch's words,
monitored_barrier and torch's TORCH_DISTRIBUTED_DEBUG switch. Each test
starts its ranks as separate processes (launch.py) running
suite_features_worker.py."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import launch  # noqa: E402

WORKER = os.path.join(HERE, "suite_features_worker.py")


def run(test, part, world=3, timeout=180, env=None):
    outs = launch.run_world(world, [WORKER, part], timeout=timeout, extra_env=env)
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


# The variables the debug tests set, each explicitly (the test's own
# environment may carry any of them).
QUIET = {"TORCH_DISTRIBUTED_DEBUG": "OFF", "RINGTAIL_DEBUG": "", "RINGTAIL_LOG_LEVEL": ""}
INFO_LINE = '"level":"info"'


class TestTorchDebug(unittest.TestCase):
    """torch's TORCH_DISTRIBUTED_DEBUG honoured: DETAIL turns on ringtail's
    call-site check, carrying torch's collective fingerprint, so a
    mismatched all_reduce fails every rank in ProcessGroupWrapper's words
    (unless RINGTAIL_DEBUG is set, which wins); INFO and DETAIL turn on
    ringtail's info-level log (unless RINGTAIL_LOG_LEVEL is set)."""

    def test_detail_mismatch_in_torch_words(self):
        outs = run(self, "debug_detail", env=dict(QUIET, TORCH_DISTRIBUTED_DEBUG="DETAIL"))
        for out in outs:
            self.assertIn("Detected mismatch between collectives on ranks", out)

    def test_off_mismatch_is_ringtails(self):
        outs = run(self, "debug_own", env=QUIET)
        for out in outs:
            self.assertNotIn(INFO_LINE, out)

    def test_explicit_ringtail_debug_wins(self):
        run(self, "debug_own", env=dict(QUIET, TORCH_DISTRIBUTED_DEBUG="DETAIL", RINGTAIL_DEBUG="off"))

    def test_info_logs(self):
        outs = run(self, "debug_info", env=dict(QUIET, TORCH_DISTRIBUTED_DEBUG="INFO"))
        for out in outs:
            self.assertIn(INFO_LINE, out)
            self.assertIn('"message":"program chosen"', out)
        outs = run(self, "debug_info", env=dict(QUIET, TORCH_DISTRIBUTED_DEBUG="INFO", RINGTAIL_LOG_LEVEL="warn"))
        for out in outs:
            self.assertNotIn(INFO_LINE, out)


if __name__ == "__main__":
    unittest.main()
