"""compare.py's verdicts on made-up runs: which outcomes fail a run of
torch's suite and which it lets pass (artefacts, skips by name)."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402
import run  # noqa: E402

BASELINE = {"test_a", "test_b", "test_art", "test_named"}
ARTEFACTS = {("test_art", "standin"): "checks the backend's name"}


def a_run(mode, statuses, name_skips=None, finished=True):
    return {
        "mode": mode,
        "world": 3,
        "selected": sorted(statuses),
        "finished": finished,
        "secs": 1.0,
        "name_check_skips": name_skips or {},
        "results": {t: {"status": s, "reason": "why " + t, "secs": 1.0} for t, s in statuses.items() if s != "missing"},
    }


class TestCompare(unittest.TestCase):
    def test_all_pass(self):
        v = compare.compare(a_run("standin", dict.fromkeys(BASELINE, "pass")), BASELINE, ARTEFACTS)
        self.assertEqual(v["problems"], [])
        self.assertEqual(len(v["passed"]), 4)
        self.assertEqual(v["stale_artefacts"], ["test_art"])

    def test_failure_of_a_baseline_test_fails(self):
        for status in ("fail", "error", "skip", "missing"):
            statuses = dict.fromkeys(BASELINE, "pass")
            statuses["test_b"] = status
            v = compare.compare(a_run("standin", statuses), BASELINE, ARTEFACTS)
            self.assertEqual(len(v["problems"]), 1, status)
            self.assertIn("test_b: %s" % status, v["problems"][0])

    def test_failure_outside_the_baseline_does_not_fail(self):
        statuses = dict.fromkeys(BASELINE, "pass")
        statuses["test_gloo_fails_too"] = "error"
        v = compare.compare(a_run("standin", statuses), BASELINE, ARTEFACTS)
        self.assertEqual(v["problems"], [])
        self.assertEqual(v["failed"], ["test_gloo_fails_too"])

    def test_artefact_counts_only_in_its_mode(self):
        statuses = dict.fromkeys(BASELINE, "pass")
        statuses["test_art"] = "error"
        v = compare.compare(a_run("standin", statuses), BASELINE, ARTEFACTS)
        self.assertEqual(v["problems"], [])
        self.assertEqual(len(v["artefacts"]), 1)
        v = compare.compare(a_run("plugin", statuses), BASELINE, ARTEFACTS)
        self.assertEqual(len(v["problems"]), 1)

    def test_skip_by_name_counts_only_as_plugin(self):
        statuses = dict.fromkeys(BASELINE, "pass")
        statuses["test_named"] = "skip"
        names = {"test_named": "Test requires backend to be one of {'gloo'}"}
        v = compare.compare(a_run("plugin", statuses, names), BASELINE, ARTEFACTS)
        self.assertEqual(v["problems"], [])
        self.assertEqual(len(v["by_name"]), 1)
        v = compare.compare(a_run("standin", statuses, names), BASELINE, ARTEFACTS)
        self.assertEqual(len(v["problems"]), 1)

    def test_main_exit_status(self):
        with tempfile.TemporaryDirectory() as d:
            base = os.path.join(d, "base.txt")
            with open(base, "w") as f:
                f.write("# comment\n" + "\n".join(sorted(BASELINE)) + "\n")
            ok = os.path.join(d, "ok.json")
            with open(ok, "w") as f:
                json.dump(a_run("standin", dict.fromkeys(BASELINE, "pass")), f)
            cut = os.path.join(d, "cut.json")
            with open(cut, "w") as f:
                json.dump(a_run("standin", dict.fromkeys(BASELINE, "pass"), finished=False), f)
            self.assertEqual(compare.main([ok, "--baseline", base]), 0)
            self.assertEqual(compare.main([cut, "--baseline", base]), 1)
            self.assertEqual(compare.main([ok, cut, "--baseline", base]), 1)


class TestSelect(unittest.TestCase):
    def test_patterns(self):
        names = ["test_all_reduce_sum", "test_all_reduce_max", "test_barrier"]
        self.assertEqual(run.select(names, []), names)
        self.assertEqual(run.select(names, ["reduce"]), names[:2])
        self.assertEqual(run.select(names, ["test_all_*_max", "barrier"]), names[1:])


class TestBaselines(unittest.TestCase):
    """The committed baselines and artefact list are well formed: every
    artefact is a test in a baseline (else it excuses nothing)."""

    def test_artefacts_in_baselines(self):
        arts = compare.read_artefacts(os.path.join(run.HERE, "artefacts.txt"))
        self.assertTrue(arts)
        for world in (3, 4):
            base = compare.read_names(run.baseline_path(world))
            self.assertGreater(len(base), 50)
            for test, _ in arts:
                self.assertIn(test, base)
        with open(os.path.join(run.HERE, "driver.py")) as f:
            self.assertIn("CLAIMS", f.read())
        self.assertTrue(run._read_claims(os.path.join(run.HERE, "driver.py")))

    def test_normal_reason(self):
        a = run.normal_reason("Test requires backend to be one of {'nccl', 'gloo'}")
        b = run.normal_reason("Test requires backend to be one of {'gloo', 'nccl'}")
        self.assertEqual(a, b)


if __name__ == "__main__":
    unittest.main()
