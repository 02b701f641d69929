"""Runs torch's own distributed suite (driver.py) in one mode at one world
size and writes each test's result to a JSON file, after every test (a run
cut short by a timeout leaves the results it has).

  run.py --mode standin --world 3 --out results.json [-k PATTERN ...]
  run.py --mode gloo --world 4 --refresh-baseline   (rewrites baseline/gloo-w4.txt)
  run.py --name-checks                               (the tests that skip as a plugin by name)

Uses the Python it runs under, which must have torch 1.13 (Debian's
/usr/bin/python3 with python3-torch); compare.py reads the JSON."""

import argparse
import fnmatch
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_DIR = os.path.dirname(HERE)  # integration/torch: ringtail_torch
MODES = ("gloo", "standin", "plugin")


def baseline_path(world):
    """The committed list of the tests Gloo passes at this world size."""
    return os.path.join(HERE, "baseline", "gloo-w%d.txt" % world)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def suite_env(mode, world, temp_dir):
    """The environment the suite and its rank processes read."""
    return {
        "TORCH_SUITE_MODE": mode,
        "BACKEND": "ringtail" if mode == "plugin" else "gloo",
        "WORLD_SIZE": str(world),
        "TEMP_DIR": temp_dir,
        "INIT_METHOD": "env://",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(p for p in [HERE, TORCH_DIR, os.environ.get("PYTHONPATH", "")] if p),
    }


def import_time_skips(mode):
    """{test: reason} of the tests the suite skips when imported in this
    mode, from a fresh interpreter (the suite reads BACKEND on import)."""
    tmp = tempfile.mkdtemp(prefix="ringtail-suite-")
    try:
        env = dict(os.environ)
        env.update(suite_env(mode, 3, tmp))
        code = "import json, driver; print(json.dumps(driver.import_time_skips()))"
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE, check=True, stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def name_check_skips():
    """{test: reason} of the tests that skip as a plugin but not as Gloo
    when the suite is imported: its decorators gate them on the backend's
    name (BACKEND != "gloo", require_backend({"gloo", "nccl"}), ...)."""
    gloo = import_time_skips("gloo")
    plugin = import_time_skips("plugin")
    return {t: why for t, why in sorted(plugin.items()) if t not in gloo}


def claimed(name_skips):
    """The tests among name_skips whose gate is one ringtail claims
    (driver.CLAIMS): run.py lifts their skip as a plugin."""
    claims = {normal_reason(c) for c in _read_claims(os.path.join(HERE, "driver.py"))}
    return sorted(t for t, why in name_skips.items() if normal_reason(why) in claims)


def normal_reason(reason):
    """A skip message with the sets in it sorted: the suite prints Python
    sets of backend names, whose order differs between interpreters."""
    return re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(x.strip() for x in m.group(1).split(","))) + "}", reason)


def _read_claims(path):
    """driver.CLAIMS's keys, read without importing driver (which imports
    the suite for the BACKEND in the environment)."""
    import ast

    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CLAIMS" for t in node.targets):
            return set(ast.literal_eval(node.value).keys())
    raise RuntimeError("no CLAIMS in %s" % path)


