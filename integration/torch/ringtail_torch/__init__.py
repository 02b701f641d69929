"""ringtail_torch: ringtail for PyTorch.

``import ringtail_torch`` registers the ``ringtail`` c10d backend, so

    import ringtail_torch
    dist.init_process_group("ringtail")

runs every collective (DDP's included) on ringtail. It also makes ``env://``
work under ``ringtail run`` (see rendezvous.py). Straggler handling:
HeteroBatchSampler / HeteroSampler give slow ranks less data,
set_local_batch / local_batch weight the gradients by data amount (Eq. 7),
arrivals / gather_arrivals expose when each rank reached each collective.
HookState + allreduce_hook run DDP's gradient allreduce on ringtail for jobs
keeping another backend. ``ringtail-torchrun`` (torchrun.py) is torchrun
with a ringtail rendezvous.
"""

import torch.distributed as dist

from ._lib import RingtailError, library_path
from .backend import BACKEND_NAME, Arrival, ProcessGroupRingtail, create_process_group
from .calls import arrivals, gather_arrivals, local_batch, mark_step, monitored_barrier, set_local_batch
from .hooks import HookState, allreduce_hook
from .rendezvous import bootstrap_store, install_env_rendezvous
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
    "allreduce_hook",
    "arrivals",
    "bootstrap_store",
    "gather_arrivals",
    "library_path",
    "local_batch",
    "mark_step",
    "measure_weights",
    "monitored_barrier",
    "set_local_batch",
    "split_counts",
    "throughput_weights",
]


def _register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create_process_group)
    install_env_rendezvous()


_register()
