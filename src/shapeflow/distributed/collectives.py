"""Collectives on tensors, with PyTorch's names: the tensors' NumPy buffers go to MPI as they
are (no pickling). Before each payload a small all-gather of every rank's shapes and dtypes
makes a mismatch the same error on all ranks instead of a hang or garbage. Every wait is
bounded (`group.wait`): a peer that exited or the group's timeout raises DistributedError."""

from __future__ import annotations

import numpy as np

from ..dtypes import bfloat16, float16
from ..errors import DeviceError, DTypeError, ShapeError
from ..shape import format_shape
from ..tensor import Tensor
from .group import DistributedError, _comm, _seconds, wait, world


class ReduceOp:
    """How all_reduce combines (as `torch.distributed.ReduceOp`)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"


_MPI_OPS = {"sum": "SUM", "avg": "SUM", "product": "PROD", "max": "MAX", "min": "MIN"}
_HEAD = 16  # int64s each rank sends first: failed?, signature length, its first 14
_NAMES: dict = {}  # dtype -> its name as integers (from the name: alike on every rank)


class Work:
    """The handle of an async collective: `wait()` finishes it (as torch's Work)."""

    def __init__(self, request=None, then=None, op: str = "collective") -> None:
        self._request, self._then, self._op, self._done = request, then, op, request is None

    def wait(self, timeout=None) -> bool:
        """Finish the collective; `timeout` (a timedelta) bounds it instead of the group's."""
        if not self._done:
            seconds = None if timeout is None else _seconds(timeout, f"{self._op}: wait")
            wait(self._request, self._op, seconds)
            self._done = True
            if self._then is not None:
                self._then()
        return True

    def is_completed(self) -> bool:
        if not self._done and self._request.Test():
            self.wait()
        return self._done


def _buffer(t: Tensor, op: str) -> np.ndarray:
    if not isinstance(t, Tensor):
        raise DistributedError(f"{op}: expected a shapeflow Tensor, got {type(t).__name__}")
    if t._data is None:
        raise DeviceError(f"{op}: a {t.device} tensor has no data to communicate", op=op,
                          hint="collectives run on cpu tensors")
    return t._data


def _signature(arrays) -> list[int]:
    """The arrays' dtypes (their names' bytes), numbers of dims and every dim, as integers:
    two ranks' lists are equal exactly when their arrays agree (no hash, no cut)."""
    flat = [len(arrays)]
    for a in arrays:
        name = _NAMES.get(a.dtype)
        if name is None:  # (dtype.name is slow: once per dtype)
            raw = a.dtype.name.encode()
            name = _NAMES[a.dtype] = [len(raw), *(int.from_bytes(raw[i:i + 8], "little")
                                                  for i in range(0, len(raw), 8))]
        flat += [*name, a.ndim, *a.shape]
    return flat


def _decode(flat: list[int]) -> list[tuple[str, tuple]]:
    """(dtype name, shape) of each array a signature describes."""
    out, i = [], 1
    for _ in range(flat[0]):
        size, chunks = flat[i], -(-flat[i] // 8)
        name = b"".join(c.to_bytes(8, "little") for c in flat[i + 1:i + 1 + chunks])
        i += 1 + chunks
        out.append((name[:size].decode(), tuple(flat[i + 1:i + 1 + flat[i]])))
        i += 1 + flat[i]
    return out


def _agreed(comm, op: str, local):
    """Run this rank's checks of its arguments (`local()` -> (result, arrays that every rank
    must pass alike)), then compare with every rank, before any data moves: a rank whose
    checks failed, or dtypes and shapes that differ, raise on every rank, never a hang. The
    first all-gather has a fixed size; longer signatures (many dims) take a second one."""
    try:
        result, arrays = local()
        failed = None
    except Exception as e:  # any error: this rank must still tell the others
        result, arrays, failed = None, (), e
    sig = [] if failed is not None else _signature(arrays)
    head = np.zeros(_HEAD, np.int64)
    head[0], head[1] = failed is not None, len(sig)
    head[2:2 + min(len(sig), _HEAD - 2)] = sig[:_HEAD - 2]
    every = np.empty((comm.Get_size(), _HEAD), np.int64)
    wait(comm.Iallgather(head, every), op)
    if failed is not None:
        raise failed
    rejected = np.nonzero(every[:, 0])[0].tolist()
    if rejected:
        raise ShapeError(f"{op}: rank(s) {rejected} rejected their arguments (their error says "
                         "why), so no rank ran it", op=op,
                         hint="every rank must call the same collective with fitting tensors")
    lengths = every[:, 1].tolist()
    if max(lengths) <= _HEAD - 2:  # the whole signatures came: equal rows, equal arguments
        if (every == head).all():
            return result
        rows = every[:, 2:]
    else:  # every rank sees it: all send their whole signature, padded to the longest
        mine = np.zeros(max(lengths), np.int64)
        mine[:len(sig)] = sig
        rows = np.empty((comm.Get_size(), len(mine)), np.int64)
        wait(comm.Iallgather(mine, rows), op)
        if (every[:, 1] == len(sig)).all() and (rows == mine).all():
            return result
    raise _mismatch(op, [_decode(row[:n].tolist()) for row, n in zip(rows, lengths)])


def _mismatch(op: str, passed: list) -> ShapeError | DTypeError:
    """The same error on every rank: DTypeError when only dtypes differ, else ShapeError."""
    ranks: dict = {}
    for r, arrays in enumerate(passed):
        ranks.setdefault(tuple(arrays), []).append(r)
    what = "; ".join(("ranks " if len(rs) > 1 else "rank ") + ", ".join(map(str, rs)) + ": "
                     + ", ".join(f"{format_shape(shape)} {dtype}" for dtype, shape in arrays)
                     for arrays, rs in ranks.items())
    kinds = {tuple(dtype for dtype, _ in arrays) for arrays in passed}
    shapes = {tuple(shape for _, shape in arrays) for arrays in passed}
    if len(kinds) > 1 and len(shapes) == 1:
        return DTypeError(f"{op}: the ranks passed tensors of different dtypes ({what})", op=op,
                          hint="every rank must pass tensors of the same dtype")
    return ShapeError(f"{op}: the ranks passed tensors of different shapes ({what})", op=op,
                      hint="every rank must call the same collective with tensors of the "
                      "same shape")


def _mpi_op(op) -> object:
    name = _MPI_OPS.get(op if isinstance(op, str) else str(op).lower())
    if name is None:
        raise DistributedError(f"all_reduce: unknown op {op!r}",
                               hint="use ReduceOp.SUM, AVG, PRODUCT, MAX or MIN")
    return getattr(world.MPI, name)


def _through_float32(t: Tensor):
    """MPI has no 16-bit floats: such tensors travel as float32 and come back rounded."""
    return t.dtype in (bfloat16, float16)


def _bytes(a: np.ndarray) -> np.ndarray:
    """A contiguous array's bytes, for collectives that only copy: MPI then needs no type
    for the dtype (bfloat16 has none)."""
    return a.reshape(-1).view(np.uint8)


def _finish(t: Tensor, work_array: np.ndarray, scale: float | None):
    def done() -> None:
        if scale is not None:
            work_array[...] /= scale
        if work_array is not t._data:
            t._data[...] = work_array.astype(t._data.dtype, copy=False)
        t._version[0] += 1
    return done


def _run(request, op: str, async_op: bool, then) -> Work | None:
    """The posted non-blocking `request`: a Work handle, or waited for (bounded) here."""
    if async_op:
        return Work(request, then, op)
    wait(request, op)
    then()
    return None


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Combine `tensor` over all ranks, in place (sum, avg, product, max, min)."""
    comm = _comm()

    def local():
        buf = _buffer(tensor, "all_reduce")
        mpi_op = _mpi_op(op)
        if str(op).lower() == "avg" and buf.dtype.kind not in "fc":
            raise DistributedError("all_reduce: ReduceOp.AVG needs a floating-point tensor, "
                                   f"got {tensor.dtype}", hint="use SUM and divide yourself")
        return (buf, mpi_op), (buf,)
    buf, mpi_op = _agreed(comm, "all_reduce", local)
    wide = _through_float32(tensor)
    work = buf if buf.flags.c_contiguous and not wide else (
        np.ascontiguousarray(buf, np.float32 if wide else None))
    scale = comm.Get_size() if str(op).lower() == "avg" else None
    in_place = world.MPI.IN_PLACE
    return _run(comm.Iallreduce(in_place, work, mpi_op), "all_reduce", async_op,
                _finish(tensor, work, scale))


def broadcast(tensor: Tensor, src: int = 0, group=None, async_op: bool = False):
    """Copy rank `src`'s tensor into every rank's, in place."""
    comm = _comm()

    def local():
        buf = _buffer(tensor, "broadcast")
        _check_rank(comm, src, "broadcast")
        return buf, (buf,)
    buf = _agreed(comm, "broadcast", local)
    work = buf if buf.flags.c_contiguous else np.ascontiguousarray(buf)
    raw = _bytes(work)
    return _run(comm.Ibcast(raw, root=src), "broadcast", async_op, _finish(tensor, work, None))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None,
                           async_op: bool = False):
    """Every rank's input, concatenated along dim 0 (or stacked: output [N, *input])."""
    comm = _comm()
    n = comm.Get_size()

    def local():
        out = _buffer(output_tensor, "all_gather_into_tensor")
        inp = _buffer(input_tensor, "all_gather_into_tensor")
        if out.size != n * inp.size or out.dtype != inp.dtype:
            raise ShapeError(
                f"all_gather_into_tensor: output {format_shape(out.shape)} "
                f"{output_tensor.dtype} must hold {n} inputs of {format_shape(inp.shape)} "
                f"{input_tensor.dtype}", op="all_gather_into_tensor",
                hint="output shape [world_size * d0, ...] or [world_size, *input.shape], "
                "same dtype")
        return (out, inp), (inp,)
    out, inp = _agreed(comm, "all_gather_into_tensor", local)
    src = np.ascontiguousarray(inp)
    work = out if out.flags.c_contiguous else np.empty_like(out, order="C")
    a, b = _bytes(src), _bytes(work)
    return _run(comm.Iallgather(a, b), "all_gather_into_tensor", async_op,
                _finish(output_tensor, work, None))


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Rank i's tensor into tensor_list[i] on every rank."""
    comm = _comm()
    n = comm.Get_size()

    def local():
        if len(tensor_list) != n:
            raise ShapeError(f"all_gather: tensor_list holds {len(tensor_list)} tensors for "
                             f"{n} ranks", op="all_gather", hint="one tensor per rank")
        buf = _buffer(tensor, "all_gather")
        for t in tensor_list:
            if _buffer(t, "all_gather").shape != buf.shape or t._data.dtype != buf.dtype:
                raise ShapeError(f"all_gather: every tensor of tensor_list must be "
                                 f"{format_shape(buf.shape)} {tensor.dtype}, got "
                                 f"{format_shape(t.shape)} {t.dtype}", op="all_gather")
        return buf, (buf,)
    buf = _agreed(comm, "all_gather", local)
    work = np.empty((n, *buf.shape), buf.dtype)
    src = np.ascontiguousarray(buf)
    a, b = _bytes(src), _bytes(work)

    def then() -> None:
        for i, t in enumerate(tensor_list):
            t._data[...] = work[i]
            t._version[0] += 1
    return _run(comm.Iallgather(a, b), "all_gather", async_op, then)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM, group=None,
                          async_op: bool = False):
    """Combine `input` over ranks and give rank i the i-th of its world_size equal chunks."""
    comm = _comm()
    n = comm.Get_size()

    def local():
        out = _buffer(output, "reduce_scatter_tensor")
        inp = _buffer(input, "reduce_scatter_tensor")
        if inp.size != n * out.size or out.dtype != inp.dtype:
            raise ShapeError(
                f"reduce_scatter_tensor: input {format_shape(inp.shape)} {input.dtype} must "
                f"be {n} chunks of the output {format_shape(out.shape)} {output.dtype}",
                op="reduce_scatter_tensor")
        return (out, inp, _mpi_op(op)), (inp,)
    out, inp, mpi_op = _agreed(comm, "reduce_scatter_tensor", local)
    wide = _through_float32(input)  # 16-bit floats are summed as float32
    src = np.ascontiguousarray(inp, np.float32 if wide else None)
    work = out if out.flags.c_contiguous and not wide else np.empty(
        out.shape, np.float32 if wide else out.dtype)
    scale = n if str(op).lower() == "avg" else None
    return _run(comm.Ireduce_scatter_block(src, work, mpi_op), "reduce_scatter_tensor",
                async_op, _finish(output, work, scale))


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0, group=None,
           async_op: bool = False):
    """Every rank's tensor into `gather_list` on rank `dst` (None on the others)."""
    comm = _comm()
    mine = comm.Get_rank() == dst

    def local():
        _check_rank(comm, dst, "gather")
        buf = _buffer(tensor, "gather")
        if mine and (gather_list is None or len(gather_list) != comm.Get_size()):
            raise ShapeError("gather: the dst rank needs a gather_list of one tensor per rank",
                             op="gather")
        return buf, (buf,)
    buf = _agreed(comm, "gather", local)
    work = np.empty((comm.Get_size(), *buf.shape), buf.dtype) if mine else None
    src = np.ascontiguousarray(buf)

    def then() -> None:
        if mine:
            for i, t in enumerate(gather_list):
                t._data[...] = work[i]
                t._version[0] += 1
    a, b = _bytes(src), None if work is None else _bytes(work)
    return _run(comm.Igather(a, b, root=dst), "gather", async_op, then)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0, group=None,
            async_op: bool = False):
    """Rank `src`'s scatter_list[i] into rank i's tensor."""
    comm = _comm()

    def local():
        _check_rank(comm, src, "scatter")
        buf = _buffer(tensor, "scatter")
        send = None
        if comm.Get_rank() == src:
            if scatter_list is None or len(scatter_list) != comm.Get_size():
                raise ShapeError("scatter: the src rank needs a scatter_list of one tensor "
                                 "per rank", op="scatter")
            send = np.stack([_buffer(t, "scatter") for t in scatter_list]).astype(buf.dtype)
            if send.shape[1:] != buf.shape:
                raise ShapeError(f"scatter: scatter_list tensors must be "
                                 f"{format_shape(buf.shape)}", op="scatter")
        return (buf, send), (buf,)
    buf, send = _agreed(comm, "scatter", local)
    work = buf if buf.flags.c_contiguous else np.empty_like(buf, order="C")
    a, b = None if send is None else _bytes(send), _bytes(work)
    return _run(comm.Iscatter(a, b, root=src), "scatter", async_op, _finish(tensor, work, None))


def _check_rank(comm, rank: int, op: str) -> None:
    if not 0 <= rank < comm.Get_size():
        raise DistributedError(f"{op}: rank {rank} is not in a group of {comm.Get_size()}")
