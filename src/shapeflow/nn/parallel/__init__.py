"""Data parallelism over MPI ranks (as `torch.nn.parallel`)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
