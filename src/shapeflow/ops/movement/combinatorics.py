"""combinations of a 1-d tensor's elements (itertools' order), and unravel_index (flat
indices to coordinates)."""

from __future__ import annotations

import itertools

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..registry import public


@public()
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """[C, r]: every length-r combination of input's elements (as itertools.combinations, or
    combinations_with_replacement); r = 0 gives an empty 1-d tensor, as PyTorch."""
    from ..index.selection import take

    if input.ndim != 1:
        raise ShapeRuntimeError(f"combinations: expect a 1D vector, but got shape "
                                f"{list(input.shape)}", op="combinations",
                                operands=[("input", describe(input))])
    if r < 0:
        raise ShapeRuntimeError(f"combinations: r must be non-negative, got {r}",
                                op="combinations")
    if r == 0:  # PyTorch's: an empty tensor, not connected to input
        from ...factories import empty

        return empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    from ..index.flat_positions import _index
    from .index_arrays import host

    index = host.array(rows, dtype=host.int64).reshape(len(rows), r)  # a host plan

    return take(input, _index(index, input).reshape(index.shape))


@public()
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates in `shape` of each flat index (a tuple of int64 tensors of indices'
    shape); indices outside the shape wrap as PyTorch's floor division and modulo do."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not isinstance(indices, Tensor) or indices.dtype.is_floating_point \
            or indices.dtype is _dt.bool_:
        what = indices.dtype if isinstance(indices, Tensor) else type(indices).__name__
        raise DTypeError(f"unravel_index: expected 'indices' to be an integer tensor, got {what}",
                         op="unravel_index")
    if any(s < 0 for s in shape):
        raise ShapeRuntimeError(f"unravel_index: 'shape' cannot have negative values, got "
                                f"{shape}", op="unravel_index")
    if 0 in shape:
        raise ShapeRuntimeError(f"unravel_index: 'shape' cannot have a zero size, got {shape}",
                                op="unravel_index")
    if indices._data is None:  # meta: shapes only
        return tuple(Tensor._make(None, tuple(indices.shape), _dt.int64, indices.device)
                     for _ in shape)
    dev = indices.device
    xp = dev.xp
    rest = indices._data.astype(_dt.int64.np)
    coords = []
    for s in reversed(shape):
        coords.append(xp.mod(rest, s))
        rest = xp.floor_divide(rest, s)
    return tuple(Tensor._make(xp.ascontiguousarray(c), tuple(indices.shape), _dt.int64, dev)
                 for c in reversed(coords))
