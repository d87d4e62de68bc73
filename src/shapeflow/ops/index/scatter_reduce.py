"""The scatter family beyond gather/scatter/scatter_add: scatter with `reduce`,
scatter_reduce (sum, prod, mean, amax, amin; include_self), index_copy, index_fill, and the
in-place forms (scatter_, scatter_add_, scatter_reduce_, index_add_, index_copy_,
index_fill_) through ops/inplace.py.

Gradients follow PyTorch's formulas: amax/amin share a tie's gradient evenly among the
entries equal to the result; prod's first-order gradient is exact with zeros (the products
of the other factors are kept from the forward, and taken as constants by a second-order
gradient).
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import OUT, X0, X1, X2, Op, Saved, apply
from ..inplace import inplace_method as _inplace
from ..movement.index_arrays import INTP, add_at, ufunc_at
from ..registry import public
from .dim_index import IndexAdd, _check_bounds, index_add, index_select
from .flat_positions import put as _put
from .gather_scatter import Scatter, ScatterAdd, _pad_to, _scatter_coords, gather, scatter_add
from .gather_scatter import scatter as _scatter

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
# the namespace's ufunc each reduction applies at the scattered positions
_UFUNC = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum",
          "amin": "minimum"}
_I64, _F64 = _dt.int64.np, _dt.float64.np


def _identity(xp, reduce: str, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    big = math.inf if dtype.kind == "f" else (True if dtype.kind == "b" else
                                              xp.iinfo(dtype).max)
    if reduce == "amin":
        return big
    return -math.inf if dtype.kind == "f" else (False if dtype.kind == "b" else
                                                xp.iinfo(dtype).min)


def _touched(g: Tensor, d: int, index: Tensor) -> Tensor:
    """1 where some index entry scatters to, else 0, in g's shape and dtype."""
    from ...factories import zeros

    return apply(Scatter(d, 1), zeros(tuple(g.shape), dtype=g.dtype, device=g.device), index)


def _index_part(src: Tensor, index_shape) -> Tensor:
    """src cut to index's extent (src may be larger in any dim)."""
    if tuple(src.shape) == tuple(index_shape):
        return src
    return src[tuple(slice(0, s) for s in index_shape)]


class ScatterReduce(ScatterAdd):
    """x with src reduced into the positions index names along dim."""

    name = "scatter_reduce"

    def __init__(self, dim: int, reduce: str, include_self: bool = True) -> None:
        super().__init__(dim)
        self.reduce, self.include_self = reduce, include_self

    def infer(self, x, index, src):
        self.x_shape = tuple(x.shape)
        return ScatterAdd.infer(self, x, index, src)

    def saved(self, x, index, src, *, out):
        r = self.reduce
        if r in ("amax", "amin"):
            return (X0, X1, X2, OUT)
        if r == "prod":
            return (X1, Saved.new("gx_factor", x.shape, x.dtype),
                    Saved.new("gsrc_factor", self.index_shape, x.dtype))
        return (X1,)

    def forward(self, x, index, src):
        xp = self.device.xp
        out = xp.array(x, copy=True)
        if x.ndim == 0:
            out, index, src = out.reshape(1), index.reshape(1), src.reshape(1)
        _check_bounds(index, out.shape[self.d], self.d, self.name)
        coords = _scatter_coords(xp, index.astype(INTP, copy=False), self.d)
        val = src[tuple(slice(0, s) for s in index.shape)]
        r = self.reduce
        if not self.include_self:
            out[coords] = _identity(xp, r, out.dtype)
        ufunc_at(xp, _UFUNC[r], out, coords, val)
        if r == "mean":
            count = xp.full(out.shape, 1 if self.include_self else 0, _I64)
            add_at(xp, count, coords, 1)
            count = xp.maximum(count, 1)
            out = out / count if out.dtype.kind == "f" else out // count
        elif r == "prod":
            self._prod_factors(xp, x.reshape(out.shape), coords, val)
        return out.reshape(x.shape).astype(x.dtype, copy=False)

    def _prod_factors(self, xp, x, coords, val) -> None:
        """For backward: the product of every other factor at each input and src entry."""
        zero = val == 0
        nz = xp.where(zero, 1, val).astype(_F64)
        zeros = xp.zeros(x.shape, _I64)
        add_at(xp, zeros, coords, zero.astype(_I64))
        prod_nz = xp.ones(x.shape, _F64)
        ufunc_at(xp, "multiply", prod_nz, coords, nz)
        touched = xp.zeros(x.shape, bool)
        touched[coords] = True
        if self.include_self:
            gx = xp.where(zeros > 0, 0.0, prod_nz)  # the product of the scattered values
            x_zero = x == 0
            zeros = zeros + x_zero
            prod_nz = prod_nz * xp.where(x_zero, 1, x)
        else:
            gx = xp.where(touched, 0.0, 1.0)
        z_at, p_at = zeros[coords], prod_nz[coords]
        with xp.errstate(divide="ignore", invalid="ignore"):
            gsrc = xp.where(zero, xp.where(z_at == 1, p_at, 0.0),
                            xp.where(z_at == 0, p_at / nz, 0.0))
        self.gx_factor = gx.reshape(self.x_shape).astype(x.dtype)
        self.gsrc_factor = gsrc.reshape(self.index_shape).astype(x.dtype)

    def backward(self, g):
        r, d = self.reduce, self.d
        if r == "prod":
            index, gx_factor, gsrc_factor = self.saved_tensors
            gx = g * gx_factor
            gsrc = gather(g, d, index) * gsrc_factor
        elif r in ("sum", "mean"):
            (index,) = self.saved_tensors
            if r == "mean":
                from ...factories import full, ones

                base = full(tuple(g.shape), 1 if self.include_self else 0, dtype=g.dtype,
                            device=g.device)
                count = scatter_add(base, d, index, ones(tuple(index.shape), dtype=g.dtype,
                                                         device=g.device))
                g = g / count.clamp(min=1)
            gx = g if self.include_self else g * (1 - _touched(g, d, index))
            gsrc = gather(g, d, index)
        else:
            x, index, src, out = self.saved_tensors
            picked = (_index_part(src, index.shape) == gather(out, d, index)).to(g.dtype)
            mx = (x == out).to(g.dtype)
            # as PyTorch: an input equal to the result counts in the share even where
            # include_self=False left it out (its own gradient is then masked to 0)
            count = scatter_add(mx, d, index, picked)
            share = g / count
            gx = share * mx
            if not self.include_self:
                gx = gx * (1 - _touched(g, d, index))
            gsrc = gather(share, d, index) * picked
        return gx, None, _pad_to(gsrc, self.src_shape)


