"""torch's own distributed test suite (torch 1.13's
torch.testing._internal.distributed.distributed_test, class
DistributedTest._DistTestBase driven by TestDistBackend, as torch's
test/distributed/test_distributed_spawn.py drives it) against ringtail.

The mode comes from TORCH_SUITE_MODE, set by run.py:

  gloo     torch's Gloo, untouched: the baseline.
  standin  the suite run for Gloo (BACKEND=gloo), every ProcessGroupGloo
           that torch builds replaced by ringtail's process group.
  plugin   ringtail registered the normal way (import ringtail_torch,
           BACKEND=ringtail), added to the suite's feature sets for what it
           has: ddp, subgroup, plugin. The tests the suite gates on the
           name "gloo" (or "gloo" and "nccl") when it is imported run too
           where the gate is one of CLAIMS, a feature ringtail has: run.py
           finds them (name_check_skips) and names them in TORCH_SUITE_UNSKIP,
           and this module lifts their skip. A gate not in CLAIMS stays.

Everything here happens when this module is imported, so it happens again
in every rank process the suite spawns (they import this module to find the
test class). The work-arounds that Debian's torch 1.13 on Python 3.11 needs
live here, not in ringtail_torch:

  - expecttest: torch's test utilities import it and no registry reachable
    here ships it; when it is missing a stand-in module with TestCase and
    ACCEPT = False is installed in sys.modules.
  - _set_ddp_with_replicated_tensor: TestDistBackend._run calls it with True,
    and that path imports torch 1.13's _shard package, which fails to import
    on Python 3.11. It is made a no-op (users' DDP never takes that path).
"""

import os
import sys
import types
import unittest

MODES = ("gloo", "standin", "plugin")
MODE = os.environ.get("TORCH_SUITE_MODE", "standin")
if MODE not in MODES:
    raise ValueError("TORCH_SUITE_MODE=%r: want one of %s" % (MODE, ", ".join(MODES)))

# The features ringtail claims in plugin mode: the suite's
# DistTestCases.backend_feature sets it joins. Not "gpu"/"cuda": the suite's
# GPU tests need one GPU per rank, and this suite runs on CPU.
PLUGIN_FEATURES = ("ddp", "subgroup", "plugin")

# The suite's import-time skips that are name checks, by the suite's own
# message, and the feature of ringtail's each one stands for: in plugin
# mode ringtail claims them (docs/pytorch-tests.md, "torch's own
# distributed suite"). A test whose body then branches on the name "gloo" and fails as a
# plugin is an artefact (artefacts.txt), with its reason.
CLAIMS = {
    "Only gloo backend supports timeouts": "collective timeouts in torch's words (ringtail rank R: Timed out in OP ...)",
    "GLOO Batch Send Recv CPU": "batch_isend_irecv of CPU tensors",
    "Only Gloo backend support sparse all reduce": "all_reduce(SUM) of sparse COO tensors",
    "Only Nccl & Gloo backend support DistributedDataParallel": "DistributedDataParallel (SyncBatchNorm's logging)",
    "get_future is only supported on mpi, nccl and gloo": "Work.get_future, and DDP's hooks on it",
    "The ringtail backend does not support DDP communication hook on CUDA devices": "DDP communication hooks (CPU; CUDA tensors are staged through host memory)",
    "Test requires backend to be one of {'gloo'}": "all_reduce_coalesced, monitored_barrier (wait_all_ranks, rank 0's timeout), scatter_object_list",
    "Test requires backend to be one of {'gloo', 'nccl'}": "the object collectives (all_gather_object, gather_object, broadcast_object_list)",  # the set in any order
    "Only Gloo and NCCL backends will have CUDA allReduce tested": "all_reduce of CUDA tensors (staged through host memory; these skip without a GPU per rank, as Gloo's do)",
    "Only Gloo and Nccl backend supports CUDA allReduce": "broadcast of CUDA tensors (as above)",
}

# The suite reads BACKEND when it is imported (its skip decorators) and when
# it runs (init_process_group): run.py sets it, this checks it.
_WANT_BACKEND = {"gloo": "gloo", "standin": "gloo", "plugin": "ringtail"}[MODE]
if os.environ.get("BACKEND") != _WANT_BACKEND:
    raise RuntimeError("TORCH_SUITE_MODE=%s needs BACKEND=%s, got %r" % (MODE, _WANT_BACKEND, os.environ.get("BACKEND")))


def _install_expecttest():
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        stand_in.ACCEPT = False
        sys.modules["expecttest"] = stand_in


_install_expecttest()

import torch.distributed.distributed_c10d as c10d  # noqa: E402
import torch.nn.parallel._replicated_tensor_ddp_utils as _replicated  # noqa: E402

# TestDistBackend._run imports the name from this module when it runs.
_replicated._set_ddp_with_replicated_tensor = lambda value: None

if MODE == "standin":
    from ringtail_torch.backend import create_process_group

    def _ringtail_as_gloo(store, rank, size, timeout=None):
        """ProcessGroupGloo's constructor, as c10d calls it, building
        ringtail's process group; its profiler events are named gloo:<op>,
        as the suite checks of a group built for Gloo."""
        if timeout is None:
            timeout = c10d.default_pg_timeout
        pg = create_process_group(store, rank, size, timeout)
        pg.profiling_prefix = "gloo:"
        return pg

    c10d.ProcessGroupGloo = _ringtail_as_gloo

if MODE == "plugin":
    import ringtail_torch  # noqa: F401  registers backend "ringtail"
    from torch.testing._internal.common_distributed import DistTestCases

    for _feature in PLUGIN_FEATURES:
        DistTestCases.backend_feature[_feature].add("ringtail")

from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


def _lift_skips(names):
    """Clears the suite's import-time skip of these tests (its decorators
    only mark the test function; wrappers copy the mark outwards)."""
    for name in names:
        fn = getattr(DistributedTest._DistTestBase, name, None)
        while fn is not None:
            if getattr(fn, "__unittest_skip__", False):
                fn.__unittest_skip__ = False
            fn = getattr(fn, "__wrapped__", None)


if MODE == "plugin":
    _lift_skips(n for n in os.environ.get("TORCH_SUITE_UNSKIP", "").split(",") if n)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """The suite's tests, each spawning WORLD_SIZE rank processes."""

    def setUp(self):
        super().setUp()
        self._spawn_processes()


def test_names():
    """The suite's test names, sorted."""
    return sorted(unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn))


def import_time_skips():
    """{test name: reason} for the tests the suite skips when it is
    imported (its sandcastle_skip_if / require_backend decorators), for the
    BACKEND this process imported it with."""
    out = {}
    for name in test_names():
        fn = getattr(TestDistBackendWithSpawn, name)
        if getattr(fn, "__unittest_skip__", False):
            out[name] = getattr(fn, "__unittest_skip_why__", "")
    return out


def backend_name():
    """The BACKEND the suite runs with."""
    return distributed_test.BACKEND
