"""The first hour of a new user (issue 31): the "Install and run" commands
of docs/pytorch.md run as written; progress reaching the dashboard's
metrics from PyTorch; ringtail run's one-line hints. Run by
../run_tests.sh."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import citest
import launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
DOC = os.path.join(ROOT, "docs", "pytorch.md")


def install_and_run_block():
    """The first sh block under the doc's "## Install and run" heading."""
    with open(DOC) as f:
        text = f.read()
    section = text.split("\n## Install and run\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```sh\n(.*?)```", section, re.S)
    if m is None:
        raise AssertionError("docs/pytorch.md: no sh block under 'Install and run'")
    return m.group(1)


def clean_env(**extra):
    """The environment of a new shell: none of the tests' or a job's
    variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "RINGTAIL_LIB", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                        "MASTER_ADDR", "MASTER_PORT", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")
           and not k.startswith("RINGTAIL_")}
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


class TestInstallAndRun(unittest.TestCase):
    @citest.needs(shutil.which("go") and shutil.which("make"), "needs go and make to build the wheel")
    def test_the_docs_commands_as_written(self):
        block = install_and_run_block()
        example = os.path.join(ROOT, "integration", "torch", "examples", "train_ddp.py")
        with open(example) as f:
            src = f.read()
        # The script needs no import for the backend: init_process_group
        # comes before any mention of ringtail_torch.
        self.assertIn('dist.init_process_group("ringtail")', src)
        self.assertLess(src.index('dist.init_process_group("ringtail")'), src.index("ringtail_torch"))
        home = tempfile.mkdtemp(prefix="ringtail-home-")
        self.addCleanup(shutil.rmtree, home, True)
        script = os.path.join(home, "install-and-run.sh")
        with open(script, "w") as f:
            f.write(block)
        # A fresh home, but Go's caches where they are: a cold build cache
        # and module download would take ten minutes and more.
        go = {k: subprocess.run(["go", "env", k], capture_output=True, text=True, check=True).stdout.strip()
              for k in ("GOCACHE", "GOMODCACHE", "GOPATH")}
        p = subprocess.run(["sh", "-e", script], cwd=ROOT, env=clean_env(HOME=home, **go), capture_output=True, text=True,
                           timeout=900)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, "the doc's commands failed:\n%s\n%s" % (block, out))
        self.assertTrue(os.path.isdir(os.path.join(home, ".venvs", "ringtail")), out)
        # Two launchers, each: rank 0's five epochs, both ranks identical.
        self.assertEqual(len(re.findall(r"epoch 5  loss \S+  test-acc \S+%", out)), 2, out)
        for r in (0, 1):
            self.assertEqual(len(re.findall(r"rank %d of 2: done, parameters identical on every rank" % r, out)), 2, out)


class TestProgress(unittest.TestCase):
    @citest.needs(os.environ.get("RINGTAIL_BIN"), "RINGTAIL_BIN (the ringtail launcher binary) not set")
    def test_report_progress_and_the_hook_reach_the_metrics(self):
        base = launch.free_port()
        p = subprocess.run([os.environ["RINGTAIL_BIN"], "run", "-np", "2", "--metrics-port", str(base), "--",
                            launch.PYTHON, os.path.join(HERE, "progress_worker.py")],
                           env=launch.child_env(), capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        metrics = dict(m.split()[:2] for m in re.findall(r"METRIC (ringtail_train_\S+ \S+)", out))
        self.assertEqual(metrics.get("ringtail_train_accuracy_ratio"), "0.75", out)
        self.assertEqual(metrics.get("ringtail_train_loss"), "0.5", out)
        self.assertEqual(metrics.get("ringtail_train_step"), "80", out)
        # The hook's clock: the loader's 8 samples × 2 ranks a step.
        self.assertGreater(float(metrics.get("ringtail_train_samples_per_second", "0")), 0, out)
        self.assertEqual(len(re.findall(r"PROGRESS rank \d reported True", out)), 2, out)


class TestHints(unittest.TestCase):
    @citest.needs(os.environ.get("RINGTAIL_BIN"), "RINGTAIL_BIN (the ringtail launcher binary) not set")
    def test_ringtail_run_says_what_to_do(self):
        for raised, hint in (
            ("ModuleNotFoundError(\"No module named 'ringtail_torch'\")", "has no ringtail_torch: install the ringtail-torch wheel into it"),
            ("ValueError(\"Invalid backend: 'ringtail'\")", "does not know the \"ringtail\" backend"),
        ):
            p = subprocess.run([os.environ["RINGTAIL_BIN"], "run", "-np", "2", "--", launch.PYTHON, "-c", "raise " + raised],
                               env=clean_env(), capture_output=True, text=True, timeout=120)
            lines = [l for l in p.stderr.splitlines() if l.startswith("ringtail run: rank")]
            self.assertNotEqual(p.returncode, 0)
            hints = [l for l in lines if hint in l]
            self.assertEqual(len(hints), 1, p.stderr)  # once, though both ranks failed so
            self.assertIn(launch.PYTHON, hints[0])


if __name__ == "__main__":
    unittest.main()
