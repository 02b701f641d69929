"""ringtail-torchrun: torchrun with a ``ringtail`` rendezvous.

    ringtail-torchrun [torchrun flags] train.py [args]

takes exactly torchrun's flags (it is torch.distributed.run with three
changes, all in this process):

1. It registers a ``ringtail`` rendezvous backend with torchelastic and
   makes it the default: when torchrun would use its ``static`` rendezvous
   (no --rdzv_backend, no --standalone), the node agents instead meet at
   --master_addr:--master_port through ringtail's coordinator (hosted by
   the agent of --node_rank 0), authenticated with RINGTAIL_SECRET; node 0
   then opens the agents' TCPStore on a free port and tells the others its
   address over ringtail. Membership is static, like torchrun's static
   rendezvous: --nnodes N and --node_rank are required. With --nnodes
   MIN:MAX (an elastic job) the agents use torchelastic's own c10d
   rendezvous on --master_addr:--master_port (or --rdzv_endpoint): nodes
   come and go between MIN and MAX and --max-restarts restarts the workers
   after a failure, each round forming a new ringtail process group.
   --rdzv_backend c10d/etcd/static are passed to torchrun untouched.
2. On Python 3.11 torchrun 1.13 crashes in Std.from_str (IntFlag iteration
   changed); the wrapper fixes that method.
3. Workers get RINGTAIL_SECRET (generated for a single node when none is
   set; more than one node needs RINGTAIL_SECRET on every node, or
   RINGTAIL_INSECURE=1) and MASTER_ADDR equal to --master_addr.

The workers see torchrun's usual environment; init_process_group("ringtail")
works in them as under plain torchrun.
"""

import os
import re
import secrets
import socket
import sys
from datetime import timedelta

from _ringtail_env import env_bool
from torch.distributed.elastic.rendezvous import RendezvousHandler

from . import rendezvous as _rdzv

BACKEND = "ringtail"


