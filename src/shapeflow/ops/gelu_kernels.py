"""Phi(x) and d gelu / dx in float32: linear interpolation in float64-exact tables.

NumPy has no erf, and a rational erfc fit costs ~30 array passes per element (3.3 ns);
two table lookups and a few exact passes cost ~1.9 ns. The tables hold float64 values
rounded once, every 1/1024 over [-10, 10]; interpolation adds at most 3e-8 absolute error
(h^2/8 * max|f''|), so the result is within ~1.5e-7 of the true value (float32's own
spacing near 1 is 6e-8; PyTorch's float32 GELU is off by up to 1e-6 in the negative tail).
Beyond the table, Phi is 0 below -10 (true value < 8e-24) and 1 above 10.
Where backend/cpu/kernels.c is built, the same steps run in one compiled pass (bit for bit).
"""

from __future__ import annotations

import math

import numpy as np

from ..backend.cpu import kernels

STEPS = 1024  # table entries per unit of x: a power of two, so x * STEPS is exact
LIMIT = 10  # tables span [-LIMIT, LIMIT]
CHUNK = 32768  # elements per block: the scratch stays in L2, calls stay few
# entry k holds x = (k - _OFFSET) / STEPS; entry 0 sits one step below -LIMIT and is 0
_OFFSET = LIMIT * STEPS + 1
_tables: dict = {}


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _gelu_grad(x: float) -> float:
    return _phi(x) + x * math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, slopes) of `name` ('phi' or 'gelu_grad'), built on first use (~10 ms)."""
    t = _tables.get(name)
    if t is None:
        f = _phi if name == "phi" else _gelu_grad
        xs = (np.arange(2 * _OFFSET) - _OFFSET) / STEPS
        values = np.array([f(v) for v in xs])
        values[0] = 0.0
        slopes = np.append(np.diff(values), 0.0)
        t = _tables[name] = (values.astype(np.float32), slopes.astype(np.float32))
    return t


def _pairs(name: str) -> np.ndarray:
    """`name`'s (values, slopes) interleaved, the layout the compiled kernel reads."""
    key = name + " pairs"
    p = _tables.get(key)
    if p is None:
        p = _tables[key] = np.stack(_table(name), axis=1).reshape(-1)
    return p


def _interp_block(x, out, v, f, idx, table) -> None:
    """table(x) into out, for float32 blocks; v, f float32 and idx intp scratch."""
    values, slopes = table
    with np.errstate(over="ignore"):  # beyond float32's range: clipped to the table's end
        np.multiply(x, np.float32(STEPS), out=v)  # exact
    np.clip(v, np.float32(-_OFFSET), np.float32(LIMIT * STEPS), out=v)
    np.floor(v, out=f)
    np.subtract(v, f, out=v)  # the fraction in [0, 1): exact, as v and f are close
    f += np.float32(_OFFSET)  # exact: integers below 2^24
    with np.errstate(invalid="ignore"):  # NaN casts to some index; its fraction stays NaN
        np.copyto(idx, f, casting="unsafe")  # intp, as take would convert int32 twice
    np.take(values, idx, out=out, mode="clip")
    np.take(slopes, idx, out=f, mode="clip")
    f *= v
    out += f


def blockwise(x: np.ndarray, name: str, times: np.ndarray | None = None) -> np.ndarray:
    """table `name` at every element of x (times `times`, an array of x's shape), in x's dtype.

    Block by block, the temporaries cost a few blocks, not a few copies of x (what NumPy's
    whole-array expressions allocate; see the memory report's peak).
    """
    pairs = _pairs(name)
    out = kernels.interp_times(x, times, pairs, float(STEPS), float(_OFFSET))
    if out is not None:  # float32: the same steps in one compiled pass, bit for bit
        return out
    if x.dtype == kernels.BF16:  # the same float32 steps on the widened values, rounded once
        out = kernels.interp_times_bf16(x, times, pairs, float(STEPS), float(_OFFSET))
        if out is not None:
            return out
    flat = x.reshape(-1)
    factor = None if times is None else times.reshape(-1)
    n = flat.size
    res = np.empty(n, x.dtype)
    size = min(n, CHUNK)
    buf = np.empty((3, size), np.float32)
    idx = np.empty(size, np.intp)
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        k = b - a
        xb = flat[a:b]
        if xb.dtype != np.float32:  # 16-bit inputs are computed in float32
            conv = buf[2, :k]
            np.copyto(conv, xb, casting="unsafe")
            xb = conv
        out = res[a:b] if res.dtype == np.float32 else np.empty(k, np.float32)
        _interp_block(xb, out, buf[0, :k], buf[1, :k], idx[:k], _table(name))
        if factor is not None:
            out *= factor[a:b]
        if res.dtype != np.float32:
            res[a:b] = out
    return res.reshape(x.shape)
