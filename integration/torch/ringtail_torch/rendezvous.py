"""Stores bootstrapped through ringtail's own rendezvous coordinator.

Under ``ringtail run`` MASTER_ADDR:MASTER_PORT is the launcher's ringtail
coordinator, not a place where rank 0 may open torch's TCPStore, so plain
``env://`` cannot work there. bootstrap_store joins the ringtail
coordinator, has rank 0 open a TCPStore on a free port of its own host,
broadcasts that address over ringtail, and returns a store client on every
rank. install_env_rendezvous makes ``env://`` (the default init_method) and
``tcp://MASTER_ADDR:MASTER_PORT`` do this when RINGTAIL_COORDINATOR=external,
which ``ringtail run`` sets; the
``ringtail`` torchrun rendezvous (torchrun.py) uses the same bootstrap for
the node agents.
"""

import ctypes
import os
from datetime import timedelta

from torch.distributed import PrefixStore, TCPStore

from . import _lib
from .backend import local_ip

_ADDR_BYTES = 256


def bootstrap_store(rank, world, overrides, timeout, master_addr=None):
    """Joins the ringtail job of `overrides` (see rt_init), opens a TCPStore
    on rank 0's host and returns (store, rank 0's IP). The ringtail
    communicator is closed before returning."""
    comm = _lib.Comm(overrides)
    try:
        buf = ctypes.create_string_buffer(_ADDR_BYTES)
        store = None
        if comm.rank == 0:
            ip = local_ip(master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1"))
            store = TCPStore(ip, 0, world, True, timeout, wait_for_workers=False, multi_tenant=True)
            addr = ("%s:%d" % (ip, store.port)).encode()
            buf.value = addr
        comm.broadcast(ctypes.addressof(buf), _ADDR_BYTES, _lib.RT_UINT8, 0)
        host, port = buf.value.decode().rsplit(":", 1)
        if store is None:
            store = TCPStore(host, int(port), world, False, timeout)
        # Everyone holds a client before rank 0 may leave the bootstrap.
        comm.barrier()
        return store, host
    finally:
        comm.close()


def under_ringtail_run():
    """Whether this process was started by ``ringtail run`` with MASTER_ADDR
    and MASTER_PORT pointing at ringtail's coordinator (where torch cannot
    open its TCPStore). A launcher that gives ringtail its own variables
    (RINGTAIL_MASTER_PORT) leaves MASTER_PORT to torch: then no."""
    return (
        os.environ.get("RINGTAIL_COORDINATOR") == "external"
        and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
        and not os.environ.get("RINGTAIL_MASTER_PORT")
    )


def _is_coordinator(host, port):
    """Whether host:port is this job's ringtail coordinator
    (MASTER_ADDR:MASTER_PORT; a loopback name for a loopback address)."""
    try:
        if port is None or int(port) != int(os.environ.get("MASTER_PORT", "-1")):
            return False
    except ValueError:
        return False
    addr = os.environ.get("MASTER_ADDR", "")
    loopback = ("localhost", "127.0.0.1", "::1")
    return host == addr or (host in loopback and addr in loopback)


def _ringtail_run_rendezvous(original, scheme):
    """torch's env:// (or tcp:// aimed at MASTER_ADDR:MASTER_PORT) under
    ringtail run: the store is bootstrapped through ringtail's coordinator
    instead of being opened on its port (which fails with EADDRINUSE on
    rank 0 and std::bad_alloc on the others, who would speak TCPStore's
    protocol to ringtail's coordinator)."""

    def handler(url, timeout=timedelta(minutes=30), **kwargs):
        from urllib.parse import urlparse

        parsed = urlparse(url)
        if not under_ringtail_run() or (scheme == "tcp" and not _is_coordinator(parsed.hostname, parsed.port)):
            yield from original(url, timeout=timeout, **kwargs)
            return
        query = dict(q.split("=", 1) for q in parsed.query.split("&") if "=" in q)
        rank = int(query.get("rank", os.environ.get("RANK", "-1")))
        world = int(query.get("world_size", os.environ.get("WORLD_SIZE", "-1")))
        if rank < 0 or world < 1:
            raise ValueError("%s:// under ringtail run: RANK and WORLD_SIZE must be set" % scheme)
        over = {}
        if "RINGTAIL_CONNECT_TIMEOUT" not in os.environ:
            over["RINGTAIL_CONNECT_TIMEOUT"] = "%dms" % int(min(timeout, timedelta(minutes=5)).total_seconds() * 1000)
        store, _ = bootstrap_store(rank, world, over, timeout)
        yield (PrefixStore("ringtail-run", store), rank, world)
        raise RuntimeError("Unable to perform re-rendezvous using %s:// under ringtail run" % scheme)

    handler.ringtail = True
    return handler


def install_env_rendezvous():
    """Makes env:// (and tcp:// at MASTER_ADDR:MASTER_PORT) bootstrap their
    store through ringtail when the job was started by ``ringtail run``
    (RINGTAIL_COORDINATOR=external); other jobs keep torch's handlers
    unchanged. Idempotent."""
    import importlib

    # torch.distributed re-exports the function rendezvous under the
    # module's name: fetch the module itself.
    rdzv = importlib.import_module("torch.distributed.rendezvous")
    for scheme in ("env", "tcp"):
        current = rdzv._rendezvous_handlers.get(scheme)
        if current is None or getattr(current, "ringtail", False):
            continue
        rdzv._rendezvous_handlers[scheme] = _ringtail_run_rendezvous(current, scheme)