class _Recorder(unittest.TextTestResult):
    """A TextTestResult that also keeps every test's status, reason and
    duration, and writes them all to a JSON file after each test."""

    def __init__(self, report, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.report = report
        self._started = {}

    def startTest(self, test):
        self._started[test._testMethodName] = time.monotonic()
        super().startTest(test)

    def _record(self, test, status, reason=""):
        name = test._testMethodName
        secs = time.monotonic() - self._started.get(name, time.monotonic())
        self.report.results[name] = {"status": status, "reason": reason[-3000:], "secs": round(secs, 1)}
        self.report.write()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", "".join(traceback.format_exception(*err)))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", "".join(traceback.format_exception(*err)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")


class Report:
    """One run's results, as compare.py reads them."""

    def __init__(self, path, mode, world):
        self.path = path
        self.head = {"mode": mode, "world": world, "python": platform.python_version()}
        self.selected = []
        self.results = {}
        self.name_check_skips = {}
        self.claimed = []
        self.started = time.monotonic()
        self.finished = False

    def write(self):
        doc = dict(self.head)
        doc.update(
            selected=self.selected,
            finished=self.finished,
            secs=round(time.monotonic() - self.started, 1),
            name_check_skips=self.name_check_skips,
            claimed=self.claimed,
            results=self.results,
        )
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def select(names, patterns):
    """The tests whose name matches one of the patterns (unittest -k
    style: a substring, or a glob when it has * or ?); all without any."""
    if not patterns:
        return list(names)

    def match(name, pat):
        return fnmatch.fnmatchcase(name, pat) if any(c in pat for c in "*?[") else pat in name

    return [n for n in names if any(match(n, p) for p in patterns)]


def read_names(path):
    """The test names in a file, one a line; # starts a comment."""
    with open(path) as f:
        return {line.split("#")[0].strip() for line in f} - {""}


def write_baseline(report, world):
    """Rewrites baseline/gloo-w<world>.txt from a full Gloo run."""
    passed = sorted(t for t, r in report.results.items() if r["status"] == "pass")
    import torch

    with open(baseline_path(world), "w") as f:
        f.write("# The tests of torch's distributed suite that Gloo passes at world size %d\n" % world)
        f.write("# (torch %s, Python %s). Regenerate with\n" % (torch.__version__, platform.python_version()))
        f.write("#   integration/torch/suite/run.py --mode gloo --world %d --refresh-baseline\n" % world)
        for t in passed:
            f.write(t + "\n")
    print("wrote %s: %d tests Gloo passes" % (baseline_path(world), len(passed)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=MODES, default="standin")
    ap.add_argument("--world", type=int, default=3)
    ap.add_argument("--out", help="results JSON (default: a temporary file, printed)")
    ap.add_argument("-k", dest="patterns", action="append", default=[], help="run only tests matching (repeatable)")
    ap.add_argument("--names-file", help="run only the tests named in this file, one a line")
    ap.add_argument("--only-baseline", action="store_true", help="run only the tests in Gloo's baseline at this world size (what compare.py checks)")
    ap.add_argument("--refresh-baseline", action="store_true", help="with --mode gloo and no -k: rewrite baseline/gloo-w<world>.txt")
    ap.add_argument("--name-checks", action="store_true", help="print the tests that skip as a plugin by name, and exit")
    args = ap.parse_args(argv)

    if args.name_checks:
        skips = name_check_skips()
        lifted = set(claimed(skips))
        for t, why in skips.items():
            print("%s\t%s\t%s" % (t, "claimed" if t in lifted else "skips", why))
        return 0
    if args.refresh_baseline and (args.mode != "gloo" or args.patterns or args.names_file or args.only_baseline):
        ap.error("--refresh-baseline needs --mode gloo and the whole suite (no -k)")

    temp_dir = tempfile.mkdtemp(prefix="ringtail-suite-")
    os.environ.update(suite_env(args.mode, args.world, temp_dir))
    sys.path[:0] = [HERE, TORCH_DIR]
    out = args.out or os.path.join(temp_dir, "results.json")
    if args.out is None:
        out = tempfile.mktemp(prefix="ringtail-suite-", suffix=".json")
    report = Report(out, args.mode, args.world)
    try:
        if args.mode == "plugin":
            report.name_check_skips = name_check_skips()
            report.claimed = claimed(report.name_check_skips)
            os.environ["TORCH_SUITE_UNSKIP"] = ",".join(report.claimed)
        import driver
        import torch

        report.head["torch"] = torch.__version__
        report.selected = select(driver.test_names(), args.patterns)
        for path in [args.names_file] if args.names_file else []:
            report.selected = [n for n in report.selected if n in read_names(path)]
        if args.only_baseline:
            report.selected = [n for n in report.selected if n in read_names(baseline_path(args.world))]
        report.write()
        suite = unittest.TestSuite(driver.TestDistBackendWithSpawn(n) for n in report.selected)
        runner = unittest.TextTestRunner(verbosity=2, resultclass=lambda *a, **kw: _Recorder(report, *a, **kw))
        runner.run(suite)
        report.finished = True
        report.write()
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    print("results: %s" % out)
    if args.refresh_baseline:
        write_baseline(report, args.world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
