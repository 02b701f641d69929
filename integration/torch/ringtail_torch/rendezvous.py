"""Stores bootstrapped through ringtail's own rendezvous coordinator.

Under ``ringtail run`` MASTER_ADDR:MASTER_PORT is the launcher's ringtail
coordinator, not a place where rank 0 may open torch's TCPStore, so plain
``env://`` cannot work there. bootstrap_store joins the ringtail
coordinator, has rank 0 open a TCPStore on a free port of its own host,
broadcasts that address over ringtail, and returns a store client on every
rank. install_env_rendezvous makes ``env://`` (the default init_method) do
this when RINGTAIL_COORDINATOR=external, which ``ringtail run`` sets; the
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


def _env_rendezvous(original):
    def handler(url, timeout=timedelta(minutes=30), **kwargs):
        if os.environ.get("RINGTAIL_COORDINATOR") != "external" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            yield from original(url, timeout=timeout, **kwargs)
            return
        from urllib.parse import urlparse

        query = dict(q.split("=", 1) for q in urlparse(url).query.split("&") if "=" in q)
        rank = int(query.get("rank", os.environ.get("RANK", "-1")))
        world = int(query.get("world_size", os.environ.get("WORLD_SIZE", "-1")))
        if rank < 0 or world < 1:
            raise ValueError("env:// under ringtail run: RANK and WORLD_SIZE must be set")
        over = {}
        if "RINGTAIL_CONNECT_TIMEOUT" not in os.environ:
            over["RINGTAIL_CONNECT_TIMEOUT"] = "%dms" % int(min(timeout, timedelta(minutes=5)).total_seconds() * 1000)
        store, _ = bootstrap_store(rank, world, over, timeout)
        yield (PrefixStore("ringtail-run", store), rank, world)
        raise RuntimeError("Unable to perform re-rendezvous using env:// under ringtail run")

    handler.ringtail = True
    return handler


def install_env_rendezvous():
    """Makes env:// bootstrap its store through ringtail when the job was
    started by ``ringtail run`` (RINGTAIL_COORDINATOR=external); other jobs
    keep torch's env:// unchanged. Idempotent."""
    import importlib

    # torch.distributed re-exports the function rendezvous under the
    # module's name: fetch the module itself.
    rdzv = importlib.import_module("torch.distributed.rendezvous")
    current = rdzv._rendezvous_handlers.get("env")
    if current is None or getattr(current, "ringtail", False):
        return
    rdzv._rendezvous_handlers["env"] = _env_rendezvous(current)

