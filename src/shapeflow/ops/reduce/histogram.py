"""Histograms: histogram (1-d) and histogramdd (one dim per column of a [..., D] input),
with bin counts or edges, a range, weights and density, as PyTorch's. Counting has no
gradient; it runs on the data (meta gives the shapes)."""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...device import meta
from ...errors import DTypeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..registry import public

# torch.return_types.histogram / .histogramdd
HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])
HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


def _edges(xp, col, bins, lo_hi, npd):
    if not isinstance(bins, int):  # the edges, as a device array
        return bins.astype(npd)
    if lo_hi is not None:
        lo, hi = (float(v) for v in lo_hi)
    elif col.size:
        lo, hi = float(col.min()), float(col.max())
    else:
        lo, hi = 0.0, 1.0
    if lo > hi:
        raise ShapeRuntimeError(f"histogram: max must be larger than min, got range "
                                f"({lo}, {hi})", op="histogram")
    if lo == hi:  # one value: a unit-wide range around it, as PyTorch and NumPy
        lo, hi = lo - 0.5, hi + 0.5
    return _linspace(xp, lo, hi, bins + 1, npd)


def _linspace(xp, lo: float, hi: float, n: int, npd):
    """PyTorch's linspace in the input's dtype (the first half counted up from lo, the
    second down from hi), so that edges, and the bins of values on them, match its own."""
    start, end = npd.type(lo), npd.type(hi)
    step = (end - start) / npd.type(n - 1)
    i = xp.arange(n)
    half = n // 2
    up = start + step * i[:half].astype(npd)
    down = end - step * (n - 1 - i[half:]).astype(npd)
    return xp.concatenate([up, down]).astype(npd)


def _count(xp, x2, edges: list, weight, density: bool, npd):
    shape = tuple(len(e) - 1 for e in edges)
    f64 = _dt.float64.np
    keep = xp.ones(len(x2), _dt.bool_.np)
    idx = []
    for k, e in enumerate(edges):
        col = x2[:, k]
        i = xp.searchsorted(e, col, side="right") - 1
        i = xp.where(col == e[-1], len(e) - 2, i)  # the last edge belongs to the last bin
        keep &= (col >= e[0]) & (col <= e[-1]) & (i >= 0)
        idx.append(xp.clip(i, 0, max(len(e) - 2, 0)))
    hist = xp.zeros(shape, f64)
    w = xp.ones(len(x2)) if weight is None else weight.astype(f64)
    if keep.any() and all(shape):
        xp.add.at(hist, tuple(i[keep] for i in idx), w[keep])
    if density:
        total = hist.sum()
        widths = xp.ones(shape)
        for k, e in enumerate(edges):
            widths = widths * xp.diff(e.astype(f64)).reshape(
                tuple(-1 if j == k else 1 for j in range(len(edges))))
        hist = hist / (total * widths) if total else hist / widths * 0
    return hist.astype(npd)


def _check(op: str, x: Tensor, weight) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point input, got {x.dtype}", op=op,
                         operands=[("input", describe(x))])
    if weight is not None and tuple(weight.shape) != tuple(x.shape[:-1] if op == "histogramdd"
                                                           else x.shape):
        raise ShapeRuntimeError(f"{op}: weight must have the input's shape (less its last dim "
                                f"for histogramdd), got {list(weight.shape)}", op=op,
                                operands=[("input", describe(x)), ("weight", describe(weight))])


@public()
def histogramdd(input: Tensor, bins, range=None, weight: Tensor | None = None,  # noqa: A002
                density: bool = False) -> HistogramddResult:
    """Counts of input's rows [..., D] in a D-dim grid of bins: (hist, bin_edges per dim)."""
    _check("histogramdd", input, weight)
    D = input.shape[-1]
    if isinstance(bins, int):
        bins = [bins] * D
    bins = list(bins)
    if len(bins) != D:
        raise ShapeRuntimeError(f"histogramdd: expected {D} bin specs (one per column), got "
                                f"{len(bins)}", op="histogramdd")
    if range is not None and len(range) != 2 * D:
        raise ShapeRuntimeError(f"histogramdd: range needs 2 * {D} values, got {len(range)}",
                                op="histogramdd")
    npd, dev = input.dtype.np, input.device
    if dev is meta:
        sizes = [b if isinstance(b, int) else b.shape[0] - 1 for b in bins]
        return HistogramddResult(Tensor._make(None, tuple(sizes), input.dtype, meta),
                                 [Tensor._make(None, (n + 1,), input.dtype, meta)
                                  for n in sizes])
    xp = dev.xp
    x2 = input._data.reshape(-1, D)
    edges = []
    for k, b in enumerate(bins):
        spec = b._data if isinstance(b, Tensor) else int(b)
        if isinstance(spec, int) and spec < 1:
            raise ShapeRuntimeError(f"histogramdd: bins must be positive, got {spec}",
                                    op="histogramdd")
        lo_hi = None if range is None else (range[2 * k], range[2 * k + 1])
        edges.append(_edges(xp, x2[:, k], spec, lo_hi, npd))
    w = None if weight is None else weight._data.reshape(-1)
    hist = _count(xp, x2, edges, w, density, npd)
    return HistogramddResult(Tensor._make(hist, hist.shape, input.dtype, dev),
                             [Tensor._make(e, e.shape, input.dtype, dev) for e in edges])


@public(method=True)
def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,  # noqa: A002
              density: bool = False) -> HistogramResult:
    """Counts of input's elements in bins (a count, or a tensor of edges): (hist, bin_edges)."""
    _check("histogram", input, weight)
    hist, edges = histogramdd(input.reshape(-1, 1), [bins], range, None if weight is None
                              else weight.reshape(-1), density)
    return HistogramResult(hist, edges[0])
