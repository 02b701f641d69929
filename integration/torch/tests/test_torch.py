"""Tests of ringtail_torch, run by ../run_tests.sh (unittest, no pytest).

Multi-process tests start their ranks as separate processes (launch.py,
ringtail-torchrun, ringtail run) and parse the "RESULT {json}" line rank 0
prints. Every child has a timeout; nothing can hang the suite."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import citest  # noqa: E402
import launch  # noqa: E402
from ringtail_torch import sampler  # noqa: E402

WORKER = os.path.join(HERE, "ddp_worker.py")


def result(outs):
    for out in outs:
        for line in out.splitlines():
            if "RESULT " in line:
                return json.loads(line.split("RESULT ", 1)[1])
    raise AssertionError("no RESULT line in\n" + "\n".join(outs))


def hook_stats(outs):
    """The straggler hook's statistics each rank printed (STATS rank=R {...}), by rank."""
    stats = {}
    for out in outs:
        for line in out.splitlines():
            if line.startswith("STATS rank="):
                head, body = line[len("STATS rank="):].split(" ", 1)
                stats[int(head)] = json.loads(body)
    return stats


class TestWorker(unittest.TestCase):
    def test_a_callback_may_issue_a_job_and_wait_for_it(self):
        # torch runs a future's callbacks on the thread that completes it;
        # a callback that submits a job and waits (torch's PowerSGD hook)
        # must not wait behind itself.
        from ringtail_torch.backend import _Worker
        w = _Worker("test-worker")
        order = []
        gate = threading.Event()

        def first():
            gate.wait(10)  # the callback is chained before the job completes
            order.append("first")
            return 1

        def then(fut):
            inner, _ = w.submit(lambda: order.append("nested") or fut.value() + 1)
            return inner.wait()

        inner, _ = w.submit(first)
        chained = inner.then(then)
        later, _ = w.submit(lambda: order.append("later") or 3)
        gate.set()
        done = threading.Event()
        chained.add_done_callback(lambda _: done.set())
        self.assertTrue(done.wait(10), "the callback's job never ran: the worker waits for itself")
        self.assertEqual(chained.value(), 2)
        self.assertEqual(later.wait(), 3)
        self.assertEqual(order, ["first", "nested", "later"])
        self.assertTrue(w.stop(5))


class TestSampler(unittest.TestCase):
    def test_split_counts(self):
        self.assertEqual(sampler.split_counts(10, [1, 1, 1]), [4, 3, 3])
        self.assertEqual(sampler.split_counts(64, [1, 1, 1, 1 / 3]), [19, 19, 19, 7])
        self.assertEqual(sum(sampler.split_counts(1437, [0.2, 1, 0.7])), 1437)
        self.assertEqual(sampler.split_counts(4, [1, 0.001, 0.001, 0.001], min_one=True), [1, 1, 1, 1])
        with self.assertRaises(ValueError):
            sampler.split_counts(2, [1, 1, 1], min_one=True)
        with self.assertRaises(ValueError):
            sampler.split_counts(5, [0, 0])

    def test_hetero_sampler_disjoint_proportional_deterministic(self):
        weights = [1, 1, 1 / 3]
        ds = range(1000)
        parts = [list(sampler.HeteroSampler(ds, r, 3, weights, seed=7)) for r in range(3)]
        self.assertEqual(sorted(sum(parts, [])), list(ds))
        self.assertEqual([len(p) for p in parts], sampler.split_counts(1000, weights))
        self.assertAlmostEqual(len(parts[2]) / len(parts[0]), 1 / 3, delta=0.01)
        again = list(sampler.HeteroSampler(ds, 0, 3, weights, seed=7))
        self.assertEqual(parts[0], again)
        s = sampler.HeteroSampler(ds, 0, 3, weights, seed=7)
        s.set_epoch(1)
        self.assertNotEqual(list(s), parts[0])

    def test_hetero_batch_sampler(self):
        ds = range(203)
        weights = [1, 1, 1, 1 / 3]
        per_rank = [list(sampler.HeteroBatchSampler(ds, r, 4, weights, global_batch=64, seed=3)) for r in range(4)]
        even = [list(sampler.HeteroBatchSampler(ds, r, 4, None, global_batch=64, seed=3)) for r in range(4)]
        self.assertEqual(len({len(b) for b in per_rank}), 1, "ranks must take the same number of steps")
        for step in range(len(per_rank[0])):
            hetero_global = sorted(sum((b[step] for b in per_rank), []))
            even_global = sorted(sum((b[step] for b in even), []))
            self.assertEqual(hetero_global, even_global, "global batch %d differs from the even split's" % step)
            self.assertTrue(all(len(b[step]) >= 1 for b in per_rank))
        self.assertEqual(per_rank[3][0].__len__(), sampler.split_counts(64, weights, min_one=True)[3])
        self.assertEqual(sampler.HeteroBatchSampler(ds, 3, 4, weights, global_batch=64).local_sizes()[0], 7)

    def test_throughput_weights(self):
        self.assertEqual(sampler.throughput_weights([300, 100, 300]), [1.0, 1 / 3, 1.0])


class TestCollectives(unittest.TestCase):
    def test_every_collective_world3(self):
        outs = launch.run_world(3, [os.path.join(HERE, "collectives_worker.py")], timeout=240)
        for r, out in enumerate(outs):
            self.assertIn("PASS rank %d" % r, out)


