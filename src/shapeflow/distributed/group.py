"""The process group: MPI's world, with PyTorch's names (`init_process_group`, `get_rank`).

MPI comes from PyPI (`pip install mpi4py mpich`); `mpiexec -n 2 python train.py` (or
`shapeflow run -n 2 train.py`) starts the ranks. Without mpiexec a process is a world of one.
Once the group is initialized an uncaught exception on any rank aborts every rank, with the
failing rank's traceback printed: a crash never leaves the others waiting in a collective.

Failure detection: every collective waits through `wait()`, which raises DistributedError
instead of waiting forever when the group's timeout passes (default 30 minutes, as PyTorch)
or when a peer is gone. A peer is gone when its process has exited: each rank keeps a small
record in shared memory (its pid, whether it has left the script, the collective it is in),
written at init and marked "left" by an atexit hook that runs before MPI's finalize (which
would otherwise wait for the peers without a word). These records need every rank on one
host, started by MPICH's mpiexec (hydra); elsewhere only the timeout applies. After such an
error the group is broken: later collectives refuse, and at exit the rank aborts the job, so
it ends non-zero.
"""

from __future__ import annotations

import atexit
import importlib.util
import mmap
import os
import shutil
import struct
import sys
import tempfile
import time
import traceback
from datetime import timedelta

from ..errors import ShapeflowError

INSTALL = "pip install mpi4py mpich   (or: make test, whose extra installs both)"
DEFAULT_TIMEOUT = timedelta(minutes=30)  # as torch.distributed's default


class DistributedError(ShapeflowError, RuntimeError):
    """A process-group problem: MPI missing, not initialized, ranks that disagree."""


class _World:
    """This process's view of the group (one per process: MPI's world is per process)."""

    comm = None  # mpi4py's COMM_WORLD once initialized
    MPI = None
    previous_excepthook = None
    timeout = DEFAULT_TIMEOUT.total_seconds()
    peers: _Peers | None = None  # the ranks' shared records, where all are on this host
    broken: str | None = None  # why the group is unusable, after a timeout or a lost peer
    at_exit = False  # whether _at_exit is registered
    aborting = False  # MPI's abort is under way (its exit may run the atexit hooks)


world = _World()

# A rank's record: pid, state, collectives started, whether in one now, since when, its name
_LAYOUT = struct.Struct("<qqqqd120s")
_RECORD = _LAYOUT.size
_JOINING, _JOINED, _LEFT = 1, 2, 3
_SPIN = 2e-3  # seconds of testing (and yielding) before a wait sleeps: quick ones never do
_NAP = 5e-4  # the longest sleep between two tests (each one moves MPI's transfers on)
_LOOK = 0.05  # seconds between looks at the peers' records and the clock
_GRACE = 1.0  # a peer that left may have sent its part: its collective may still finish


