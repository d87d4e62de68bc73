"""Running scans along one dim: cumprod, cummax, cummin, logcumsumexp; and diff."""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...device import meta
from ...dtypes import INT_TO_FLOAT, INT_TO_LONG, promote
from ...errors import ShapeError
from ...tensor import Tensor, describe
from ..base import OUT, X0, Op, apply
from ..registry import public
from ._common import _int64, _one_dim
from .cumulative import Cumsum

CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])
_KEEP_X_OUT = (X0, OUT)


def _rows(xp, a, d: int):
    """a with dim d last, as rows [-1, n] (a copy only where NumPy needs one)."""
    return xp.moveaxis(a, d, -1).reshape(-1, a.shape[d])


def _unrows(xp, r, shape: tuple, d: int):
    moved = shape[:d] + shape[d + 1:] + (shape[d],)
    return xp.ascontiguousarray(xp.moveaxis(r.reshape(moved), -1, d))


class Cumprod(Op):
    """Running product along one dim; its gradient is exact where inputs are 0."""

    name = "cumprod"
    promotion = INT_TO_LONG

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x):
        self.d = _one_dim(self.dim, x, self.name)
        dt = x.dtype
        return x.shape, dt if dt.is_floating_point else promote(self.promotion, dt)

    def saved(self, x, out):
        return _KEEP_X_OUT

    def forward(self, x):
        dt = _int64.np if x.dtype.kind in "biu" else x.dtype
        if x.ndim == 0:
            return x.astype(dt)
        return self.device.xp.cumprod(x, axis=self.d, dtype=dt)

    def backward(self, g):
        x, out = self.saved_tensors
        if x.device is meta or x.ndim == 0 or not (x._data == 0).any():
            # d out_j / d x_k = out_j / x_k for j >= k: a reversed running sum, over x
            return (apply(Cumsum(self.d, reverse=True), g * out) / x,)
        return (apply(CumprodGradWithZeros(self.d), x, out, g),)


class CumprodGradWithZeros(Op):
    """cumprod's gradient where x has zeros: before a row's first zero the usual formula,
    at it the product of the others, after it 0 (each later product includes that zero)."""

    name = "cumprod_backward"
    differentiable = False

    def __init__(self, d: int) -> None:
        self.d = d

    def infer(self, x, out, g):
        return x.shape, g.dtype

    def forward(self, x, out, g):
        xp = self.device.xp
        d = self.d
        xr, orow = _rows(xp, x, d), _rows(xp, out, d)
        gr = _rows(xp, g.astype(x.dtype, copy=False), d)
        n = xr.shape[1]
        idx = xp.arange(n)
        zero = xr == 0
        first = xp.where(zero.any(1), zero.argmax(1), n)[:, None]
        with xp.errstate(divide="ignore", invalid="ignore"):
            before = xp.flip(xp.cumsum(xp.flip(gr * orow, 1), 1), 1) / xr
        # at the first zero z: out[z-1] * sum_{j >= z} g_j * prod_{z < i <= j} x_i
        ones_to_z = xp.where(idx <= first, 1, xr)
        tail = xp.cumprod(ones_to_z, 1)
        at_z = xp.sum(xp.where(idx >= first, gr * tail, 0), 1, keepdims=True)
        prev = xp.take_along_axis(orow, xp.maximum(first - 1, 0), 1)
        at_z = at_z * xp.where(first > 0, prev, 1)
        grad = xp.where(idx < first, before, xp.where(idx == first, at_z, 0))
        return _unrows(xp, grad.astype(g.dtype, copy=False), tuple(x.shape), d)


@public(method=True)
def cumprod(x: Tensor, dim: int, dtype=None) -> Tensor:
    """The running product along dim."""
    if dtype is not None:
        x = x.to(dtype)
    return apply(Cumprod(dim), x)


class CumExtremeIndex(Op):
    """Where the running max (min) along dim was last reached; NaN, once met, wins."""

    differentiable = False

    def __init__(self, dim: int, largest: bool) -> None:
        self.dim, self.largest = dim, largest
        self.name = "cummax" if largest else "cummin"

    def infer(self, x):
        if x.dtype.is_complex:  # PyTorch has no order of complex numbers
            from ..elementwise.complex_parts import refuse_complex

            refuse_complex(self.name, x)
        self.d = _one_dim(self.dim, x, self.name)
        return x.shape, _int64

    def forward(self, x):
        xp = self.device.xp
        if x.ndim == 0:
            return xp.zeros((), _int64.np)
        acc = xp.maximum if self.largest else xp.minimum
        running = acc.accumulate(x, axis=self.d)
        new = x == running
        if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
            new |= xp.isnan(x)
        shape = [1] * x.ndim
        shape[self.d] = x.shape[self.d]
        pos = xp.arange(x.shape[self.d]).reshape(shape)
        return xp.maximum.accumulate(xp.where(new, pos, 0), axis=self.d)


