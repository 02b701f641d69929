"""ringtail_torch: ringtail for PyTorch.

``import ringtail_torch`` registers the ``ringtail`` c10d backend, so

    import ringtail_torch
    dist.init_process_group("ringtail")

runs every collective (DDP's included) on ringtail. It also makes ``env://``
work under ``ringtail run`` (see rendezvous.py). Straggler handling:
HeteroBatchSampler / HeteroSampler give slow ranks less data,
set_local_batch / local_batch weight the gradients by data amount (Eq. 7),
arrivals / gather_arrivals expose when each rank reached each collective;
report_progress puts the training's loss and accuracy on the dashboard.
HookState + allreduce_hook run DDP's gradient allreduce on ringtail for jobs
keeping another backend. enable_straggler_handling (or the environment
variable RINGTAIL_DDP_STRAGGLER=star|exact|adaptive, read at import) puts
ringtail's straggler driver — eviction with bounded staleness, or the exact
overlap mode — under an unmodified DDP script (straggler.py). ``ringtail-torchrun`` (torchrun.py) is torchrun
with a ringtail rendezvous.
"""

import inspect

import torch.distributed as dist

from ._lib import RingtailError, library_path
from .backend import BACKEND_NAME, Arrival, ProcessGroupRingtail, create_process_group
from .calls import arrivals, gather_arrivals, local_batch, mark_step, monitored_barrier, set_local_batch
from .hooks import HookState, allreduce_hook
from .progress import report_progress
from .rendezvous import bootstrap_store, install_env_rendezvous
from .straggler import StragglerState, enable_straggler_handling, straggler_hook, straggler_state
from .straggler import install_from_env as _install_straggler_from_env
from .sampler import HeteroBatchSampler, HeteroSampler, measure_weights, split_counts, throughput_weights

__version__ = "0.1.0"

__all__ = [
    "Arrival",
    "BACKEND_NAME",
    "HeteroBatchSampler",
    "HeteroSampler",
    "HookState",
    "ProcessGroupRingtail",
    "RingtailError",
    "StragglerState",
    "allreduce_hook",
    "arrivals",
    "bootstrap_store",
    "enable_straggler_handling",
    "gather_arrivals",
    "library_path",
    "local_batch",
    "mark_step",
    "measure_weights",
    "monitored_barrier",
    "report_progress",
    "set_local_batch",
    "split_counts",
    "straggler_hook",
    "straggler_state",
    "throughput_weights",
]


def _register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        # torch >= 2.0 asks which devices the backend takes: CPU tensors,
        # and CUDA tensors staged through pinned host memory.
        if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
            dist.Backend.register_backend(BACKEND_NAME, create_process_group, devices=["cpu", "cuda"])
        else:
            dist.Backend.register_backend(BACKEND_NAME, create_process_group)
    install_env_rendezvous()
    _install_straggler_from_env()


_register()
