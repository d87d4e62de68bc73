"""Rearrangements: roll, rot90, tile, repeat_interleave, meshgrid, broadcast_tensors,
block_diag, cartesian_prod, and the Tensor methods expand_as, t and unfold (sliding windows
as a view)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...device import meta
from ...errors import DTypeError, ShapeError, ShapeIndexError, ShapeRuntimeError
from ...shape import broadcast_shapes, normalize_dim
from ...tensor import Tensor, describe
from .. import meta_layout
from ..base import Op, apply
from ..registry import public
from .copies import flip, repeat
from .index_arrays import INTP, add_at
from .joins import _tensor_list, cat, stack
from .padding import pad
from .views import View, _view_apply, expand, reshape, transpose


class Roll(Op):
    """Elements shifted along dims, wrapping around; the gradient rolls back."""

    name = "roll"

    def __init__(self, shifts: tuple, dims: tuple) -> None:
        self.shifts, self.dims = shifts, dims

    def infer(self, x):
        if x.ndim == 0:  # PyTorch: dims name nothing on a 0-d tensor (dims=None rolls it)
            raise ShapeIndexError(f"roll: dims {self.dims} given for a 0-d tensor, which has "
                                  "no dims", op="roll", operands=[("input", describe(x))],
                                  hint="leave dims out to roll the flattened tensor")
        self.axes = tuple(normalize_dim(d, x.ndim, "roll") for d in self.dims)
        return x.shape, x.dtype

    def forward(self, x):
        return self.device.xp.roll(x, self.shifts, self.axes)

    def backward(self, g):
        return (apply(Roll(tuple(-s for s in self.shifts), self.axes), g),)


@public(method=True)
def roll(x: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements along dims (of the flattened tensor when dims is None), wrapping."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one number, got {shifts}",
                             op="roll", operands=[("input", describe(x))])
        return reshape(apply(Roll(shifts, (0,)), reshape(x, -1)), tuple(x.shape))
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length",
                         op="roll", operands=[("input", describe(x))])
    return apply(Roll(shifts, dims), x)


@public(method=True)
def rot90(x: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees k times in the plane of dims, from the first toward the second."""
    dims = tuple(dims)
    if len(dims) != 2 or x.ndim < 2:
        raise ShapeError(f"rot90: expected two dims of a tensor with >= 2 dims, got dims {dims}",
                         op="rot90", operands=[("input", describe(x))])
    d0, d1 = (normalize_dim(d, x.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise ShapeError(f"rot90: the two dims must differ, got {dims}", op="rot90",
                         operands=[("input", describe(x))])
    k %= 4
    if k == 1:
        return transpose(flip(x, d1), d0, d1)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return transpose(flip(x, d0), d0, d1)
    return x.clone()


@public(method=True)
def tile(x: Tensor, dims) -> Tensor:
    """Repeat the whole tensor along each dim; dims shorter than x.ndim are padded with 1s."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    dims = (1,) * (x.ndim - len(dims)) + dims
    return repeat(x, dims)


class RepeatInterleave(Op):
    """Each element along dim repeated (an int count, or a count per element)."""

    name = "repeat_interleave"

    def __init__(self, repeats, d: int, out_size) -> None:
        self.repeats, self.d, self.out_size = repeats, d, out_size

    def infer(self, x):
        r, d = self.repeats, self.d
        shape = list(x.shape)
        self.in_shape = x.shape
        if isinstance(r, int):
            shape[d] = shape[d] * r
        else:
            shape[d] = self.out_size
        return tuple(shape), x.dtype

    def forward(self, x):
        return self.device.xp.repeat(x, self.repeats, axis=self.d)

    def backward(self, g):
        r, d = self.repeats, self.d
        if isinstance(r, int):
            shape = tuple(self.in_shape)
            return (g.reshape(shape[:d] + (shape[d], r) + shape[d + 1:]).sum(d + 1),)
        return (apply(SumGroups(r, d, tuple(self.in_shape), self.out_size), g),)


class SumGroups(Op):
    """The gradient of repeat_interleave with counts: each run of rows along dim summed."""

    name = "repeat_interleave_backward"

    def __init__(self, counts, d: int, in_shape: tuple, total) -> None:
        # counts: a device array (None on meta), whose sum is total
        self.counts, self.d, self.in_shape, self.total = counts, d, in_shape, total

    def infer(self, g):
        return self.in_shape, g.dtype

    def forward(self, g):
        xp = self.device.xp
        out = xp.zeros(self.in_shape, g.dtype)
        idx = xp.repeat(xp.arange(len(self.counts)), self.counts)
        add_at(xp, xp.moveaxis(out, self.d, 0), idx, xp.moveaxis(g, self.d, 0))
        return out

    def backward(self, gg):
        return (apply(RepeatInterleave(self.counts, self.d, self.total), gg),)


@public(method=True)
def repeat_interleave(x: Tensor, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Repeat each element `repeats` times (an int, or a 1-D tensor of counts) along dim
    (of the flattened tensor when dim is None). `repeat_interleave(counts)` repeats indices."""
    if repeats is None:  # torch.repeat_interleave(repeats): 0, 1, ... each repeated
        counts = x
        if counts.device is meta:
            raise ShapeError("repeat_interleave: the output size depends on the counts' values, "
                             "which a meta tensor does not have", op="repeat_interleave")
        xp = counts.device.xp
        idx = xp.repeat(xp.arange(counts.shape[0]), counts._data)
        return Tensor._make(idx, idx.shape, _dt.int64, counts.device)
    if x.ndim == 0 and dim is not None:  # PyTorch: a 0-d tensor has no dim to repeat along
        raise ShapeIndexError(f"repeat_interleave: dim {dim} given for a 0-d tensor, which has "
                              "no dims", op="repeat_interleave",
                              operands=[("input", describe(x))],
                              hint="leave dim out to repeat the flattened tensor")
    if dim is None:
        x, dim = reshape(x, -1), 0
    d = normalize_dim(dim, x.ndim, "repeat_interleave")
    if isinstance(repeats, Tensor):
        if not repeats.dtype.is_integer:
            raise DTypeError(f"repeat_interleave: repeats must be integers, got {repeats.dtype}",
                             op="repeat_interleave", operands=[("repeats", describe(repeats))])
        if repeats.ndim == 0 or tuple(repeats.shape) == (1,):
            repeats = int(repeats.reshape(()).item()) if repeats._data is not None else None
            if repeats is None:
                raise ShapeError("repeat_interleave: a meta repeats tensor has no value",
                                 op="repeat_interleave")
        else:
            if repeats.ndim != 1 or repeats.shape[0] != x.shape[d]:
                raise ShapeError(
                    f"repeat_interleave: repeats must have one count per element of dim {d} "
                    f"({x.shape[d]}), got {describe(repeats)}", op="repeat_interleave",
                    operands=[("input", describe(x)), ("repeats", describe(repeats))])
            counts = repeats._data
            if counts is None:
                if output_size is None:
                    raise ShapeError(
                        "repeat_interleave: the output size depends on the counts' values",
                        op="repeat_interleave", hint="pass output_size= on the meta device")
                return apply(RepeatInterleave(None, d, output_size), x)
            if (counts < 0).any():
                raise ShapeError("repeat_interleave: repeats must be non-negative",
                                 op="repeat_interleave")
            total = int(counts.sum())
            if output_size is not None and output_size != total:
                raise ShapeError(f"repeat_interleave: output_size {output_size} differs from "
                                 f"the counts' sum {total}", op="repeat_interleave")
            return apply(RepeatInterleave(counts.astype(INTP), d, total), x)
    if not isinstance(repeats, int) or repeats < 0:
        raise ShapeError(f"repeat_interleave: repeats must be a non-negative int or a tensor, "
                         f"got {repeats!r}", op="repeat_interleave")
    return apply(RepeatInterleave(repeats, d, None), x)


@public()
def meshgrid(*tensors, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-D tensors: 'ij' (matrix) or 'xy' (Cartesian) indexing."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    tensors = _tensor_list(list(tensors), "meshgrid")
    if indexing not in ("ij", "xy"):
        raise ShapeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}",
                         op="meshgrid")
    for i, t in enumerate(tensors):
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: expected 0-D or 1-D tensors, got {describe(t)} at "
                             f"{i}", op="meshgrid")
    flat = [reshape(t, -1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = tuple(t.shape[0] for t in flat)
    n = len(flat)
    grids = [expand(reshape(t, (1,) * i + (-1,) + (1,) * (n - i - 1)), shape)
             for i, t in enumerate(flat)]
    if swap:  # as PyTorch: the first two inputs swapped, and their grids swapped back
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@public()
def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded (as views) to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = ()
    for i, t in enumerate(tensors):
        shape = broadcast_shapes(shape, t.shape, "broadcast_tensors", ("the others",
                                                                        f"tensor {i}"))
    return tuple(expand(t, tuple(shape)) for t in tensors)


@public()
def block_diag(*tensors) -> Tensor:
    """A block-diagonal matrix of the tensors (0-D, 1-D as a row, or 2-D), zeros elsewhere."""
    if not tensors:
        raise ShapeError("block_diag: expected at least one tensor", op="block_diag")
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ShapeError(f"block_diag: expected tensors of at most 2 dims, got "
                             f"{describe(t)} at {i}", op="block_diag")
        mats.append(reshape(t, (1, 1)) if t.ndim == 0 else reshape(t, (1, -1))
                    if t.ndim == 1 else t)
    dt = mats[0].dtype
    for m in mats[1:]:
        dt = _dt.promote_types(dt, m.dtype)
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        cols = m.shape[1]
        rows.append(pad(m.to(dt), (left, width - left - cols)))
        left += cols
    return cat(rows, 0)


@public()
def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element from each 1-D tensor, as rows."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, -1) for g in grids], 1)


@public(sf=False, method=True)
def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """x expanded to other's shape."""
    return expand(x, tuple(other.shape))


@public(method=True)
def t(x: Tensor) -> Tensor:
    """The transpose of a matrix (0-D and 1-D tensors are returned as they are)."""
    if x.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dims, got {describe(x)}", op="t",
                         operands=[("input", describe(x))], hint="use transpose(x, d0, d1) or "
                         "x.mT for batches")
    return transpose(x, 0, 1) if x.ndim == 2 else x


class Unfold(View):
    """Sliding windows of `size` every `step` along dim, as a view; the window is last."""

    name = "unfold"

    def __init__(self, dim: int, size: int, step: int) -> None:
        self.dim, self.size, self.step = dim, size, step

    def infer(self, x):
        if x.ndim == 0:
            raise ShapeError("unfold: expected a tensor with at least 1 dim", op="unfold",
                             operands=[("input", describe(x))])
        d = self.d = normalize_dim(self.dim, x.ndim, "unfold")
        n = x.shape[d]
        if self.step <= 0 or self.size < 0:
            raise ShapeError(f"unfold: step must be > 0 and size >= 0, got size {self.size}, "
                             f"step {self.step}", op="unfold", operands=[("input", describe(x))])
        if type(n) is int and self.size > n:
            raise ShapeError(f"unfold: size {self.size} is larger than the dim {d} of size {n}",
                             op="unfold", operands=[("input", describe(x))])
        self.in_shape = x.shape
        shape = list(x.shape)
        shape[d] = (n - self.size) // self.step + 1
        return tuple(shape) + (self.size,), x.dtype

    def forward(self, x):
        return self._windows(self.device.xp, x)

    def meta_layout(self, arr):
        return self._windows(meta_layout.host, arr)

    def _windows(self, xp, x):
        w = xp.lib.stride_tricks.sliding_window_view(x, self.size, axis=self.d)
        key = [slice(None)] * x.ndim
        key[self.d] = slice(None, None, self.step)
        return w[tuple(key)]

    def backward(self, g):
        return (apply(Fold(self.d, self.size, self.step, tuple(self.in_shape)), g),)


class Fold(Op):
    """Unfold's gradient: each window added back where it came from."""

    name = "unfold_backward"

    def __init__(self, d: int, size: int, step: int, in_shape: tuple) -> None:
        self.d, self.size, self.step, self.in_shape = d, size, step, in_shape

    def infer(self, g):
        return self.in_shape, g.dtype

    def forward(self, g):
        xp = self.device.xp
        out = xp.zeros(self.in_shape, g.dtype)
        view = xp.moveaxis(out, self.d, -1)
        gm = xp.moveaxis(g, self.d, -2)  # [..., windows, size]
        nwin = gm.shape[-2]
        for k in range(self.size):  # window offset k lands at k, k + step, ...
            view[..., k:k + self.step * (nwin - 1) + 1:self.step] += gm[..., k]
        return out

    def backward(self, gg):
        return (_view_apply(Unfold(self.d, self.size, self.step), gg),)


@public(sf=False, method=True)
def unfold(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Tensor.unfold: windows of `size` every `step` along `dimension`, a new last dim."""
    if x.ndim == 0:  # PyTorch: one window of the one element (or none), no window dim
        normalize_dim(dimension, 0, "unfold")
        if step <= 0 or not 0 <= size <= 1:
            raise ShapeRuntimeError(f"unfold: a 0-d tensor takes size 0 or 1 and step > 0, "
                                    f"got size {size}, step {step}", op="unfold",
                                    operands=[("input", describe(x))])
        return reshape(x, (1,))[:size]
    return _view_apply(Unfold(dimension, size, step), x)
