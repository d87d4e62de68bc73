"""What the linear algebra ops share: their error class, input checks, LAPACK calls, and
ops with several outputs packed into one tensor."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError, ShapeflowError
from ...tensor import Tensor, describe


class LinAlgError(ShapeflowError, RuntimeError):
    """A matrix the factorization cannot handle: singular, not positive-definite, or a
    decomposition that did not converge (torch.linalg.LinAlgError, also a RuntimeError)."""

    kind = "LinAlgError"


def check_matrix(op: str, x: Tensor, square: bool = True, complex_ok: bool = False) -> None:
    """x is a (batch of) float32/float64 (or, where complex_ok, complex64/complex128)
    matrices, square where the op needs it."""
    if x.ndim < 2:
        raise ShapeError(f"{op}: expected a matrix or a batch of matrices (>= 2 dims), got "
                         f"{describe(x)}", op=op, operands=[("A", describe(x))])
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{op}: A must be batches of square matrices, but they are "
                         f"{x.shape[-2]} by {x.shape[-1]} matrices", op=op,
                         operands=[("A", describe(x))])
    check_float(op, x, complex_ok)


def check_float(op: str, x: Tensor, complex_ok: bool = False) -> None:
    if x.dtype in (_dt.float32, _dt.float64) or (complex_ok and x.dtype.is_complex):
        return
    kinds = "float32, float64, complex64 or complex128" if complex_ok else "float32 or float64"
    raise DTypeError(f"{op}: expected a {kinds} tensor, got {x.dtype}", op=op,
                     operands=[("A", describe(x))],
                     hint="convert with .float() or .double() (LAPACK has no 16-bit floats)")


def lapack(xp, op: str, what: str, fn, *arrays):
    """fn(*arrays) (a function of xp.linalg), its LinAlgError raised as shapeflow's, naming
    the op."""
    try:
        with xp.errstate(all="ignore"):
            return fn(*arrays)
    except xp.linalg.LinAlgError as e:
        raise LinAlgError(f"{op}: {what} ({e})", op=op) from None


def singular(op: str):
    return lambda: LinAlgError(f"{op}: the input is singular: it cannot be inverted", op=op)


def pack(xp, *arrays, batch: tuple):
    """Several outputs with the same batch dims as one array [*batch, total]."""
    # the tail size is spelled out: -1 cannot be inferred when a batch dim is 0
    flat = [a.reshape(batch + (math.prod(a.shape[len(batch):]),)) for a in arrays]
    return xp.concatenate(flat, axis=-1)


def unpack(packed: Tensor, shapes: list) -> list:
    """Views of a packed tensor as the outputs it holds (shapes without the batch dims)."""
    batch = tuple(packed.shape[:-1])
    out, start = [], 0
    for s in shapes:
        n = 1
        for d in s:
            n *= d
        part = packed[(Ellipsis, slice(start, start + n))]
        out.append(part.reshape(batch + tuple(s)))
        start += n
    return out


def split_grad(g: Tensor, shapes: list) -> list:
    """A packed gradient as one gradient per output; None for an output whose gradient is
    all zeros (not used), so backward formulas can skip its terms as PyTorch does."""
    parts = unpack(g, shapes)
    if g._data is None:
        return parts
    # an empty part (a 0-size batch) stays a tensor: the formulas still need its shape
    return [None if p._data.size and not p._data.any() else p for p in parts]


def raise_on_info(op: str, info, pivot: str, what: str, ex: str) -> None:
    """A factorization's nonzero `info` (LAPACK's: the 1-based index of the zero pivot) as
    LinAlgError naming the batch element and the pivot (`U`, `D`); `ex` the _ex variant."""
    if info._data is None or not info._data.size or not info._data.any():
        return
    flat = info._data.reshape(-1)
    first = int((flat != 0).argmax())
    where = f"the batch element {first}: " if info.ndim else ""
    j = int(flat[first])
    raise LinAlgError(f"{op}: {where}{pivot}[{j},{j}] is {what}", op=op,
                      hint=f"{ex} returns the factor with info instead")