def patch_std():
    """Fixes torch 1.13's Std.from_str on Python >= 3.11 (it returns None
    for "0" and "3" because iterating an IntFlag skips 0 and aliases)."""
    from torch.distributed.elastic.multiprocessing import api

    try:
        if api.Std.from_str("0") == api.Std.NONE and api.Std.from_str("3") == api.Std.ALL:
            return
    except Exception:  # noqa: BLE001 - any failure means it needs the fix
        pass
    value_re, mapping_re = api._VALUE_REGEX, api._MAPPING_REGEX

    def from_str(cls, vm):
        if re.match(value_re, vm):
            return cls(int(vm))
        if re.match(mapping_re, vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match: <{value_re}> or <{mapping_re}>")

    api.Std.from_str = classmethod(from_str)


class RingtailRendezvousHandler(RendezvousHandler):
    """A static torchelastic rendezvous through ringtail's coordinator (see
    the module doc)."""

    def __init__(self, params):
        from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

        if params.min_nodes != params.max_nodes:
            raise ValueError("ringtail rendezvous is static: give --nnodes N, not MIN:MAX")
        rank = params.config.get("rank")
        if rank is None:
            raise ValueError("ringtail rendezvous needs the node rank (--node_rank)")
        self._host, self._port = parse_rendezvous_endpoint(params.endpoint, default_port=29500)
        self._rank = int(rank)
        self._world = params.max_nodes
        self._run_id = params.run_id
        self._timeout = timedelta(seconds=float(params.config.get("timeout", 900)))
        self._round = 0
        self._store = None
        self._closed = False

    def get_backend(self):
        return BACKEND

    def next_rendezvous(self):
        over = {
            "RANK": self._rank,
            "WORLD_SIZE": self._world,
            "LOCAL_RANK": 0,
            "LOCAL_WORLD_SIZE": 1,
            "MASTER_ADDR": self._host,
            "MASTER_PORT": self._port,
            "RINGTAIL_MASTER_ADDR": self._host,
            "RINGTAIL_MASTER_PORT": self._port,
            "RINGTAIL_COORDINATOR": "",
            "RINGTAIL_JOB_ID": "torchrun-%s-%d" % (self._run_id, self._round),
            "RINGTAIL_CONNECT_TIMEOUT": "%ds" % int(self._timeout.total_seconds()),
        }
        self._round += 1
        from torch.distributed import PrefixStore

        self._store, _ = _rdzv.bootstrap_store(self._rank, self._world, over, self._timeout, master_addr=self._host)
        return _rendezvous_result(PrefixStore(self._run_id, self._store), self._rank, self._world, self._host)

    def is_closed(self):
        return self._closed

    def set_closed(self):
        self._closed = True

    def num_nodes_waiting(self):
        return 0

    def get_run_id(self):
        return self._run_id

    def shutdown(self):
        return True


_WORKERS_MASTER_KEY = "ringtail/workers-master"


def _rendezvous_result(store, rank, world, host):
    """next_rendezvous's result: a (store, rank, world) tuple for torch
    before 2.4; from 2.4 on, a RendezvousInfo, whose bootstrap store info
    the agent hands its workers as MASTER_ADDR:MASTER_PORT (--master_addr
    and a port free on node 0's host, published through the store; torch
    1.13's agent picked that port itself)."""
    try:
        from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo
    except ImportError:
        return store, rank, world
    if rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            store.set(_WORKERS_MASTER_KEY, "%s:%d" % (host, s.getsockname()[1]))
    addr, port = store.get(_WORKERS_MASTER_KEY).decode().rsplit(":", 1)
    return RendezvousInfo(store, rank, world, RendezvousStoreInfo(addr, int(port)))


def register():
    """Registers the ringtail rendezvous with torchelastic (idempotent)."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    try:
        rendezvous_handler_registry.register(BACKEND, RingtailRendezvousHandler)
    except ValueError:
        pass  # already registered


def _master_addr_for_workers():
    """Makes the agent of node 0 advertise --master_addr (not its FQDN) as
    the workers' MASTER_ADDR when the rendezvous is ringtail's."""
    from torch.distributed.launcher import api
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    original = api._get_addr_and_port

    def get_addr_and_port(params):
        if params.backend == BACKEND:
            host, _ = parse_rendezvous_endpoint(params.endpoint, default_port=29500)
            return host, None
        return original(params)

    api._get_addr_and_port = get_addr_and_port


def _secret(nnodes):
    if os.environ.get("RINGTAIL_SECRET") or os.environ.get("RINGTAIL_SECRET_FILE"):
        return
    if env_bool("RINGTAIL_INSECURE"):
        return
    if nnodes > 1:
        raise SystemExit(
            "ringtail-torchrun: more than one node needs the same RINGTAIL_SECRET (or RINGTAIL_SECRET_FILE) "
            "on every node, or RINGTAIL_INSECURE=1"
        )
    os.environ["RINGTAIL_SECRET"] = secrets.token_hex(16)


def _say_if_not_installed():
    """One line when the workers will not have the backend by themselves:
    ringtail_torch runs from a source tree (PYTHONPATH) rather than its
    installed wheel, whose .pth registers it in every worker."""
    if "_ringtail_torch_autoload" in sys.modules:
        return
    if env_bool("RINGTAIL_TORCH_AUTOLOAD", True):
        print('ringtail-torchrun: ringtail_torch is not installed in %s (it runs from %s): scripts need '
              '`import ringtail_torch` before init_process_group("ringtail"); the installed wheel registers '
              'the backend by itself (docs/pytorch.md, "Install and run")'
              % (sys.executable, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), file=sys.stderr)


def main(argv=None):
    """Entry point of ringtail-torchrun."""
    from torch.distributed import run as trun

    _say_if_not_installed()
    patch_std()
    register()
    _master_addr_for_workers()
    args = trun.parse_args(sys.argv[1:] if argv is None else argv)
    if args.rdzv_backend == "static" and not args.standalone:
        min_nodes, max_nodes = trun.parse_min_max_nnodes(args.nnodes)
        if min_nodes != max_nodes:
            # An elastic job: torchelastic's own c10d rendezvous (nodes may
            # come and go between MIN and MAX, --max-restarts restarts every
            # worker on a failure), on --master_addr:--master_port unless
            # --rdzv_endpoint says otherwise; the workers' process groups
            # are ringtail's, formed again in every round.
            args.rdzv_backend = "c10d"
            if not args.rdzv_endpoint:
                args.rdzv_endpoint = "%s:%d" % (args.master_addr, args.master_port)
            _secret(max_nodes)
            trun.run(args)
            return
        args.rdzv_backend = BACKEND
        if not args.rdzv_endpoint:
            args.rdzv_endpoint = "%s:%d" % (args.master_addr, args.master_port)
        conf = [c for c in args.rdzv_conf.split(",") if c and not c.startswith("rank=")]
        args.rdzv_conf = ",".join(conf + ["rank=%d" % args.node_rank])
        _secret(max_nodes)
    trun.run(args)


if __name__ == "__main__":
    main()
