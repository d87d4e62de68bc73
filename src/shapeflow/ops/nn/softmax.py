"""softmax and log_softmax, and the blocked row kernels (softmax, logsumexp) they share."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...backend.cpu import kernels
from ...shape import normalize_dim
from ...tensor import Tensor
from ..base import OUT_ACT, Op, apply
from ..blas_sum import row_sums
from ._common import _CHUNK, _as_rows, _blocks, _compute_np, _create_graph, _need_float


def _finite_max(a: np.ndarray, axis: int, keep_inf: bool = False) -> np.ndarray:
    """Row maxima, with non-finite ones replaced by 0 (so all -inf rows give exp(-inf) = 0).

    keep_inf keeps +inf maxima, as PyTorch's softmax does: x - max is NaN at the +inf
    entries, so the whole row is NaN (logsumexp instead gives +inf: keep_inf False)."""
    m = a.max(axis=axis, keepdims=True)
    bad = ~np.isfinite(m)
    if bad.any():
        if keep_inf:
            bad &= m != np.inf
        m[bad] = 0
    return m


# Softmax without the row maxima where it is safe: exp(x) itself cannot overflow when the
# block's largest value is <= 64, and row sums >= 2^-20 lose no probability above 1e-32 to
# underflow. NumPy's row max costs ~85 ns a row; one full max and one check cost ~1.
_NO_SHIFT_MAX, _NO_SHIFT_MIN_SUM = 64.0, 2.0**-20


def _exp_rows_unshifted(xb: np.ndarray, e: np.ndarray):
    """exp(xb) into e and its row sums [k, 1], or None where shifting by the max is needed."""
    top = xb.max() if xb.size else 0.0
    if not top <= _NO_SHIFT_MAX:  # also NaN
        return None
    np.exp(xb, out=e)
    s = row_sums(e)[:, None]
    return s if s.min() >= _NO_SHIFT_MIN_SUM else None


def _softmax_rows(x2: np.ndarray, out: np.ndarray, log: bool, zero_empty: bool = False):
    """softmax (or log_softmax) of each row of x2 into out (may be x2 itself)."""
    rows, n = x2.shape
    buf = np.empty((min(rows, max(1, _CHUNK // max(n, 1))), n), out.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in _blocks(rows, n):
            xb, ob = x2[sl], out[sl]
            e = buf[: len(ob)]
            s = _exp_rows_unshifted(xb, e)
            if s is not None:
                if log:
                    np.subtract(xb, np.log(s, out=s), out=ob)
                else:
                    np.divide(e, s, out=ob)
                continue
            m = _finite_max(xb, 1, keep_inf=True)
            np.subtract(xb, m, out=ob)
            if log:
                e = np.exp(ob, out=e)
                s = row_sums(e)[:, None]
                ob -= np.log(s, out=s)
            else:
                np.exp(ob, out=ob)
                s = row_sums(ob)[:, None]
                if zero_empty:
                    s[s == 0] = 1  # a fully masked attention row gives zeros, as PyTorch does
                ob /= s
    return out


def _softmax_np(x: np.ndarray, axis: int, log: bool, out_dtype) -> np.ndarray:
    shape = x.shape
    if x.ndim == 0:
        x, axis = x.reshape(1), 0
    if x.dtype == kernels.BF16 and axis == x.ndim - 1 and x.size and x.flags.c_contiguous:
        # one compiled pass: each row widened, the float32 kernel, one rounding (as PyTorch)
        out = kernels.softmax_rows_bf16(_as_rows(x, x.shape[-1]), log)
        if out is not None:
            return out.reshape(shape)
    cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
    if x.dtype != cdt:
        x = x.astype(cdt)
    if x.size == 0:
        return np.empty(shape, out_dtype)
    n = x.shape[axis]
    zero_d = len(shape) == 0
    if axis == x.ndim - 1 and x.flags.c_contiguous:
        out = np.empty(x.shape, cdt)
        _softmax_rows(_as_rows(x, n), _as_rows(out, n), log)
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = np.subtract(x, _finite_max(x, axis, keep_inf=True))
            if log:
                out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))
            else:
                np.exp(out, out=out)
                out /= out.sum(axis=axis, keepdims=True)
    return (out.reshape(shape) if zero_d else out).astype(out_dtype, copy=False)


def _lse_rows(x2: np.ndarray) -> np.ndarray:
    """logsumexp of each row of a [rows, n] array (stable, blocked), shape [rows]."""
    rows, n = x2.shape
    out = np.empty(rows, x2.dtype)
    buf = np.empty((min(rows, max(1, _CHUNK // max(n, 1))), n), x2.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in _blocks(rows, n):
            xb = x2[sl]
            b = buf[: len(xb)]
            s = _exp_rows_unshifted(xb, b)
            if s is not None:
                out[sl] = np.log(s[:, 0])
                continue
            m = _finite_max(xb, 1)
            np.subtract(xb, m, out=b)
            np.exp(b, out=b)
            s = row_sums(b)
            out[sl] = np.log(s, out=s) + m[:, 0]
    return out


class Softmax(Op):
    name = "softmax"
    log = False

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x):
        _need_float(self.name, x)
        # on 0-d too: dims other than 0 and -1 are out of range there, as in PyTorch
        self.axis = normalize_dim(self.dim, x.ndim, self.name) if x.ndim or \
            self.dim is not None else 0
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,)

    def forward(self, x):
        return _softmax_np(x, self.axis, self.log, x.dtype)

    def backward(self, g):
        (out,) = self.saved_tensors
        d = self.axis if out.ndim else None
        if _create_graph() or out.ndim == 0:
            return (out * (g - (g * out).sum(d, keepdim=True)),)
        return (apply(SoftmaxBackward(self.axis), out, g),)


class LogSoftmax(Softmax):
    name = "log_softmax"
    log = True

    def backward(self, g):
        (out,) = self.saved_tensors
        d = self.axis if out.ndim else None
        return (g - out.exp() * g.sum(d, keepdim=True),)


class SoftmaxBackward(Op):
    """d softmax: scale * p * (m*g - sum(p * m*g)) along axis, for g, p and a keep mask m."""

    name = "softmax_backward"
    differentiable = False

    def __init__(self, axis: int, scale: float = 1.0) -> None:
        self.axis, self.scale = axis, scale

    def infer(self, p, g, *mask):
        return p.shape, p.dtype

    def forward(self, p, g, mask=None):
        n = p.shape[self.axis]
        if mask is None and self.axis == p.ndim - 1 and n:
            dx = kernels.softmax_backward(_as_rows(p, n), _as_rows(g, n), self.scale)
            if dx is not None:  # one compiled pass over each row, twice
                return dx.reshape(p.shape)
        dx = np.multiply(g, p, dtype=p.dtype)
        if mask is not None:
            dx *= mask
        n = p.shape[self.axis]
        if self.axis == p.ndim - 1 and p.flags.c_contiguous and dx.flags.c_contiguous:
            d2, p2 = _as_rows(dx, n), _as_rows(p, n)
            buf = np.empty((min(len(p2), max(1, _CHUNK // max(n, 1))), n), p.dtype)
            for sl in _blocks(len(p2), n):
                db = d2[sl]
                s = row_sums(db)[:, None]
                db -= np.multiply(p2[sl], s, out=buf[: len(db)])
        else:
            dx -= p * dx.sum(axis=self.axis, keepdims=True)
        if self.scale != 1.0:
            dx *= self.scale
        return dx


def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim (computed stably); dim is required."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(Softmax(dim), input)


def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """x - logsumexp(x) along dim (stable); dim is required."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(LogSoftmax(dim), input)
