"""Where a new ringtail communicator meets: the address, job id and
secret its ranks agree on through a c10d store (agree), and the local IP
and free port helpers it uses."""

import contextlib
import json
import os
import secrets
import socket
from datetime import timedelta

from _ringtail_env import env_bool


def local_ip(master_addr):
    """The IP this host is reached at by the job: RINGTAIL_LISTEN_IP, or
    127.0.0.1 when master_addr is loopback, or the address routing to
    master_addr (no packet is sent)."""
    ip = os.environ.get("RINGTAIL_LISTEN_IP")
    if ip:
        return ip
    try:
        infos = socket.getaddrinfo(master_addr, None, socket.AF_INET)
        addr = infos[0][4][0]
    except (OSError, IndexError):
        return "127.0.0.1"
    if addr.startswith("127."):
        return "127.0.0.1"
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as s:
        try:
            s.connect((addr, 9))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def free_port(ip):
    """A TCP port on ip that was free a moment ago."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def _has_secret():
    return bool(os.environ.get("RINGTAIL_SECRET") or os.environ.get("RINGTAIL_SECRET_FILE")) or env_bool("RINGTAIL_INSECURE")


def _duration(td):
    return "%dms" % max(1, int(td.total_seconds() * 1000))


def agree(store, rank, size, timeout, key="ringtail/coordinator"):
    """Agrees, through a c10d store, on where a new ringtail communicator of
    `size` ranks meets: rank 0 picks a free port on its IP (it hosts the
    rendezvous there), a job id and, unless the environment gives a secret,
    a random secret; the others read them. Returns rt_init overrides.

    The secret then travels through the store, so it protects the
    communicator exactly as well as the store protects the torch job:
    set RINGTAIL_SECRET (the same on every rank) to keep it off the store.
    """
    if rank == 0:
        ip = local_ip(os.environ.get("MASTER_ADDR", "127.0.0.1"))
        info = {"addr": ip, "port": free_port(ip), "job": "torch-" + secrets.token_hex(8)}
        if not _has_secret():
            info["secret"] = secrets.token_hex(16)
        store.set(key, json.dumps(info))
    else:
        store.wait([key], timeout)
        info = json.loads(store.get(key).decode())
    over = {
        "RANK": rank,
        "WORLD_SIZE": size,
        "LOCAL_RANK": rank,
        "LOCAL_WORLD_SIZE": size,
        "MASTER_ADDR": info["addr"],
        "MASTER_PORT": info["port"],
        # Read before MASTER_*: a launcher's (ringtail run's) coordinator
        # must not win over the one agreed here.
        "RINGTAIL_MASTER_ADDR": info["addr"],
        "RINGTAIL_MASTER_PORT": info["port"],
        "RINGTAIL_COORDINATOR": "",
        "RINGTAIL_JOB_ID": info["job"],
    }
    if "secret" in info:
        over["RINGTAIL_SECRET"] = info["secret"]
    if "RINGTAIL_TIMEOUT" not in os.environ:
        over["RINGTAIL_TIMEOUT"] = _duration(timeout)
    if "RINGTAIL_CONNECT_TIMEOUT" not in os.environ:
        over["RINGTAIL_CONNECT_TIMEOUT"] = _duration(min(timeout, timedelta(minutes=5)))
    return over
