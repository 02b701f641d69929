"""The torch.distributed features around the collectives that torch's own
distributed suite checks of Gloo (issue 39), on the ringtail backend:
profiler events, sparse all_reduce, timeouts in torch's words,
monitored_barrier and torch's TORCH_DISTRIBUTED_DEBUG switch. Each test
starts its ranks as separate processes (launch.py) running
suite_features_worker.py."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import citest  # noqa: E402
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


class TestTimelineAlignment(unittest.TestCase):
    """ringtail's own timeline (RINGTAIL_TIMELINE) lines up with torch's
    trace: `ringtail timeline merge --torch RANK=TRACE` lays each rank's
    torch.profiler trace on its timeline by the backend's clock event, and
    every ringtail:all_reduce of the trace then spans a call AllReduce of
    the timeline (the event opens when the call is issued and ends when its
    work completes, so the call lies inside it: an order, not a duration)."""

    @citest.needs(os.environ.get("RINGTAIL_BIN"), "RINGTAIL_BIN (the ringtail launcher binary) not set")
    def test_merge_lays_torch_traces_on_the_timeline(self):
        world = 2
        with tempfile.TemporaryDirectory() as tmp:
            timeline = os.path.join(tmp, "tl.json")
            run(self, "timeline", world=world, env={"RINGTAIL_TIMELINE": timeline, "TRACE_DIR": tmp})
            merged = os.path.join(tmp, "merged.json")
            args = [os.environ["RINGTAIL_BIN"], "timeline", "merge", "-o", merged]
            for r in range(world):
                args += ["--torch", "%d=%s" % (r, os.path.join(tmp, "torch.rank%d.json" % r))]
            args += [os.path.join(tmp, "tl.rank%d.json" % r) for r in range(world)]
            out = subprocess.run(args, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(merged) as f:
                trace = json.load(f)
        report = trace["otherData"]["torch"]
        for r in range(world):
            al = report[str(r)]
            self.assertEqual(al["method"], "clock", al)
            self.assertGreaterEqual(al["anchors"], 4, al)  # three steps' all_reduce and a broadcast
        slack = 1000.0  # µs: the clock event's reading against its own timestamp
        for r in range(world):
            evs = [e for e in trace["traceEvents"] if e.get("pid") == r and e.get("ph") == "X"]
            torch_ars = [e for e in evs if e["name"] == "ringtail:all_reduce" and e["tid"] >= 1000]
            calls = [e for e in evs if e["name"] == "AllReduce" and e.get("cat") == "collective"]
            self.assertEqual(len(torch_ars), 3, "rank %d: %d torch all_reduce events" % (r, len(torch_ars)))
            for ev in torch_ars:
                lo, hi = ev["ts"] - slack, ev["ts"] + ev["dur"] + slack
                inside = [c for c in calls if lo <= c["ts"] and c["ts"] + c["dur"] <= hi]
                self.assertTrue(inside, "rank %d: the torch all_reduce at %.1f µs (%.1f µs long) spans no AllReduce "
                                "call of the timeline: nearest starts %s" % (r, ev["ts"], ev["dur"],
                                                                            sorted(calls, key=lambda c: abs(c["ts"] - ev["ts"]))[:2]))


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