def _check_reduce(op: str, reduce: str, allowed) -> None:
    if reduce not in allowed:
        raise ShapeError(f"{op}: reduce argument must be one of {', '.join(allowed)}, got "
                         f"{reduce!r}", op=op)


@public(method=True)
def scatter_reduce(x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """x with src reduced (sum, prod, mean, amax, amin) into the positions index names."""
    _check_reduce("scatter_reduce", reduce, REDUCTIONS)
    return apply(ScatterReduce(dim, reduce, include_self), x, index, src)


@public(method=True)
def scatter(x: Tensor, dim: int, index: Tensor, src=None, value=None, *,
            reduce: str | None = None) -> Tensor:
    """x with src (a tensor) or value (a number) written at index along dim; reduce 'add'
    or 'multiply' combines them with x's values instead."""
    if reduce is None:
        return _scatter(x, dim, index, src, value)
    _check_reduce("scatter", reduce, ("add", "multiply"))
    if not isinstance(src, Tensor):
        from ...factories import full

        v = value if src is None else src
        src = full(tuple(index.shape), v, dtype=x.dtype, device=x.device)
    return apply(ScatterReduce(dim, "sum" if reduce == "add" else "prod"), x, index, src)


# ---- index_copy / index_fill ----------------------------------------------------------------
class IndexCopy(IndexAdd):
    """x with source's slices written at index along dim (the last write wins on repeats)."""

    name = "index_copy"

    def __init__(self, dim: int) -> None:
        super().__init__(dim)

    def infer(self, x, index, source):
        shape, dtype = _renamed(IndexAdd.infer, self, x, index, source)
        if source.dtype is not x.dtype:
            raise DTypeError(f"index_copy: source dtype {source.dtype} must equal the input's "
                             f"{x.dtype}", op=self.name,
                             operands=[("input", describe(x)), ("source", describe(source))])
        return shape, dtype

    def forward(self, x, index, source):
        index = index.reshape(-1).astype(INTP, copy=False)
        _check_bounds(index, x.shape[self.d] if x.ndim else 1, self.d, self.name)
        out = self.device.xp.array(x, copy=True)
        if x.ndim == 0:  # a 0-d input: infer checked that index holds one entry
            out[...] = source
            return out
        out[(slice(None),) * self.d + (index,)] = source
        return out

    def backward(self, g):
        (index,) = self.saved_tensors
        return apply(IndexFill(self.d, 0), g, index), None, index_select(g, self.d, index)


def _renamed(fn, op, *args):
    """Run a parent's infer, its errors naming this op (they say index_add otherwise)."""
    try:
        return fn(op, *args)
    except ShapeError as e:
        raise ShapeError(e.message.replace("index_add", op.name), op=op.name,
                         operands=e.operands, hint=e.hint) from None


class IndexFill(Op):
    """x with value at the positions index names along dim (value: a number or 0-d tensor)."""

    name = "index_fill"

    def __init__(self, dim: int, value=None) -> None:
        self.dim, self.value = dim, value

    def infer(self, x, index, value=None):
        from ...shape import normalize_dim
        from .dim_index import _check_index_dtype

        _check_index_dtype(index, self.name)
        if index.ndim > 1:
            raise ShapeError(f"index_fill: index must be 1-d, got {describe(index)}",
                             op=self.name, operands=[("input", describe(x)),
                                                     ("index", describe(index))])
        if value is not None and value.ndim != 0:
            raise ShapeError("index_fill: only supports a 0-dimensional value tensor, but got "
                             f"{describe(value)}", op=self.name,
                             operands=[("value", describe(value))])
        self.d = normalize_dim(self.dim, x.ndim, self.name)
        return tuple(x.shape), x.dtype

    def saved(self, x, index, value=None, *, out):
        return (X1,)

    def forward(self, x, index, value=None):
        index = index.reshape(-1).astype(INTP, copy=False)
        out = self.device.xp.array(x, copy=True)
        if x.ndim == 0:
            _check_bounds(index, 1, 0, self.name)
            if index.size:
                out[...] = self.value if value is None else value
            return out
        _check_bounds(index, x.shape[self.d], self.d, self.name)
        out[(slice(None),) * self.d + (index,)] = self.value if value is None else value
        return out

    def backward(self, g):
        (index,) = self.saved_tensors
        gx = apply(IndexFill(self.d, 0), g, index) if self.needs_grad(0) else None
        if len(self.next) == 6:  # no value tensor
            return gx, None
        gv = None
        if self.needs_grad(2):
            if index._data is not None:  # repeated positions count once, as in PyTorch
                u = index.device.xp.unique(index._data.reshape(-1))
                index = Tensor._make(u, tuple(u.shape), index.dtype, index.device)
            gv = (g.reshape(1) if g.ndim == 0 else index_select(g, self.d, index)).sum()
        return gx, None, gv


@public(method=True)
def index_copy(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """x with source's slices copied to the positions index names along dim."""
    if _autocast_hot.on:  # sf.autocast: the widest float dtype of x and source
        x, source = _autocast.promote((x, source))
    return apply(IndexCopy(dim), x, index, source)


@public(method=True)
def index_fill(x: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """x with value at the positions index names along dim."""
    if isinstance(value, Tensor):
        if value.dtype is not x.dtype:
            value = value.to(x.dtype)
        return apply(IndexFill(dim), x, index, value)
    return apply(IndexFill(dim, value), x, index)


@public(method=True)
def index_reduce(x: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """x with source's slices reduced (prod, mean, amax, amin) into the positions index names
    along dim: scatter_reduce with index spread over source's other dims (its gradients)."""
    from ...shape import normalize_dim

    _check_reduce("index_reduce", reduce, ("prod", "mean", "amax", "amin"))
    if index.ndim > 1:
        raise ShapeError(f"index_reduce: index must be a vector, got {describe(index)}",
                         op="index_reduce", operands=[("index", describe(index))])
    d = normalize_dim(dim, max(x.ndim, 1), "index_reduce")
    n = index.shape[0] if index.ndim else 1
    if source.ndim != x.ndim or (source.ndim and source.shape[d] != n) or any(
            source.shape[i] != x.shape[i] for i in range(x.ndim) if i != d):
        raise ShapeError(f"index_reduce: source must have input's shape except along dim {dim}, "
                         f"where it needs index's {n} entries", op="index_reduce",
                         operands=[("input", describe(x)), ("index", describe(index)),
                                   ("source", describe(source))])
    if source.ndim == 0:
        spread = index.reshape(())
    else:
        view = tuple(n if i == d else 1 for i in range(source.ndim))
        spread = index.reshape(view).expand(tuple(source.shape))
    if source.dtype is not x.dtype:
        source = source.to(x.dtype)
    return scatter_reduce(x, d, spread, source, reduce, include_self=include_self)


# ---- in place -------------------------------------------------------------------------------

scatter_ = public(sf=False, method=True)(_inplace("scatter_", scatter))
scatter_add_ = public(sf=False, method=True)(_inplace("scatter_add_", scatter_add))
scatter_reduce_ = public(sf=False, method=True)(_inplace("scatter_reduce_",
                                                          scatter_reduce))
index_add_ = public(sf=False, method=True)(_inplace("index_add_", index_add))
index_copy_ = public(sf=False, method=True)(_inplace("index_copy_", index_copy))
index_fill_ = public(sf=False, method=True)(_inplace("index_fill_", index_fill))
index_reduce_ = public(sf=False, method=True)(_inplace("index_reduce_", index_reduce))
put_ = public(sf=False, method=True)(_inplace("put_", _put))
