"""Whether this process is one of several ranks, for programs that run either way."""

from __future__ import annotations

import os


def launched_by_mpiexec() -> bool:
    """Whether mpiexec started this process as one of several ranks (its environment says)."""
    for size in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        if int(os.environ.get(size, "1")) > 1:
            return True
    return False


def data_parallel() -> tuple[int, int]:
    """(rank, world size): the process group joined when mpiexec started several ranks."""
    if not launched_by_mpiexec():
        return 0, 1
    from .group import get_rank, get_world_size, init_process_group

    init_process_group()
    return get_rank(), get_world_size()