def _cum_extreme(x: Tensor, dim: int, largest: bool):
    from ..index.gather_scatter import gather

    indices = apply(CumExtremeIndex(dim, largest), x)
    values = gather(x, dim, indices) if x.ndim else x.clone()
    return (CummaxResult if largest else CumminResult)(values, indices)


@public(method=True)
def cummax(x: Tensor, dim: int):
    """(values, indices) of the running maximum along dim."""
    return _cum_extreme(x, dim, True)


@public(method=True)
def cummin(x: Tensor, dim: int):
    """(values, indices) of the running minimum along dim."""
    return _cum_extreme(x, dim, False)


class LogCumSumExp(Op):
    """log(cumsum(exp(x))) along dim, by a running logaddexp (no overflow, no underflow)."""

    name = "logcumsumexp"
    promotion = INT_TO_FLOAT

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x):
        self.d = _one_dim(self.dim, x, self.name)
        dt = x.dtype
        if dt.is_complex:  # NumPy's logaddexp has no complex accumulate
            from ..elementwise.complex_parts import complex_not_yet

            complex_not_yet(self.name, x, hint="logsumexp takes complex input")
        return x.shape, dt if dt.is_floating_point else promote(self.promotion, dt)

    def saved(self, x, out):
        return _KEEP_X_OUT

    def forward(self, x):
        if x.dtype.kind != "f":
            x = x.astype(_dt.default_float.np)
        if x.ndim == 0:
            return x.copy()
        return self.device.xp.logaddexp.accumulate(x, axis=self.d)

    def backward(self, g):
        x, out = self.saved_tensors
        return (apply(LogCumSumExpGrad(self.d), x, out, g),)


class LogCumSumExpGrad(Op):
    """sum_{j >= k} g_j exp(x_k - out_j), with g's positive and negative parts summed in
    log space (reversed running logaddexp) so that nothing overflows."""

    name = "logcumsumexp_backward"
    differentiable = False

    def __init__(self, d: int) -> None:
        self.d = d

    def infer(self, x, out, g):
        return x.shape, x.dtype

    def forward(self, x, out, g):
        if x.ndim == 0:
            return g.astype(x.dtype, copy=True)
        xp = self.device.xp
        d = self.d
        with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            def part(gp):
                r = xp.flip(xp.log(gp) - out, d)
                return xp.exp(x + xp.flip(xp.logaddexp.accumulate(r, axis=d), d))

            grad = part(xp.maximum(g, 0)) - part(xp.maximum(-g, 0))
        return grad.astype(x.dtype, copy=False)


@public(method=True)
def logcumsumexp(x: Tensor, dim: int) -> Tensor:
    """log(cumsum(exp(x), dim)), computed stably."""
    return apply(LogCumSumExp(dim), x)


@public(method=True)
def diff(x: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The n-th forward difference along dim (prepend/append joined first); bool uses xor."""
    from ..elementwise import logical_xor
    from ..movement import cat, narrow

    if x.ndim == 0:
        raise ShapeError("diff: expected a tensor with at least 1 dim", op="diff",
                         operands=[("input", describe(x))])
    if n < 0:
        raise ShapeError(f"diff: order n must be non-negative, got {n}", op="diff")
    d = _one_dim(dim, x, "diff")
    if n == 0:  # PyTorch returns the input unchanged, without prepend/append
        return x
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        parts = [p if p.ndim == x.ndim else p.expand(
            tuple(x.shape[:d]) + (1,) + tuple(x.shape[d + 1:])) for p in parts]
        x = cat(parts, d)
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        hi, lo = narrow(x, d, 1, size - 1), narrow(x, d, 0, size - 1)
        x = logical_xor(hi, lo) if x.dtype is _dt.bool_ else hi - lo
    return x


@public(sf=False, method=True)
def cumprod_(x: Tensor, dim: int, dtype=None) -> Tensor:
    """In-place cumprod."""
    from ..inplace import inplace

    return inplace(x, "cumprod_", lambda src: cumprod(src, dim, dtype))
