"""Order and NaN-aware statistics: nansum, nanmean, median, nanmedian, mode, quantile,
nanquantile, count_nonzero, bincount, aminmax, cov and corrcoef.

Built from sort, gather and arithmetic, so gradients and meta shapes come from those ops;
only the positions picked (ranks, modes) are computed here, and they carry no gradient.
"""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...device import meta
from ...errors import ArgumentError, DTypeError, ShapeError
from ...tensor import Tensor, describe
from ..elementwise.complex_parts import refuse_complex
from ..registry import public
from ._common import _one_dim, reduce_dims

# torch.return_types.median / .nanmedian / .mode / .aminmax
MedianResult = namedtuple("median", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])
AminmaxResult = namedtuple("aminmax", ["min", "max"])

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _float_only(x: Tensor, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point input, got {x.dtype}", op=op,
                         operands=[("input", describe(x))], hint="cast with x.float() first")


@public(method=True)
def nansum(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The sum over dim, NaNs counted as zero."""
    from ..elementwise import isnan, where
    from .sums import sum as _sum

    if x.dtype.is_floating_point:
        x = where(isnan(x), 0.0, x)
    elif x.dtype.is_complex:  # refused as PyTorch does (a NaN part has no NaN-free sum)
        refuse_complex("nansum", x, hint="nansum real(x) and imag(x) apart")
    return _sum(x, dim, keepdim, dtype=dtype)


@public(method=True)
def nanmean(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean over dim of the elements that are not NaN."""
    from ..elementwise import isnan, logical_not
    from .sums import sum as _sum

    _float_only(x if dtype is None else x.to(dtype), "nanmean")
    if dtype is not None:
        x = x.to(dtype)
    count = _sum(logical_not(isnan(x)), dim, keepdim).to(x.dtype)
    return nansum(x, dim, keepdim) / count


def _last(x: Tensor, d: int) -> Tensor:
    from ..movement import movedim

    return movedim(x, d, -1)


def _valid_counts(rows: Tensor, ignore_nan: bool):
    """Per row (last dim): non-NaN count; None on meta (ranks then assume no NaN)."""
    if rows.device is meta:
        return None
    xp, a = rows.device.xp, rows._data
    nan = xp.isnan(a) if a.dtype.kind in "fc" else xp.zeros(a.shape, _dt.bool_.np)
    return (~nan).sum(-1, keepdims=True) if ignore_nan else xp.where(
        nan.any(-1, keepdims=True), -1, a.shape[-1])


def _index_of(ranks, shape: tuple, like: Tensor) -> Tensor:
    """ranks broadcast to `shape`, as an int64 tensor on like's device (meta: shape only)."""
    xp = like.device.xp
    return Tensor._make(xp.ascontiguousarray(xp.broadcast_to(ranks, shape), dtype=_dt.int64.np),
                        shape, _dt.int64, like.device)


def _pick(rows: Tensor, ranks) -> tuple[Tensor, Tensor]:
    """(values, indices) of the ranks-th smallest of each row (ranks shaped [..., 1])."""
    from ..index.gather_scatter import gather
    from ..movement import squeeze
    from ..sorting import sort

    s = sort(rows, -1)
    shape = tuple(rows.shape[:-1]) + (1,)
    idx = _index_of(ranks, shape, rows)
    return squeeze(gather(s.values, -1, idx), -1), squeeze(gather(s.indices, -1, idx), -1)


def _median(x: Tensor, dim, keepdim: bool, op: str, result, ignore_nan: bool):
    from ..movement import reshape, unsqueeze

    if x.numel() == 0:
        raise ShapeError(f"{op}: cannot take the median of an empty tensor", op=op,
                         operands=[("input", describe(x))])
    if dim is None:
        rows = reshape(x, (-1,))
    else:
        d = _one_dim(dim, x, op)
        rows = _last(x, d) if x.ndim else reshape(x, (1,))
    n = rows.shape[-1]
    xp = rows.device.xp
    counts = _valid_counts(rows, ignore_nan)
    if counts is None:  # meta: no values to rank
        ranks = None
    elif ignore_nan:  # an all-NaN row picks its first NaN (rank 0)
        ranks = xp.maximum(counts - 1, 0) // 2
    else:  # a row with NaN: the first NaN, sorted after every number
        ranks = xp.where(counts < 0, (~xp.isnan(rows._data)).sum(-1, keepdims=True),
                         (n - 1) // 2)
    values, indices = _pick(rows, ranks)
    if dim is None:
        return values
    if x.ndim == 0:
        return result(reshape(values, ()), reshape(indices, ()))
    if keepdim:
        values, indices = unsqueeze(values, d), unsqueeze(indices, d)
    return result(values, indices)


@public(method=True)
def median(x: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median: of all elements (a 0-d tensor), or (values, indices) along dim."""
    return _median(x, dim, keepdim, "median", MedianResult, False)


@public(method=True)
def nanmedian(x: Tensor, dim: int | None = None, keepdim: bool = False):
    """median ignoring NaNs (NaN only where a row is all NaN)."""
    return _median(x, dim, keepdim, "nanmedian", NanmedianResult, True)


def _mode_rows(xp, a):
    """Per row: the last index of the most frequent value (the smallest among ties)."""
    out = xp.empty(a.shape[:-1] + (1,), _dt.int64.np)
    for i, row in enumerate(a.reshape(-1, a.shape[-1])):
        values, counts = xp.unique(row, return_counts=True)
        best = values[xp.argmax(counts)]  # unique sorts: argmax takes the smallest tie
        out.reshape(-1)[i] = xp.flatnonzero(row == best)[-1] if best == best else \
            xp.flatnonzero(xp.isnan(row))[-1]
    return out


@public(method=True)
def mode(x: Tensor, dim: int = -1, keepdim: bool = False):
    """(values, indices) of the most frequent value along dim (the smallest among ties)."""
    from ..index.gather_scatter import gather
    from ..movement import reshape, squeeze, unsqueeze

    refuse_complex("mode", x)  # refused as PyTorch does
    if x.ndim == 0:
        return ModeResult(x * 1 if x.dtype.is_floating_point else x,
                          Tensor._make(x.device.xp.zeros((), _dt.int64.np), (), _dt.int64,
                                       x.device))
    d = _one_dim(dim, x, "mode")
    rows = _last(x, d)
    if rows.shape[-1] == 0:
        raise ShapeError("mode: cannot take the mode of an empty dim", op="mode",
                         operands=[("input", describe(x))])
    shape = tuple(rows.shape[:-1]) + (1,)
    idx = Tensor._make(None if x.device is meta else _mode_rows(x.device.xp, rows._data),
                       shape, _dt.int64, x.device)
    values, indices = squeeze(gather(rows, -1, idx), -1), reshape(idx, shape[:-1])
    if keepdim:
        values, indices = unsqueeze(values, d), unsqueeze(indices, d)
    return ModeResult(values, indices)


def _quantile(x: Tensor, q, dim, keepdim: bool, interpolation: str, op: str,
              ignore_nan: bool) -> Tensor:
    from ..movement import reshape, squeeze, stack, unsqueeze

    _float_only(x, op)
    if interpolation not in _INTERPOLATIONS:
        raise ArgumentError(f"{op}: interpolation must be one of "
                            f"{', '.join(_INTERPOLATIONS)}, got {interpolation!r}", op=op)
    if isinstance(q, Tensor):
        if q.dtype is not x.dtype:
            raise DTypeError(f"{op}: q must have the input's dtype {x.dtype}, got {q.dtype}",
                             op=op, operands=[("input", describe(x)), ("q", describe(q))])
        if q.ndim > 1:
            raise ShapeError(f"{op}: q must be a number or a 0-d or 1-d tensor, got "
                             f"{q.ndim} dims", op=op, operands=[("q", describe(q))])
        # a meta q gives only its length: any valid value stands in
        if q.device is meta:
            qs = [0.5] * (q.shape[0] if q.ndim else 1)
        else:
            qs = [float(v) for v in q.device.xp.atleast_1d(q._data)]
        many = q.ndim == 1
    else:
        qs, many = [float(q)], False
    if any(not 0 <= v <= 1 for v in qs):
        raise ArgumentError(f"{op}: q must be in the range [0, 1], got {qs}", op=op)
    if x.numel() == 0:
        raise ShapeError(f"{op}: cannot take a quantile of an empty tensor", op=op,
                         operands=[("input", describe(x))])
    if dim is None:
        rows, d = reshape(x, (-1,)), None
    else:
        d = _one_dim(dim, x, op)
        rows = _last(x, d) if x.ndim else reshape(x, (1,))
    n = rows.shape[-1]
    xp = x.device.xp  # on meta every array below is None: the tensors keep their shapes
    counts = _valid_counts(rows, ignore_nan)
    sorted_rows = _sorted(rows)
    ft = x.dtype.np.type
    outs = []
    for v in qs:
        if counts is None:
            ranks = xp.full((1,), ft(v) * ft(n - 1))
        elif ignore_nan:  # an all-NaN row takes rank 0, a NaN
            ranks = xp.maximum(ft(v) * (counts - 1).astype(ft), 0)
        else:  # a row with NaN takes the last rank, a NaN
            ranks = xp.where(counts < 0, ft(n - 1), ft(v) * ft(n - 1)).astype(ft)
        ranks = {"lower": xp.floor, "higher": xp.ceil, "nearest": xp.round}.get(
            interpolation, lambda r: r)(ranks)
        below = xp.floor(ranks)
        out = _take(sorted_rows, below)
        if interpolation in ("linear", "midpoint"):
            above = _take(sorted_rows, xp.ceil(ranks))
            w = xp.full((1,), 0.5, ft) if interpolation == "midpoint" else xp.subtract(
                ranks, below)
            shape = tuple(rows.shape[:-1]) + (1,)
            weight = Tensor._make(xp.ascontiguousarray(xp.broadcast_to(w, shape), dtype=ft),
                                  shape, x.dtype, x.device)
            out = out + weight * (above - out)
        outs.append(squeeze(out, -1))
    if keepdim:
        outs = [reshape(o, (1,) * x.ndim) if d is None else unsqueeze(o, d) if x.ndim else o
                for o in outs]
    return stack(outs) if many else outs[0]


def _sorted(rows: Tensor) -> Tensor:
    from ..sorting import sort

    return sort(rows, -1).values


def _take(sorted_rows: Tensor, ranks) -> Tensor:
    from ..index.gather_scatter import gather

    shape = tuple(sorted_rows.shape[:-1]) + (1,)
    return gather(sorted_rows, -1, _index_of(ranks, shape, sorted_rows))


@public(method=True)
def quantile(x: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The q-th quantiles along dim (of all elements when None); NaN where a row has NaN."""
    return _quantile(x, q, dim, keepdim, interpolation, "quantile", False)


@public(method=True)
def nanquantile(x: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """quantile ignoring NaNs (NaN only where a row is all NaN)."""
    return _quantile(x, q, dim, keepdim, interpolation, "nanquantile", True)


@public(method=True)
def count_nonzero(x: Tensor, dim=None) -> Tensor:
    """How many elements are not zero, over dim (all dims when None), as int64."""
    from ..elementwise import ne
    from .sums import sum as _sum

    reduce_dims(dim, x, "count_nonzero")  # a bad dim names this op
    return _sum(ne(x, 0), dim)


@public(method=True)
def bincount(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(x) occurs in a 1-d int tensor (summed weights if given)."""
    if x.ndim != 1 or not x.dtype.is_integer:  # bool is no integer dtype
        raise ShapeError(f"bincount: expected a 1-d integer tensor, got {describe(x)}",
                         op="bincount", operands=[("input", describe(x))])
    if weights is not None and tuple(weights.shape) != tuple(x.shape):
        raise ShapeError("bincount: weights must have the input's shape", op="bincount",
                         operands=[("input", describe(x)), ("weights", describe(weights))])
    x._need_data("bincount (its size depends on the values)")  # raises on meta
    a = x._data
    if a.size and a.min() < 0:
        raise ArgumentError("bincount: the input must not hold negative values",
                            op="bincount", operands=[("input", describe(x))])
    xp = x.device.xp
    if weights is None:
        out, dtype = xp.bincount(a, minlength=minlength).astype(_dt.int64.np), _dt.int64
    else:
        dtype = weights.dtype if weights.dtype.is_floating_point else _dt.float64
        weights._need_data("bincount")
        out = xp.bincount(a, weights._data, minlength).astype(dtype.np)
    return Tensor._make(out, out.shape, dtype, x.device)


@public(method=True)
def aminmax(x: Tensor, *, dim: int | None = None, keepdim: bool = False):
    """(min, max) over dim (over all elements when None)."""
    from .extrema import amax, amin

    dims = () if dim is None else _one_dim(dim, x, "aminmax")
    if x.numel() == 0:
        raise ShapeError("aminmax: cannot reduce an empty tensor", op="aminmax",
                         operands=[("input", describe(x))])
    return AminmaxResult(amin(x, dims, keepdim), amax(x, dims, keepdim))


@public(method=True)
def cov(x: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the rows of x (variables) over its columns (observations)."""
    from ..elementwise import clamp_min
    from ..linalg.matmul import matmul
    from ..movement import reshape, squeeze
    from .sums import sum as _sum

    if x.ndim > 2:
        raise ShapeError(f"cov: expected a 1-d or 2-d input, got {x.ndim} dims", op="cov",
                         operands=[("input", describe(x))])
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_dt.get_default_dtype())
    rows = reshape(x, (1, -1)) if x.ndim < 2 else x
    n = rows.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is not None:
            if wt.ndim > 1 or wt.numel() != n:
                raise ShapeError(f"cov: {name} must be 1-d with one weight per observation "
                                 f"({n})", op="cov", operands=[(name, describe(wt))])
            w = wt if w is None else w * wt
    if w is None:
        mean = _sum(rows, 1, keepdim=True) / n
        norm = n - correction
    else:
        w = w.to(_dt.to_real(x.dtype))  # weights are real, for complex rows too
        w_sum = _sum(w)
        mean = _sum(rows * w, 1, keepdim=True) / w_sum
        norm = w_sum if correction == 0 else w_sum - correction if aweights is None else \
            w_sum - correction * _sum(w * aweights) / w_sum
    centred = rows - mean
    # centred.mH: the conjugate transpose (E[(x - mean) conj(y - mean)] for complex rows)
    out = matmul(centred * w if w is not None else centred, centred.mH)
    norm = clamp_min(norm, 0) if isinstance(norm, Tensor) else max(norm, 0)
    return squeeze(out / norm)


@public(method=True)
def corrcoef(x: Tensor) -> Tensor:
    """The Pearson correlation matrix of the rows of x, clipped to [-1, 1] (the real and
    imaginary parts each, for complex x)."""
    from ..elementwise import clamp, imag, real, sqrt
    from ..elementwise.complex_parts import complex as make_complex
    from ..movement import diagonal, unsqueeze

    c = cov(x)
    if c.ndim == 0:
        return c / c
    d = diagonal(c)
    std = sqrt(real(d) if d.dtype.is_complex else d)  # a variance: real, as PyTorch takes it
    c = (c / unsqueeze(std, 1)) / unsqueeze(std, 0)
    if c.dtype.is_complex:
        return make_complex(clamp(real(c), -1, 1), clamp(imag(c), -1, 1))
    return clamp(c, -1, 1)
