"""Starts a local job the way torchrun does (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) for the tests and bench.py."""

import os
import random
import socket
import subprocess
import sys
import time

# The ranks run on the interpreter that runs the tests (/usr/bin/python3 in
# CI, the one holding CUDA torch on a GPU machine), or $RINGTAIL_TEST_PYTHON.
PYTHON = os.environ.get("RINGTAIL_TEST_PYTHON") or sys.executable or "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A port free now for the job's rendezvous, below the kernel's
    ephemeral range: a port the kernel handed out (bind to 0) may be
    handed out again, as the local end of any process's outgoing
    connection — one of the ranks' own — before rank 0 listens on it
    ("address already in use"). A port below the range is never taken
    that way."""
    lo, _ = _ephemeral_range()
    first = 10000 if lo > 11000 else 1024
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(first, lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(extra=None):
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "RINGTAIL_COORDINATOR", "RINGTAIL_JOB_ID", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(k, None)
    env["PYTHONPATH"] = PKG + os.pathsep + HERE + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def run_world(world, args, timeout=180, extra_env=None):
    """Runs `python args...` as world ranks; returns their outputs. Raises
    RuntimeError naming the failed rank with its output."""
    port = free_port()
    procs = []
    for r in range(world):
        env = child_env(extra_env)
        env.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([PYTHON] + list(args), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return wait_all(procs, timeout)


def wait_all(procs, timeout):
    deadline = time.monotonic() + timeout
    outs, failed = [], None
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            failed = failed or (r, "timed out after %ds" % timeout)
        outs.append(out)
        if p.returncode != 0 and failed is None:
            failed = (r, "exit %s" % p.returncode)
    if failed is not None:
        r, why = failed
        raise RuntimeError("rank %d: %s\n%s" % (r, why, "\n".join("--- rank %d ---\n%s" % (i, o) for i, o in enumerate(outs))))
    return outs


if __name__ == "__main__":
    w = int(sys.argv[1])
    for i, o in enumerate(run_world(w, sys.argv[2:])):
        sys.stdout.write("--- rank %d ---\n%s" % (i, o))
