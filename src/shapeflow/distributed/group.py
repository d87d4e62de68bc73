"""The process group: MPI's world, with PyTorch's names (`init_process_group`, `get_rank`).

MPI comes from PyPI (`pip install mpi4py mpich`); `mpiexec -n 2 python train.py` (or
`shapeflow run -n 2 train.py`) starts the ranks. Without mpiexec a process is a world of one.
Once the group is initialized an uncaught exception on any rank aborts every rank, with the
failing rank's traceback printed: a crash never leaves the others waiting in a collective.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback

from ..errors import ShapeflowError

INSTALL = "pip install mpi4py mpich   (or: make test, whose extra installs both)"


class DistributedError(ShapeflowError, RuntimeError):
    """A process-group problem: MPI missing, not initialized, ranks that disagree."""


class _World:
    """This process's view of the group (one per process: MPI's world is per process)."""

    comm = None  # mpi4py's COMM_WORLD once initialized
    MPI = None
    previous_excepthook = None


world = _World()


def is_available() -> bool:
    """Whether mpi4py (and so an MPI) can be imported here."""
    return importlib.util.find_spec("mpi4py") is not None


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(
            f"shapeflow.distributed needs MPI through mpi4py, which is not importable ({e})",
            hint=INSTALL) from None
    return MPI


def init_process_group(backend: str = "mpi", *, init_method=None, world_size: int = -1,
                       rank: int = -1, timeout=None) -> None:
    """Join the group of all ranks mpiexec started (rank and size come from MPI); idempotent."""
    if backend not in ("mpi", None):
        raise DistributedError(
            f"init_process_group: backend {backend!r} is not available: shapeflow runs its "
            "collectives on MPI", hint="use backend='mpi' (the default), launched by mpiexec")
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    for name, given, actual in (("world_size", world_size, comm.Get_size()),
                                ("rank", rank, comm.Get_rank())):
        if given not in (-1, None) and given != actual:
            raise DistributedError(
                f"init_process_group: {name}={given}, but MPI says {actual}",
                hint="let mpiexec -n N set rank and world size; do not pass them")
    if world.comm is not None:
        return
    world.comm, world.MPI = comm, MPI
    if comm.Get_size() > 1:
        world.previous_excepthook = sys.excepthook
        sys.excepthook = _abort_all


def _abort_all(kind, value, tb) -> None:
    """An uncaught exception here: print it with this rank's number, then stop every rank."""
    rank = world.comm.Get_rank()
    text = "".join(traceback.format_exception(kind, value, tb))
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.splitlines()))
    sys.stderr.write(f"[rank {rank}] shapeflow.distributed: aborting all ranks\n")
    sys.stderr.flush()
    world.comm.Abort(1)


def is_initialized() -> bool:
    return world.comm is not None


def _comm():
    if world.comm is None:
        raise DistributedError(
            "the default process group is not initialized",
            hint="call sf.distributed.init_process_group() first (under mpiexec -n N)")
    return world.comm


def get_rank(group=None) -> int:
    """This process's rank (0 when the group is not initialized, as a world of one)."""
    return 0 if world.comm is None else world.comm.Get_rank()


def get_world_size(group=None) -> int:
    """How many ranks the group has (1 when it is not initialized)."""
    return 1 if world.comm is None else world.comm.Get_size()


def barrier(group=None, async_op: bool = False, device_ids=None) -> None:
    """Wait until every rank reaches this call."""
    _comm().Barrier()


def destroy_process_group(group=None) -> None:
    """Leave the group (MPI itself finalizes at exit); init_process_group may run again."""
    if world.comm is not None and world.previous_excepthook is not None:
        sys.excepthook = world.previous_excepthook
    world.comm = None
    world.previous_excepthook = None
