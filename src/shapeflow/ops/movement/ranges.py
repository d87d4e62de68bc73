"""Made-from-sizes tensors that PyTorch lists with its factories: logspace, tril_indices and
triu_indices (the positions of a matrix's lower or upper triangle), and empty_strided /
empty_permuted (shapeflow's data are row-major: their strides and layouts set no layout).

As the factories do, each fills its values on the host (`index_arrays.host`) and the device
takes them with `from_numpy`."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...factories import _make
from ...tensor import Tensor
from ..registry import public
from .index_arrays import host


@public()
def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """steps values base ** v for v evenly spaced from start to end."""
    if steps < 0:
        raise ShapeRuntimeError(f"logspace: number of steps must be non-negative, got {steps}",
                                op="logspace")
    if dtype is not None and _dt.get_dtype(dtype) is _dt.bool_:
        raise DTypeError("logspace: not implemented for bool", op="logspace")
    return _make(((steps,),), dtype, device, requires_grad, lambda s, d: host.power(
        float(base), host.linspace(start, end, steps, dtype=host.float64)).astype(d))


def _triangle(op: str, lower: bool, row: int, col: int, offset: int, dtype, device) -> Tensor:
    if row < 0 or col < 0:
        raise ShapeRuntimeError(f"{op}: row and col must be non-negative, got {row}, {col}",
                                op=op)
    dt = _dt.int64 if dtype is None else _dt.get_dtype(dtype)
    if not dt.is_integer:  # bool is no integer dtype
        raise DTypeError(f"{op}: dtype must be an integer dtype, got {dt}", op=op)
    rows, cols = (host.tril_indices if lower else host.triu_indices)(row, offset, col)
    return _make(((2, rows.size),), dt, device, False,
                 lambda s, d: host.stack([rows, cols]).astype(d).reshape(s))


@public()
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """[2, N]: the (row, col) positions on or below diagonal `offset` of a row x col matrix."""
    return _triangle("tril_indices", True, row, col, offset, dtype, device)


@public()
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """[2, N]: the (row, col) positions on or above diagonal `offset` of a row x col matrix."""
    return _triangle("triu_indices", False, row, col, offset, dtype, device)


@public()
def empty_strided(size, stride, *, dtype=None, layout=None, device=None,
                  requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Uninitialised values of `size` (stride gives no layout here: shapeflow's data are
    row-major; its length must match size's, as PyTorch checks)."""
    from ...factories import check_layout, empty

    check_layout(layout, "empty_strided")
    if len(tuple(size)) != len(tuple(stride)):
        raise ShapeRuntimeError(f"empty_strided: mismatch in length of strides and shape "
                                f"({len(tuple(size))} and {len(tuple(stride))})",
                                op="empty_strided")
    return empty(tuple(size), dtype=dtype, device=device, requires_grad=requires_grad)


@public()
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Uninitialised values of `size`; physical_layout (a permutation of the dims) is checked
    and gives no layout here (row-major data)."""
    from ...factories import check_layout, empty

    check_layout(layout, "empty_permuted")
    size, perm = tuple(size), tuple(physical_layout)
    if len(size) != len(perm):
        raise ShapeRuntimeError(f"empty_permuted: number of dimensions in size does not match "
                                f"the length of the physical_layout ({len(size)} and "
                                f"{len(perm)})", op="empty_permuted")
    if sorted(perm) != list(range(len(size))):
        raise ShapeRuntimeError(f"empty_permuted: physical_layout must be a permutation of the "
                                f"dims, got {perm}", op="empty_permuted")
    return empty(size, dtype=dtype, device=device, requires_grad=requires_grad)