def _proc_stat(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat's fields from the state on (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has exited)."""
    fields = _proc_stat(pid)
    return fields is not None and fields[0] != b"Z"


def _children(ppid: int) -> set[int]:
    """The live processes whose parent is `ppid`."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _proc_stat(int(entry))
            if fields is not None and fields[0] != b"Z" and int(fields[1]) == ppid:
                found.add(int(entry))
    return found


def _ranks(ranks: list[int]) -> str:
    """`rank 1`, `ranks 1, 3`: for messages."""
    return ("ranks " if len(ranks) > 1 else "rank ") + ", ".join(map(str, ranks))


def _job_folder() -> str | None:
    """Where this job's ranks keep their records: named after the hydra proxy that started
    them all (its pid and start time); None unless every rank is its child, on this host."""
    size = int(os.environ.get("PMI_SIZE", "1"))
    if size < 2 or os.environ.get("MPI_LOCALNRANKS") != str(size) or "PMI_RANK" not in os.environ:
        return None
    ppid = os.getppid()
    stat = _proc_stat(ppid)
    try:
        with open(f"/proc/{ppid}/cmdline", "rb") as f:
            command = f.read().split(b"\0")[0]
    except OSError:
        return None
    if stat is None or not os.path.basename(command).startswith(b"hydra_pmi_proxy"):
        return None
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"shapeflow-{os.getuid()}-{ppid}-{stat[19].decode()}")


class _Peers:
    """Every rank's record, one small file each, mapped into memory: a rank writes its own,
    reads the others' (to tell a peer that exited from one that is slow)."""

    def __init__(self, folder: str, rank: int, size: int) -> None:
        self.folder, self.rank, self.size, self.count = folder, rank, size, 0
        self.maps: list[mmap.mmap] = []
        os.makedirs(folder, mode=0o700, exist_ok=True)
        mine = self._path(rank)
        with open(mine + ".new", "wb") as f:  # renamed: a peer never sees half a record
            f.write(_LAYOUT.pack(os.getpid(), _JOINING, 0, 0, 0.0, b""))
        os.replace(mine + ".new", mine)

    def _path(self, rank: int) -> str:
        return os.path.join(self.folder, f"rank{rank}")

    def rendezvous(self, timeout: float) -> None:
        """Wait (before MPI's init, which would wait forever) until every rank has written
        its record; raise if a rank exited before it did, or after `timeout` seconds."""
        start = last_look = time.monotonic()
        short_since = None
        while True:
            missing = [r for r in range(self.size) if not os.path.exists(self._path(r))]
            if not missing:
                break
            now = time.monotonic()
            if now - last_look >= _LOOK:
                last_look = now
                here = {self._read_file(r)[0] for r in range(self.size) if r not in missing}
                # fewer live processes not yet here than missing ranks: some rank exited
                if len(_children(os.getppid()) - here) < len(missing):
                    short_since = short_since or now
                else:
                    short_since = None
                if short_since is not None and now - short_since >= _GRACE:
                    raise DistributedError(
                        f"init_process_group: {_ranks(missing)} exited before calling "
                        f"init_process_group (rank {self.rank} waited {now - start:.1f} s)",
                        hint="see the failing rank's own error above")
                if now - start >= timeout:
                    raise DistributedError(
                        f"init_process_group timed out after {timedelta(seconds=timeout)} "
                        f"waiting for {_ranks(missing)} to call it",
                        hint="every rank must call init_process_group; pass "
                        "init_process_group(timeout=timedelta(...)) to wait longer")
            time.sleep(0.005)
        for r in range(self.size):
            with open(self._path(r), "r+b" if r == self.rank else "rb") as f:
                self.maps.append(mmap.mmap(f.fileno(), _RECORD, access=mmap.ACCESS_WRITE
                                           if r == self.rank else mmap.ACCESS_READ))

    def _read_file(self, rank: int) -> tuple:
        with open(self._path(rank), "rb") as f:
            return _LAYOUT.unpack(f.read(_LAYOUT.size))

    def remove_folder(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def mark(self, state: int) -> None:
        struct.pack_into("<q", self.maps[self.rank], 8, state)

    def enter(self, op: str) -> None:
        """This rank starts collective `op`: its record says so."""
        self.count += 1
        struct.pack_into("<qqd120s", self.maps[self.rank], 16, self.count, 1, time.time(),
                         op.encode()[:120])

    def leave(self) -> None:
        struct.pack_into("<q", self.maps[self.rank], 24, 0)

    def gone(self) -> list[int]:
        """The ranks whose process has left the script or no longer runs."""
        out = []
        for r, m in enumerate(self.maps):
            if r != self.rank:
                pid, state = struct.unpack_from("<qq", m, 0)
                if state == _LEFT or not _alive(pid):
                    out.append(r)
        return out

    def describe(self) -> str:
        """What each rank is doing, for an error: which collective, or none, or exited."""
        now, parts = time.time(), []
        for r, m in enumerate(self.maps):
            pid, state, count, busy, since, name = _LAYOUT.unpack_from(m, 0)
            name = name.rstrip(b"\0").decode(errors="replace") or "none"
            if state == _LEFT or not _alive(pid):
                parts.append(f"rank {r} exited (its last collective: #{count}, {name}, "
                             f"begun {now - since:.1f} s ago)" if count else
                             f"rank {r} exited before any collective")
            elif busy:
                parts.append(f"rank {r} in {name} (its collective #{count}) for "
                             f"{now - since:.1f} s")
            elif count:
                parts.append(f"rank {r} in no collective (it has run {count}; the last: "
                             f"{name})")
            else:
                parts.append(f"rank {r} in no collective (it has run none yet)")
        return "; ".join(parts)


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


def _seconds(timeout, where: str) -> float:
    """A timeout given as a timedelta or a number of seconds, in seconds."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise DistributedError(f"{where}: timeout must be a positive timedelta, got "
                               f"{timeout!r}", hint="e.g. timeout=timedelta(minutes=5)")
    return float(seconds)


def init_process_group(backend: str = "mpi", *, init_method=None, world_size: int = -1,
                       rank: int = -1, timeout=None) -> None:
    """Join the group of all ranks mpiexec started (rank and size come from MPI); idempotent.
    `timeout` (default 30 minutes) bounds every wait of a collective, and of this call."""
    if backend not in ("mpi", None):
        raise DistributedError(
            f"init_process_group: backend {backend!r} is not available: shapeflow runs its "
            "collectives on MPI", hint="use backend='mpi' (the default), launched by mpiexec")
    seconds = _seconds(DEFAULT_TIMEOUT if timeout is None else timeout, "init_process_group")
    if world.peers is None and world.MPI is None:
        folder = _job_folder()
        if folder is not None:  # before MPI's init, which hangs if a rank never calls it
            peers = _Peers(folder, int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"]))
            try:
                peers.rendezvous(seconds)
            except BaseException:
                peers.remove_folder()
                raise
            world.peers = peers
    MPI = _mpi()
    comm = MPI.COMM_WORLD
    if world.peers is not None and world.MPI is None:
        # every rank has mapped every record: the files can go
        wait(comm.Ibarrier(), "init_process_group", seconds)
        if comm.Get_rank() == 0:
            world.peers.remove_folder()
        world.peers.mark(_JOINED)
    world.MPI = MPI
    if comm.Get_size() > 1 and not world.at_exit:
        atexit.register(_at_exit)  # after mpi4py's import: runs before MPI's finalize
        world.at_exit = True
    for name, given, actual in (("world_size", world_size, comm.Get_size()),
                                ("rank", rank, comm.Get_rank())):
        if given not in (-1, None) and given != actual:
            raise DistributedError(
                f"init_process_group: {name}={given}, but MPI says {actual}",
                hint="let mpiexec -n N set rank and world size; do not pass them")
    world.timeout = seconds
    if world.comm is not None:
        return
    world.comm = comm
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
    time.sleep(0.2)  # the launcher forwards output asynchronously: let it read the traceback
    world.aborting = True
    world.comm.Abort(1)


def _at_exit() -> None:
    """This rank leaves the script: peers still waiting for it learn so from its record. A
    broken group aborts the job instead (MPI's finalize would wait for the lost peer)."""
    if world.aborting:
        return
    if world.broken is not None and world.MPI is not None:
        rank = world.MPI.COMM_WORLD.Get_rank()
        sys.stdout.flush()
        sys.stderr.write(f"[rank {rank}] shapeflow.distributed: the process group broke "
                         f"({world.broken.splitlines()[0]}); aborting all ranks\n")
        sys.stderr.flush()
        world.aborting = True
        world.MPI.COMM_WORLD.Abort(1)
    if world.peers is not None:
        world.peers.mark(_LEFT)


def is_initialized() -> bool:
    return world.comm is not None


def _comm():
    if world.comm is None:
        raise DistributedError(
            "the default process group is not initialized",
            hint="call sf.distributed.init_process_group() first (under mpiexec -n N)")
    if world.broken is not None:
        raise DistributedError(f"the process group is broken: {world.broken}",
                               hint="a collective failed on this rank before; the job "
                               "must end (an uncaught error aborts every rank)")
    return world.comm


def get_rank(group=None) -> int:
    """This process's rank (0 when the group is not initialized, as a world of one)."""
    return 0 if world.comm is None else world.comm.Get_rank()


def get_world_size(group=None) -> int:
    """How many ranks the group has (1 when it is not initialized)."""
    return 1 if world.comm is None else world.comm.Get_size()


def wait(request, op: str, timeout: float | None = None) -> None:
    """MPI's Wait for `request`, the non-blocking form of collective `op`, but bounded: a
    peer that exited, or the group's timeout passing, raises DistributedError."""
    peers = world.peers
    if peers is not None:
        peers.enter(op)
    try:
        if not request.Test():
            _wait_long(request, op, world.timeout if timeout is None else timeout)
    finally:
        if peers is not None:
            peers.leave()


def _wait_long(request, op: str, limit: float) -> None:
    start = last_look = time.monotonic()
    nap, gone_since = 0.0, None
    while not request.Test():
        now = time.monotonic()
        if now - last_look >= _LOOK:
            last_look = now
            gone = world.peers.gone() if world.peers is not None else []
            gone_since = (gone_since or now) if gone else None
            if gone and now - gone_since >= _GRACE:
                raise _broke(
                    f"{op}: {_ranks(gone)} exited while rank {get_rank()} waited here, so "
                    "the collective can never finish",
                    "every rank must run the same collectives: look for a rank that "
                    "returned early (one batch fewer, a sys.exit, an error it caught)")
            if now - start >= limit:
                raise _broke(
                    f"{op} timed out on rank {get_rank()} after {now - start:.1f} s (the "
                    f"group's timeout is {timedelta(seconds=limit)})",
                    "a rank is slow or waits in another collective (see what each does); "
                    "init_process_group(timeout=timedelta(...)) waits longer")
        if now - start >= _SPIN:
            time.sleep(nap)
            nap = min(_NAP, nap * 2 + 1e-5)
        else:  # lets a peer on this core run (ranks may share cores), no sleep
            os.sched_yield()


def _broke(message: str, hint: str) -> DistributedError:
    """The group is unusable from now on; the error says what each rank was doing."""
    if world.peers is not None:
        message += f". Ranks: {world.peers.describe()}"
    world.broken = message
    return DistributedError(message, hint=hint + "; the job ends with an error")


def barrier(group=None, async_op: bool = False, device_ids=None) -> None:
    """Wait until every rank reaches this call."""
    wait(_comm().Ibarrier(), "barrier")


def destroy_process_group(group=None) -> None:
    """Leave the group (MPI itself finalizes at exit); init_process_group may run again."""
    if world.comm is not None and world.previous_excepthook is not None:
        sys.excepthook = world.previous_excepthook
    world.comm = None
    world.previous_excepthook = None
