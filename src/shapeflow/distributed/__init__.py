"""Training on several processes over MPI, with `torch.distributed`'s names.

    sf.distributed.init_process_group()          # under `mpiexec -n 2 python train.py`
    model = sf.nn.parallel.DistributedDataParallel(model)

ZeRO: `from shapeflow.distributed.optim import ZeroRedundancyOptimizer`.
"""

from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    broadcast,
    gather,
    reduce_scatter_tensor,
    scatter,
)
from .group import (
    DistributedError,
    barrier,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
)

__all__ = [
    "DistributedError", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor",
    "all_reduce", "barrier", "broadcast", "destroy_process_group", "gather", "get_rank",
    "get_world_size", "init_process_group", "is_available", "is_initialized",
    "reduce_scatter_tensor", "scatter",
]