class TestDetail(unittest.TestCase):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: a rank that skips one of two calls of
    the same shape fails every rank, naming the Python call sites
    (detail_worker.py)."""

    def test_skipped_call_names_both_call_sites(self):
        outs = launch.run_world(2, [os.path.join(HERE, "detail_worker.py")], timeout=120,
                                extra_env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
        for r, out in enumerate(outs):
            self.assertIn("PASS rank %d" % r, out)


class TestConformance(unittest.TestCase):
    """The same calls over Gloo and ringtail at world 4, every result
    compared (conformance_worker.py)."""

    def test_world4_matches_gloo(self):
        outs = launch.run_world(4, [os.path.join(HERE, "conformance_worker.py")], timeout=300)
        tables = []
        for out in outs:
            lines = [l for l in out.splitlines() if l.startswith("CONF ")]
            self.assertEqual(len(lines), 1, out)
            tables.append(json.loads(lines[0][5:]))
        bad = [(r, row) for r, t in enumerate(tables) for row in t if row[1] == "MISMATCH"]
        self.assertEqual(bad, [])
        verdicts = {}
        for t in tables:
            for name, v, _ in t:
                verdicts.setdefault(name, set()).add(v)
        print("\nconformance (world 4): " + ", ".join("%s=%s" % (n, "/".join(sorted(v))) for n, v in verdicts.items()),
              file=sys.stderr)
        for name in ("all_to_all_single_uneven", "isend_irecv_both_first", "recv_anysource", "tags_out_of_order",
                     "batch_isend_irecv", "subgroup_ranks_1_3", "all_gather_coalesced", "monitored_barrier"):
            self.assertEqual(verdicts.get(name), {"same"}, name)
        for name in ("timeout_collective", "timeout_recv", "monitored_barrier_missing"):
            self.assertIn("same-error", verdicts.get(name, ()), name)


class TestDDPParity(unittest.TestCase):
    """DDP over init_process_group("ringtail") against DDP over gloo, same
    data and initialisation, in the same processes."""

    def check(self, world):
        res = result(launch.run_world(world, [WORKER, "parity", "--epochs", "12"], timeout=300))
        print("\nparity world=%d: %s" % (world, json.dumps(res)), file=sys.stderr)
        self.assertLessEqual(res["diff20"], 1e-5)
        self.assertEqual(res["replica_spread"], 0.0)
        self.assertLessEqual(abs(res["acc_ringtail"] - res["acc_gloo"]), 1.0)
        self.assertGreater(res["acc_ringtail"], 90.0)

    def test_world2(self):
        self.check(2)

    def test_world4(self):
        self.check(4)

    def test_powersgd_hook_compresses_over_ringtail_as_over_gloo(self):
        # torch's own compression with error feedback (a DDP comm hook) runs
        # its allreduces on the ringtail group: replicas stay identical and
        # the model learns as under gloo with the same hook (the low-rank
        # factors' rounding differs with the sum's order, so not bit for bit).
        res = result(launch.run_world(4, [WORKER, "parity", "--epochs", "12", "--hook", "powersgd"], timeout=300))
        print("\nparity world=4 powersgd: %s" % json.dumps(res), file=sys.stderr)
        self.assertEqual(res["replica_spread"], 0.0)
        self.assertGreater(res["acc_ringtail"], 90.0)
        self.assertLessEqual(abs(res["acc_ringtail"] - res["acc_gloo"]), 1.5)


class TestLaunchers(unittest.TestCase):
    def torchrun(self, *args, env=None, timeout=180):
        cmd = [launch.PYTHON, "-m", "ringtail_torch.torchrun"] + list(args)
        return subprocess.Popen(cmd, env=launch.child_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=HERE)

    def smoke_lines(self, outs):
        return sorted(line for out in outs for line in out.splitlines() if line.startswith("SMOKE") or "] SMOKE" in line)

    def test_torchrun_two_nodes(self):
        port = str(launch.free_port())
        env = {"RINGTAIL_SECRET": "two-node-test-secret-0123"}
        common = ["--nnodes", "2", "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", port,
                  WORKER, "smoke"]
        procs = [self.torchrun("--node_rank", str(n), *common, env=env) for n in (1, 0)]
        lines = self.smoke_lines(launch.wait_all(procs, 180))
        self.assertEqual(len(lines), 2, lines)
        for r in range(2):
            self.assertTrue(any("rank=%d world=2" % r in l and "backend=ringtail" in l for l in lines), lines)

    def test_torchrun_static_rendezvous_one_node(self):
        # --rdzv_backend static: torchrun's own rendezvous and agent store
        # (only the Std.from_str fix applies); the backend agrees through it.
        port = str(launch.free_port())
        p = self.torchrun("--rdzv_backend", "static", "--nproc_per_node", "2", "--master_port", port, WORKER, "smoke")
        lines = self.smoke_lines(launch.wait_all([p], 180))
        self.assertEqual(len(lines), 2, lines)

    def test_torchrun_elastic_restarts_after_a_failure(self):
        # --nnodes MIN:MAX: torchelastic's c10d rendezvous on --master_port;
        # rank 1 fails in the first round, --max-restarts 1 runs a second
        # round of both workers on a new ringtail process group.
        port = str(launch.free_port())
        p = self.torchrun("--nnodes", "1:2", "--nproc_per_node", "2", "--master_port", port, "--max_restarts", "1",
                          "--monitor_interval", "1", WORKER, "smoke", "--fail-first-round", "1",
                          env={"RINGTAIL_SECRET": "elastic-test-secret-01234"})
        out = launch.wait_all([p], 180)
        self.assertEqual(p.returncode, 0, out)
        lines = self.smoke_lines(out)
        self.assertEqual(len([l for l in lines if "restart=1" in l]), 2, lines)
        self.assertFalse(any("rank=1 " in l and "restart=0" in l for l in lines), lines)

    def test_torchrun_two_nodes_needs_secret(self):
        env = launch.child_env()
        for k in ("RINGTAIL_SECRET", "RINGTAIL_SECRET_FILE", "RINGTAIL_INSECURE"):
            env.pop(k, None)
        p = subprocess.run([launch.PYTHON, "-m", "ringtail_torch.torchrun", "--nnodes", "2", "--node_rank", "0",
                            "--master_port", str(launch.free_port()), WORKER, "smoke"],
                           env=env, capture_output=True, text=True, timeout=60, cwd=HERE)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("RINGTAIL_SECRET", p.stderr + p.stdout)

    @citest.needs(os.environ.get("RINGTAIL_BIN"), "RINGTAIL_BIN (the ringtail launcher binary) not set")
    def test_ringtail_run(self):
        for backend, init, np in (("ringtail", "env://", 3), ("gloo", "env://", 3), ("gloo", "tcp-master", 2)):
            p = subprocess.Popen([os.environ["RINGTAIL_BIN"], "run", "-np", str(np), "--", launch.PYTHON, WORKER, "smoke",
                                  "--backend", backend, "--init-method", init], env=launch.child_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=HERE)
            lines = self.smoke_lines(launch.wait_all([p], 180))
            self.assertEqual(len(lines), np, lines)
            self.assertTrue(all("backend=" + backend in l for l in lines), lines)


def cuda_skip_reason():
    """Why the CUDA test cannot run here, or None."""
    try:
        import torch
    except ImportError as e:
        return "no torch: %s" % e
    if not torch.backends.cuda.is_built():
        return "this torch (%s) is built without CUDA" % torch.__version__
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False"
    return None


class TestCUDA(unittest.TestCase):
    """CUDA tensors staged through pinned host buffers (cuda_worker.py):
    collectives, point-to-point and DDP on a CUDA model, at world 2 on one
    or more GPUs."""

    @unittest.skipIf(cuda_skip_reason(), cuda_skip_reason())
    def test_cuda_tensors_world2(self):
        outs = launch.run_world(2, [os.path.join(HERE, "cuda_worker.py")], timeout=300)
        for r, out in enumerate(outs):
            self.assertIn("PASS rank %d" % r, out)


class TestWheel(unittest.TestCase):
    """Builds the wheel offline, installs it into a fresh venv (torch from
    the system) and with pip --user, and runs a DDP script that also uses
    all_to_all and send/recv with the installed ringtail-torchrun, away
    from the source tree."""

    def clean_env(self, **extra):
        env = dict(os.environ)
        for k in ("PYTHONPATH", "RINGTAIL_LIB", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                  "MASTER_PORT", "RINGTAIL_COORDINATOR", "RINGTAIL_JOB_ID", "PIP_REQUIRE_VIRTUALENV"):
            env.pop(k, None)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(extra)
        return env

    def run_ok(self, cmd, timeout, **kw):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        self.assertEqual(p.returncode, 0, "%s failed:\n%s\n%s" % (cmd, p.stdout, p.stderr))
        return p.stdout + p.stderr

    @citest.needs(shutil.which("go"), "no Go toolchain here to build the wheel's libringtail.so")
    def test_wheel_in_venv_and_user_site(self):
        tmp = tempfile.mkdtemp(prefix="ringtail-wheel-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.run_ok([os.path.join(launch.PKG, "build_wheel.sh"), os.path.join(tmp, "dist")], 300)
        wheels = glob.glob(os.path.join(tmp, "dist", "ringtail_torch-*.whl"))
        self.assertEqual(len(wheels), 1, wheels)
        whl = wheels[0]
        self.assertRegex(os.path.basename(whl), r"-py3-none-(manylinux_2_\d+|linux)_[a-z0-9_]+\.whl$")
        script = os.path.join(tmp, "train.py")
        shutil.copy(os.path.join(HERE, "train_example.py"), script)

        venv = os.path.join(tmp, "venv")
        self.run_ok([launch.PYTHON, "-m", "venv", "--system-site-packages", venv], 120)
        self.run_ok([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-deps", whl], 120, env=self.clean_env())
        env = self.clean_env(PATH=os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", ""))
        exe = shutil.which("ringtail-torchrun", path=env["PATH"])
        self.assertEqual(exe, os.path.join(venv, "bin", "ringtail-torchrun"))
        out = self.run_ok([exe, "--nproc_per_node", "2", "--master_port", str(launch.free_port()), script], 240,
                          env=env, cwd=tmp)
        # The ranks share one stdout pipe; a line's text and its newline may
        # be two writes, so lines can interleave: find the reports in the
        # whole output, not line by line.
        reports = re.findall(r"TRAIN rank (\d+) world 2 (\S+) loss \S+ lib (\S+?libringtail\.so)", out)
        self.assertEqual(sorted(r[0] for r in reports), ["0", "1"], out)
        for _, status, lib in reports:
            self.assertEqual(status, "ok", out)
            self.assertTrue(lib.startswith(os.path.join(venv, "lib")), "the venv's libringtail.so was not the one loaded: " + lib)

        user = os.path.join(tmp, "user")
        env = self.clean_env(PYTHONUSERBASE=user)
        self.run_ok([launch.PYTHON, "-m", "pip", "install", "--user", "--break-system-packages", "--no-index",
                     "--no-deps", whl], 120, env=env)
        self.assertTrue(os.access(os.path.join(user, "bin", "ringtail-torchrun"), os.X_OK))
        out = self.run_ok([launch.PYTHON, "-c", "import ringtail_torch as r; print(r.library_path())"], 60, env=env, cwd=tmp)
        self.assertTrue(out.strip().startswith(user), out)


class TestStraggler(unittest.TestCase):
    def test_ringtail_beats_gloo_with_a_3x_straggler(self):
        res = result(launch.run_world(2, [WORKER, "straggler", "--epochs", "1", "--max-steps", "12",
                                          "--pad-ms", "100", "--slow", "3"], timeout=300))
        print("\nstraggler: %s" % json.dumps(res), file=sys.stderr)
        self.assertAlmostEqual(res["weights"][1], 1 / 3, delta=0.08)
        self.assertLess(res["ringtail_s"], res["gloo_s"])
        self.assertLess(res["ringtail_epochs_s"], 0.75 * res["gloo_s"])


class TestStragglerLoaderSkip(unittest.TestCase):
    """straggler._skip: how a child passes over the batches of the steps it
    is behind."""

    def test_map_style_skips_without_loading_iterable_in_order(self):
        import torch
        from torch.utils.data import DataLoader, Dataset, IterableDataset

        from ringtail_torch import straggler

        loads = []

        class Rows(Dataset):
            def __len__(self):
                return 12

            def __getitem__(self, i):
                loads.append(i)
                return torch.tensor([i])

        class Stream(IterableDataset):
            def __iter__(self):
                return iter(torch.tensor([i]) for i in range(12))

        orig = straggler._ORIG.get("next") or type(iter(DataLoader(Rows()))).__next__
        it = iter(DataLoader(Rows(), batch_size=4))
        straggler._skip(it, orig)
        self.assertEqual(loads, [], "a skipped map-style batch was loaded")
        self.assertEqual(next(it).reshape(-1).tolist(), [4, 5, 6, 7])
        it = iter(DataLoader(Stream(), batch_size=4))
        straggler._skip(it, orig)
        self.assertEqual(next(it).reshape(-1).tolist(), [4, 5, 6, 7])


class TestShareOfBatch(unittest.TestCase):
    """straggler.share_of_batch and _rank_lists: the rows each rank computes
    when the hook splits an unchanged DistributedSampler's global batches
    by the policy's shares (issue 36, item 1)."""

    def test_the_shares_cover_each_global_batch_exactly_once(self):
        from torch.utils.data import DistributedSampler
        from ringtail_torch import straggler

        data = list(range(103))
        for drop_last in (False, True):
            samplers = [DistributedSampler(data, num_replicas=4, rank=r, shuffle=True, seed=7, drop_last=drop_last)
                        for r in range(4)]
            for s in samplers:
                s.set_epoch(3)
            lists = straggler._rank_lists(samplers[2], 4)
            self.assertEqual(lists, [list(iter(s)) for s in samplers], "the rank lists are the samplers' own")
            self.assertEqual(samplers[2].rank, 2, "the sampler's rank is restored")
            batch = 8
            steps = -(-len(lists[0]) // batch)
            for shares in (None, [8, 8, 8, 8], [12, 10, 9, 1], [29, 1, 1, 1]):
                for k in range(steps):
                    even = sorted(i for lst in lists for i in lst[k * batch:(k + 1) * batch])
                    parts = [straggler.share_of_batch(lists, k, batch, shares, r) for r in range(4)]
                    self.assertEqual(sorted(i for p in parts for i in p), even,
                                     "step %d, shares %s: not the even split's global batch" % (k, shares))
                    if shares is not None and k < steps - 1:
                        self.assertEqual([len(p) for p in parts], shares)
                    self.assertTrue(all(parts), "a rank got no row: %s" % [len(p) for p in parts])


class TestStragglerHook(unittest.TestCase):
    """The DDP straggler hook (ringtail_torch/straggler.py) through an
    unmodified DDP script (straggler_worker.py). Assertions are on what the
    driver reports (roles, modes, samples), never on time."""

    WORKER = os.path.join(HERE, "straggler_worker.py")

    def test_no_straggler_matches_gloo(self):
        res = result(launch.run_world(4, [self.WORKER, "parity", "--policy", "exact", "--epochs", "2"], timeout=300,
                                      extra_env={"RINGTAIL_DDP_STRAGGLER_TIMEOUT": "120"}))
        print("\nstraggler hook parity: %s" % json.dumps(res), file=sys.stderr)
        self.assertLessEqual(res["diff20"], 1e-6)
        self.assertLessEqual(res["diff_final"], 1e-6)
        self.assertEqual(res["spread"], 0.0)
        self.assertEqual(set(res["modes"]) - {"ring", "overlap"}, set())
        self.assertNotIn("child", res["roles"])
        self.assertEqual(res["epochs"], 2, "one driver per epoch, flushed when the loader ran out")

    def run_train(self, world, slow, *args):
        outs = launch.run_world(world, [self.WORKER, "train", "--slow-rank", str(slow)] + list(args), timeout=300,
                                # The loop keeps in step (the test wrote it): eviction
                                # from the first epoch, without the watch.
                                extra_env={"RINGTAIL_DDP_STRAGGLER": "star", "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "120",
                                           "RINGTAIL_DDP_STRAGGLER_WATCH": "0"})
        res = result(outs)
        stats = hook_stats(outs)
        self.assertEqual(sorted(stats), list(range(world)), "every rank reports its hook's statistics")
        print("\nstraggler hook: %s; slow rank %s" % (json.dumps(res), json.dumps(stats[slow])), file=sys.stderr)
        self.assertGreater(stats[slow]["roles"].get("child", 0), 0, "the slow rank was never evicted")
        self.assertGreater(stats[slow]["skipped"], 0, "the evicted rank skipped no batch")
        self.assertGreater(stats[0]["modes"].get("evict", 0), 0)
        self.assertEqual(res["spread"], 0.0, "replicas differ after the flush")
        # Every gradient computed was applied exactly once: the union of the
        # member steps' applied counts (members agree on each) plus the
        # epochs' flushes equals the gradients the ranks computed.
        applied = {}
        for r, s in stats.items():
            for epoch, step, n in s["applied"]:
                self.assertEqual(applied.setdefault((epoch, step), n), n, "members disagree on step %d/%d" % (epoch, step))
            self.assertEqual(s["flushed"], stats[0]["flushed"])
        computed = sum(s["computed"] for s in stats.values())
        self.assertEqual(sum(applied.values()) + sum(stats[0]["flushed"]), computed)
        return res, stats

    def test_runs_with_evaluation_pauses_end_cleanly_under_every_policy(self):
        # An unmodified DDP script whose rank 0 evaluates every 15 steps
        # (a pause the others do not take): under every policy, with and
        # without a 3x slower rank, every run completes (no failure, no
        # hang) with identical replicas. Before, a rank evicted for its
        # pauses ran ahead of its parameters, ran out of batches first and
        # flushed while the members were still reducing.
        for policy in ("bsp", "exact", "star", "adaptive"):
            for slow in ("1", "3"):
                outs = launch.run_world(4, [self.WORKER, "train", "--backend", "gloo", "--epochs", "2", "--batch", "4",
                                            "--pad-ms", "10", "--slow", slow, "--eval-every", "15", "--eval-ms", "40"],
                                        timeout=240, extra_env={"RINGTAIL_DDP_STRAGGLER": policy,
                                                                "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60"})
                res = result(outs)
                self.assertEqual(res["spread"], 0.0, "%s, slow %s: replicas differ" % (policy, slow))
                self.assertEqual(len(res["epoch_s"]), 2, "%s, slow %s: rank 0 ran %d epochs" % (policy, slow, len(res["epoch_s"])))

    def test_the_policys_shares_split_the_batches_of_a_hetero_sampler(self):
        # A DDP script with ringtail_torch's HeteroBatchSampler hands it to
        # enable_straggler_handling: the policy gives the 3x slower rank
        # fewer rows of every global batch (exact: every step applies the
        # whole batch's mean gradient), nobody is evicted, the replicas
        # stay identical.
        outs = launch.run_world(4, [self.WORKER, "train", "--backend", "gloo", "--sampler", "hetero", "--policy", "shares",
                                    "--epochs", "2", "--batch", "16", "--pad-ms", "20", "--slow", "3"],
                                timeout=240, extra_env={"RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60"})
        res = result(outs)
        stats = hook_stats(outs)
        print("\nhetero sampler: %s; shares %s" % (json.dumps(res), stats[0].get("shares")), file=sys.stderr)
        self.assertEqual(res["spread"], 0.0, "replicas differ")
        self.assert_split_by_shares(stats)

    def test_unchanged_distributed_sampler_takes_the_policys_shares(self):
        # Issue 36, item 1: a plain DistributedSampler + DataLoader script,
        # nothing changed but RINGTAIL_DDP_STRAGGLER=adaptive: the hook
        # splits each global batch (the union of the ranks' sampler batches)
        # by the policy's shares, weights the average by rows, and the
        # parameters follow Gloo's synchronous SGD on the same script to
        # float rounding, while the 3x slower rank computes fewer rows.
        args = [self.WORKER, "train", "--backend", "gloo", "--epochs", "2", "--batch", "16", "--pad-ms", "20",
                "--slow", "3"]
        gloo = result(launch.run_world(4, args, timeout=240, extra_env={"RINGTAIL_DDP_STRAGGLER": "off"}))
        outs = launch.run_world(4, args, timeout=240, extra_env={"RINGTAIL_DDP_STRAGGLER": "adaptive",
                                                                  "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60"})
        res, stats = result(outs), hook_stats(outs)
        print("\nunchanged sampler: %s; shares %s" % (json.dumps(res["epoch_s"]), stats[0].get("shares")),
              file=sys.stderr)
        self.assertIn("splits each global batch of the script's DistributedSampler", "\n".join(outs))
        self.assertEqual(res["spread"], 0.0, "replicas differ")
        diff = max(abs(a - b) for a, b in zip(res["params"], gloo["params"]))
        self.assertLessEqual(diff, 1e-4, "the hook's update is not Gloo's synchronous SGD (largest difference %g)" % diff)
        self.assert_split_by_shares(stats)

    def assert_split_by_shares(self, stats):
        """Every rank holds the same shares of the 64-row global batch, the
        3x slower rank 3 the fewest; nobody was evicted (exact modes only)."""
        shares = stats[0]["shares"]
        self.assertEqual(sum(shares), 64)
        self.assertLess(shares[3], min(shares[:3]), "the 3x slower rank kept as many rows as the others: %s" % shares)
        for r, s in stats.items():
            self.assertEqual(s["shares"], shares, "rank %d holds other shares" % r)
            self.assertNotIn("child", s["roles"])
            self.assertEqual(set(s["modes"]) - {"ring", "overlap"}, set())

    def test_slow_rank_is_evicted_and_no_sample_is_lost(self):
        res, stats = self.run_train(4, 3, "--epochs", "2", "--pad-ms", "40", "--slow", "4")
        self.assertEqual(len(stats[0]["flushed"]), 2, "one flush per epoch")

    def test_rank_that_recovers_rejoins_with_the_optimizer_state(self):
        # Slow for its first 1.5 s, then as fast as the others: the policy
        # takes it back into the ring mid-epoch (90 steps of 4 samples per
        # rank). It gets the members' momentum with the parameters: any
        # difference would make the replicas drift in the steps after.
        res, stats = self.run_train(4, 3, "--epochs", "1", "--batch", "4", "--pad-ms", "30", "--slow", "5",
                                    "--slow-for", "1.5")
        self.assertGreater(stats[3]["rejoined"], 0, "the recovered rank never rejoined")
        self.assertGreater(stats[3]["roles"].get("member", 0) + stats[3]["roles"].get("parent", 0), 3,
                           "no member steps after the rejoin")



class TestAccumulation(unittest.TestCase):
    """Issue 38, item 3: AntDT-DD's accumulation run by the hook for an
    unchanged DDP script (ringtail_torch/accum.py). A V100 + P100 mix
    scaled down on CPU: rank 0 (the "V100") has twice the memory and twice
    the speed of rank 1 (the "P100", 2x compute injected), both caps below
    the rows the policy's shares give them. Assertions are on what the
    ranks computed and hold, never on time."""

    WORKER = os.path.join(HERE, "straggler_worker.py")
    # 32 and 16 "GB" as 12,800 and 6,400 bytes at 1,000 bytes a sample:
    # micro-batches of at most 12 and 6 rows (95% of the memory).
    CAPS = {"RINGTAIL_MEM_CAP": "12800,6400", "RINGTAIL_SAMPLE_BYTES": "1000"}
    ARGS = ["train", "--backend", "gloo", "--epochs", "2", "--batch", "16", "--pad-ms", "20", "--slow", "2"]

    def test_micro_batches_fit_each_cap_and_the_update_is_synchronous_sgds(self):
        args = [self.WORKER] + self.ARGS
        gloo = result(launch.run_world(2, args, timeout=240, extra_env={"RINGTAIL_DDP_STRAGGLER": "off"}))
        env = dict(self.CAPS, RINGTAIL_DDP_STRAGGLER="shares", RINGTAIL_DDP_STRAGGLER_TIMEOUT="60")
        outs = launch.run_world(2, args, timeout=240, extra_env=env)  # raises unless every rank exits 0
        res, stats = result(outs), hook_stats(outs)
        print("\naccumulation: shares %s, micro %s" % (stats[0].get("shares"),
                                                       [{k: stats[r]["micro"][k] for k in ("cap", "max_micro", "max_accum")}
                                                        for r in (0, 1)]), file=sys.stderr)
        self.assertIn("micro-batch caps [12, 6]", "\n".join(outs))
        self.assertEqual(sorted(stats), [0, 1], "every rank reports its hook's statistics")
        for r, cap in ((0, 12), (1, 6)):
            micro = stats[r]["micro"]
            self.assertEqual(micro["cap"], cap)
            self.assertNotIn("unfit", micro)
            seen = [b for sizes in micro["sizes"] for b in sizes]
            self.assertLessEqual(max(seen), cap, "rank %d computed a micro-batch above its cap: %s" % (r, micro["sizes"]))
            self.assertLessEqual(micro["max_micro"], cap)
            self.assertGreater(micro["max_accum"], 1, "rank %d's share was never split: %s" % (r, micro["sizes"]))
            self.assertEqual(micro["forwards"], res["steps"], "one training forward per step")
        shares = stats[0]["shares"]
        self.assertEqual(sum(shares), 32)
        self.assertGreater(shares[0], shares[1], "the 2x faster rank did not get more rows: %s" % shares)
        self.assertEqual(stats[1]["shares"], shares)
        self.assertEqual(res["spread"], 0.0, "replicas differ")
        diff = max(abs(a - b) for a, b in zip(res["params"], gloo["params"]))
        self.assertLessEqual(diff, 1e-4, "the accumulated update is not Gloo's synchronous SGD (largest difference %g)"
                             % diff)

    def test_micro_batches_give_the_whole_batchs_gradients(self):
        # One rank: a module with dropout, a keyword tensor with the batch's
        # rows, an input that requires grad, a tuple and a dict output, 20
        # rows in micro-batches of at most 7, against the same steps whole;
        # and under CPU autocast.
        res = result(launch.run_world(1, [os.path.join(HERE, "accum_worker.py"), "--cap", "7", "--rows", "20"],
                                      timeout=120))
        amp = res.pop("autocast")
        # bfloat16's rounding differs between batch shapes (about 0.5% of
        # the largest gradient here); a recompute outside autocast differs
        # by about 8%.
        self.assertEqual(amp["split"], 3)
        self.assertLessEqual(amp["diff"], 0.02 * amp["scale"], "under CPU autocast the micro-batches' gradients differ "
                             "from the whole batch's by %g of %g" % (amp["diff"], amp["scale"]))
        for kind, r in res.items():
            self.assertEqual(r["unfit"], [], kind)
            self.assertEqual(r["split"], 3, "%s: not every step was split: %s" % (kind, r["sizes"]))
            self.assertEqual(r["sizes"], [[7, 7, 6]] * 3, kind)
            self.assertLessEqual(r["diff"], 1e-6, "%s: gradients differ from the whole batch's by %g" % (kind, r["diff"]))
            self.assertEqual(r["hooks"], r["whole_hooks"], "%s: DDP reduced a different number of buckets" % kind)

    def test_the_shares_of_a_hetero_sampler_stay_within_the_memory_plan(self):
        # The fast rank with the small memory (caps of 6 and 12 rows) and at
        # most 3 micro-batches a share: the policy may give rank 0 no more
        # than 18 of the 32 rows, whatever its speed.
        env = {"RINGTAIL_MEM_CAP": "6400,12800", "RINGTAIL_SAMPLE_BYTES": "1000", "RINGTAIL_MAX_ACCUM": "3",
               "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60"}
        outs = launch.run_world(2, [self.WORKER, "train", "--backend", "gloo", "--sampler", "hetero", "--policy",
                                    "shares", "--epochs", "1", "--batch", "16", "--pad-ms", "20", "--slow", "2"],
                                timeout=240, extra_env=env)
        res, stats = result(outs), hook_stats(outs)
        self.assertIn("micro-batch caps [6, 12]", "\n".join(outs))
        shares = stats[0]["shares"]
        self.assertEqual(sum(shares), 32)
        self.assertLessEqual(shares[0], 18, "rank 0's share exceeds 3 micro-batches of its cap: %s" % shares)
        for r, cap in ((0, 6), (1, 12)):
            self.assertEqual(stats[r]["shares"], shares)
            self.assertLessEqual(max(b for sizes in stats[r]["micro"]["sizes"] for b in sizes), cap)
        self.assertEqual(res["spread"], 0.0, "replicas differ")

    def test_a_cap_without_a_sample_size_fails_naming_the_setting(self):
        with self.assertRaises(RuntimeError) as ctx:
            launch.run_world(2, [self.WORKER] + self.ARGS, timeout=120,
                             extra_env={"RINGTAIL_DDP_STRAGGLER": "shares", "RINGTAIL_MEM_CAP": "12800,6400"})
        self.assertIn("RINGTAIL_SAMPLE_BYTES", str(ctx.exception))


class TestAccumSettings(unittest.TestCase):
    """The memory settings' parsing (accum.py): one value or one per rank,
    positive whole numbers, a clear error naming the variable otherwise;
    and the cap's arithmetic on CUDA, with torch.cuda's memory calls
    replaced (no GPU here)."""

    def test_a_measured_cuda_cap(self):
        from unittest import mock

        import torch
        from ringtail_torch import accum

        class Holder:  # what MicroBatches reads of a DDP model
            def __init__(self):
                self.module = torch.nn.Linear(2, 2)

        def measure(free, reserved, rows, peak, before, memory=None):
            ddp = Holder()
            mb = accum.MicroBatches(ddp, cap=0, memory=memory)
            mb._device = lambda: torch.device("cuda", 0)
            mb._measure = (rows, before)
            with mock.patch.object(torch.cuda, "max_memory_allocated", lambda d=None: peak), \
                    mock.patch.object(torch.cuda, "memory_reserved", lambda d=None: reserved), \
                    mock.patch.object(torch.cuda, "mem_get_info", lambda d=None: (free, 10 * free)):
                mb.settle()
            return mb.cap

        # 32 rows took 32,000 bytes above the 1,000 allocated before: 1,000
        # a sample. Free 100,000 plus the cache's 40,000 (41,000 reserved,
        # 1,000 of it the model's): 95% of 140,000 holds 133 samples.
        self.assertEqual(measure(free=100_000, reserved=41_000, rows=32, peak=33_000, before=1_000), 133)
        # A device nearly full after the step still holds the batch it ran.
        self.assertEqual(measure(free=0, reserved=33_000, rows=32, peak=33_000, before=1_000), 32)
        # A configured memory is taken as it is (the sample size measured).
        self.assertEqual(measure(free=100_000, reserved=41_000, rows=32, peak=33_000, before=1_000, memory=10_000), 9)

    def test_values(self):
        from ringtail_torch import accum

        self.assertEqual(accum.mem_cap_setting(1, 2, {"RINGTAIL_MEM_CAP": "100,200"}), 200)
        self.assertEqual(accum.mem_cap_setting(1, 2, {"RINGTAIL_MEM_CAP": " 300 "}), 300)
        self.assertEqual(accum.mem_cap_setting(0, 2, {"RINGTAIL_MEM_CAP": "16GiB,32GiB"}), 16 << 30)
        self.assertIsNone(accum.mem_cap_setting(0, 2, {}))
        self.assertEqual(accum.sample_bytes_setting({"RINGTAIL_SAMPLE_BYTES": "64"}), 64)
        self.assertEqual(accum.max_accum_setting({}), 0)
        self.assertEqual(accum.max_accum_setting({"RINGTAIL_MAX_ACCUM": "3"}), 3)
        for env, call in (({"RINGTAIL_MEM_CAP": "1,2,3"}, lambda e: accum.mem_cap_setting(0, 2, e)),
                          ({"RINGTAIL_MEM_CAP": "-5"}, lambda e: accum.mem_cap_setting(0, 2, e)),
                          ({"RINGTAIL_MEM_CAP": "lots"}, lambda e: accum.mem_cap_setting(0, 2, e)),
                          ({"RINGTAIL_MEM_CAP": "0"}, lambda e: accum.mem_cap_setting(0, 2, e)),
                          ({"RINGTAIL_SAMPLE_BYTES": "1,2"}, accum.sample_bytes_setting),
                          ({"RINGTAIL_SAMPLE_BYTES": "0"}, accum.sample_bytes_setting),
                          ({"RINGTAIL_MAX_ACCUM": "0"}, accum.max_accum_setting)):
            with self.assertRaises(ValueError) as ctx:
                call(env)
            self.assertIn(list(env)[0], str(ctx.exception))


class TestScriptShapes(unittest.TestCase):
    """Issue 36, item 0: every rank exits, whatever the script does. Each
    shape of shapes_worker.py (a loop without a DataLoader, a generator,
    an IterableDataset, rank-0 evaluation, the script's own collectives and
    checkpoint, no_sync accumulation, a break, two DDP models) runs under
    every policy, with and without a 3x slower rank: every rank must exit 0
    (launch.run_world fails the test naming a rank that failed or outlived
    its timeout, and kills every process it started), print its DONE line,
    and end with the same parameters as every other rank. Where eviction
    cannot serve the shape the hook runs the exact ring (adaptive gives a
    loop without a DataLoader row shares inside DDP's forward instead): that
    choice follows from the shape alone, never from timing, so it is
    asserted too."""

    WORKER = os.path.join(HERE, "shapes_worker.py")
    POLICIES = ("bsp", "exact", "shares", "star", "adaptive")
    # The shapes whose loop an evicting policy cannot keep in step: the
    # hook says so and runs the exact ring (at the first step, or at the end
    # of the watched first epoch).
    EXACT = {"index", "generator", "collectives", "nosync", "two"}
    # The shapes whose DistributedSampler the hook splits by the policy's
    # shares under adaptive (item 1): one in-process map-style loader, one
    # batch per step, one hooked model.
    SPLIT = {"eval0", "collectives", "break"}
    # The loops without a DataLoader whose rows adaptive trims inside DDP's
    # forward (the shares preset, weighted by the rows computed).
    ROWS = {"index", "generator"}

    def expected(self, policy, shape):
        if policy == "adaptive" and (shape in self.SPLIT or shape in self.ROWS):
            return "shares"
        if policy in ("star", "adaptive") and shape in self.EXACT:
            return "exact"
        return policy

    def run_shape(self, shape, *args):
        for policy in self.POLICIES:
            for slow in ("1", "3"):
                with self.subTest(shape=shape, policy=policy, slow=slow):
                    outs = launch.run_world(4, [self.WORKER, shape, "--epochs", "2", "--pad-ms", "8", "--slow", slow]
                                            + list(args), timeout=240,
                                            extra_env={"RINGTAIL_DDP_STRAGGLER": policy,
                                                       "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60",
                                                       "SHAPES_IMPORT_RINGTAIL": "1"})
                    done = done_lines(outs)
                    self.assertEqual(sorted(done), [0, 1, 2, 3], "a rank did not reach the script's end")
                    sums = {d["checksum"] for d in done.values()}
                    self.assertEqual(len(sums), 1, "the ranks end with different parameters: %s" % done)
                    ran = {d["hook"]["policy"] for d in done.values()}
                    want = self.expected(policy, shape)
                    self.assertEqual(ran, {want}, "policy %s on shape %s ran %s" % (policy, shape, ran))
                    if want == "exact" != policy:
                        self.assertIn("cannot serve this script", done[0]["hook"]["note"])
                    if want == "shares" and shape in self.SPLIT:
                        self.assertIn("splits each global batch", done[0]["hook"]["note"])
                    if policy == "adaptive" and shape in self.ROWS:
                        self.assertIn("trims rows inside DDP's forward", done[0]["hook"]["note"])

    def test_loop_without_a_dataloader(self):
        self.run_shape("index")

    def test_generator(self):
        self.run_shape("generator")

    def test_iterable_dataset(self):
        self.run_shape("iterable")

    def test_rank0_evaluation(self):
        self.run_shape("eval0", "--epochs", "3")

    def test_the_scripts_own_collectives_and_checkpoint(self):
        self.run_shape("collectives")

    def test_no_sync_accumulation(self):
        self.run_shape("nosync")

    def test_break_out_of_the_loop(self):
        # 44 steps an epoch: the break comes in the second epoch, where an
        # evicting policy may have a child (it learns that training ended).
        self.run_shape("break", "--epochs", "3", "--max-steps", "70")

    def test_two_ddp_models(self):
        self.run_shape("two")

    def test_a_rank_that_fails_ends_every_rank(self):
        # Rank 0 raises at step 60 (the second epoch: after the watch, an
        # evicting policy may have a child): its hook's communicator closes
        # at exit and every other rank fails too, none waits out its
        # timeout. run_world waits for every rank and says "timed out" for
        # one that outlived it.
        for policy in ("bsp", "star", "adaptive"):
            with self.subTest(policy=policy):
                with self.assertRaises(RuntimeError) as cm:
                    launch.run_world(4, [self.WORKER, "crash", "--epochs", "3", "--pad-ms", "8", "--slow", "3",
                                         "--max-steps", "60"], timeout=240,
                                     extra_env={"RINGTAIL_DDP_STRAGGLER": policy, "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60",
                                                "SHAPES_IMPORT_RINGTAIL": "1"})
                msg = str(cm.exception)
                self.assertNotIn("timed out", msg)
                self.assertIn("injected failure at step 60", msg)
                self.assertNotIn("DONE", msg, "a rank finished training while rank 0 had failed")


def done_lines(outs):
    """Every rank's DONE {json} line (shapes_worker.py), by rank."""
    done = {}
    for out in outs:
        for line in out.splitlines():
            if line.startswith("DONE "):
                d = json.loads(line[5:])
                done[d["rank"]] = d
    return done


class TestRowTrim(unittest.TestCase):
    """Issue 36: a loop without a DataLoader under adaptive, one rank 3x
    slower. The hook trims rows inside DDP's forward (rows.RowTrim): the
    slow rank computes fewer rows than its batch, every rank applies the
    same update (the same parameters at the end), every rank exits 0, eval
    and no_grad forwards through DDP see the whole batch, and a model whose
    output cannot be cut falls back to the exact ring with its line."""

    WORKER = os.path.join(HERE, "shapes_worker.py")

    def run_world(self, shape, policy="adaptive", slow="3"):
        # 20 ms per 8 rows: rank 3's 60 ms stays a persistent straggler on
        # a loaded machine, so its shares are cut (what is asserted is the
        # rows counted, never a time).
        outs = launch.run_world(4, [self.WORKER, shape, "--epochs", "2", "--pad-ms", "20", "--slow", slow,
                                    "--check-eval"], timeout=240,
                                extra_env={"RINGTAIL_DDP_STRAGGLER": policy, "RINGTAIL_DDP_STRAGGLER_TIMEOUT": "60",
                                           "SHAPES_IMPORT_RINGTAIL": "1"})
        done = done_lines(outs)
        self.assertEqual(sorted(done), [0, 1, 2, 3], "a rank did not reach the script's end")
        sums = {d["checksum"] for d in done.values()}
        self.assertEqual(len(sums), 1, "the ranks end with different parameters: %s" % done)
        for r, d in done.items():
            # Each step compares the DDP model's eval-mode and no_grad
            # outputs with the module's own: a trimmed evaluation differs.
            self.assertEqual(d["evals_differ"], 0, "rank %d: an evaluation through DDP was trimmed" % r)
        return done

    def check_trimmed(self, done):
        for d in done.values():
            self.assertEqual(d["hook"]["policy"], "shares")
            rows = d["hook"]["rows"]
            self.assertGreater(rows["untouched"], 0, "no evaluation went through DDP's forward")
        self.assertIn("trims rows inside DDP's forward", done[0]["hook"]["note"])
        slow = done[3]["hook"]["rows"]
        self.assertGreater(slow["trimmed"], 0, slow)
        self.assertLess(slow["computed"], slow["batch"], "the slow rank computed all its rows: %s" % slow)
        for r in (0, 1, 2):
            rows = done[r]["hook"]["rows"]
            self.assertLess(slow["computed"], rows["computed"], "rank 3 computed no fewer rows than rank %d" % r)

    def test_index_loop_trims_the_slow_ranks_rows(self):
        self.check_trimmed(self.run_world("index"))

    def test_generator_loop_trims_the_slow_ranks_rows(self):
        self.check_trimmed(self.run_world("generator"))

    def test_a_dict_output_falls_back_to_the_exact_ring(self):
        done = self.run_world("dictout")
        for d in done.values():
            self.assertEqual(d["hook"]["policy"], "exact")
            self.assertEqual(d["hook"]["rows"]["trimmed"], 0)
        note = done[0]["hook"]["note"]
        self.assertIn("cannot serve this script", note)
        self.assertIn("the model's output is a dict", note)

    def test_exact_never_trims(self):
        done = self.run_world("index", policy="exact")
        for d in done.values():
            self.assertEqual(d["hook"]["policy"], "exact")
            self.assertIsNone(d["hook"]["rows"])


class TestRowTrimHelpers(unittest.TestCase):
    """rows.py's pure parts: which outputs can be cut, the full-shape
    output (gradient only through the rows computed), and the fraction a
    plan gives a rank (a persistent straggler only)."""

    def test_output_fit(self):
        import torch
        from ringtail_torch import rows
        self.assertIsNone(rows.output_unfit(torch.zeros(4, 3), 4))
        self.assertIsNone(rows.output_unfit((torch.zeros(4, 3), torch.zeros(4)), 4))
        self.assertIn("dict", rows.output_unfit({"logits": torch.zeros(4, 3)}, 4))
        self.assertIn("shape", rows.output_unfit(torch.zeros(3, 4), 4))
        self.assertIn("shape", rows.output_unfit(torch.zeros(()), 4))
        self.assertIn("shape", rows.output_unfit((torch.zeros(4, 3), torch.zeros(2)), 4))

    def test_expand_carries_gradient_only_through_the_rows_computed(self):
        import torch
        from ringtail_torch import rows
        w = torch.ones(3, requires_grad=True)
        idx = torch.tensor([0, 2])
        cut = torch.tensor([[1.0, 2, 3], [4, 5, 6]]) * w
        full = rows.expand(cut, idx, 4)
        self.assertEqual(tuple(full.shape), (4, 3))
        self.assertTrue(torch.equal(full[1], torch.zeros(3)))
        self.assertTrue(torch.equal(full[3], torch.zeros(3)))
        self.assertTrue(torch.equal(full[2], torch.tensor([4.0, 5, 6])))
        full.sum().backward()
        self.assertTrue(torch.equal(w.grad, torch.tensor([5.0, 7, 9])))
        pair = rows.expand((cut.detach(), cut.detach()[:, 0]), idx, 4)
        self.assertIsInstance(pair, tuple)
        self.assertEqual([tuple(t.shape) for t in pair], [(4, 3), (4,)])

    def test_fraction_needs_a_persistent_straggler(self):
        from ringtail_torch.rows import PERSIST, RowTrim
        trim = RowTrim.__new__(RowTrim)  # the plan's arithmetic alone, no model
        trim.reset()
        for _ in range(PERSIST - 1):
            trim.plan([20, 20, 20, 4], 3)
            self.assertEqual(trim.fraction, 1.0)
        trim.plan([20, 20, 20, 4], 3)
        self.assertAlmostEqual(trim.fraction, 0.2)
        trim.plan([20, 20, 19, 5], 0)  # the fastest rank keeps its whole batch
        self.assertEqual(trim.fraction, 1.0)
        trim.plan([17, 16, 16, 15], 3)  # within the threshold: whole
        self.assertEqual(trim.fraction, 1.0)
        trim.plan([20, 20, 20, 4], 3)
        self.assertEqual(trim.fraction, 1.0, "one slow plan after a fast one is not persistent")


if __name__ == "__main__":
    unittest.main()
