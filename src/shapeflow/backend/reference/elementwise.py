"""The elementwise family's portable kernels, written against `self.xp`: casts, 16-bit
arithmetic, sigmoid and SiLU, and GELU's Phi(x) tables.

GELU's tables: NumPy has no erf, and a rational erfc fit costs ~30 array passes per element;
two table lookups and a few exact passes cost ~1.9 ns. The tables hold float64 values
rounded once, every 1/1024 over [-10, 10]; interpolation adds at most 3e-8 absolute error
(h^2/8 * max|f''|), so Phi is within ~1.5e-7 of the true value (float32's own spacing near
1 is 6e-8; PyTorch's float32 GELU is off by up to 1e-6 in the negative tail). Beyond the
table, Phi is 0 below -10 (true value < 8e-24) and 1 above 10. backend/cpu/kernels.c runs
the same steps in one compiled pass (bit for bit).
"""

from __future__ import annotations

import math

from .base import into

STEPS = 1024  # table entries per unit of x: a power of two, so x * STEPS is exact
LIMIT = 10  # tables span [-LIMIT, LIMIT]
CHUNK = 32768  # elements per block: the scratch stays in L2, calls stay few
# entry k holds x = (k - OFFSET) / STEPS; entry 0 sits one step below -LIMIT and is 0
OFFSET = LIMIT * STEPS + 1
_SQRT_2 = math.sqrt(2.0)


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _gelu_grad(x: float) -> float:
    return _phi(x) + x * math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


class ElementwiseKernels:
    """elementwise kernels (a mixin of ReferenceKernels)."""

    GELU_STEPS, GELU_CHUNK, GELU_OFFSET = STEPS, CHUNK, OFFSET  # the tables' layout

    # ---- casts -------------------------------------------------------------------------
    def cast(self, x, dtype, out=None):
        """x as `dtype` (a NumPy dtype; floats rounded to nearest even)."""
        self.ran("cast", self.path)
        if out is None:
            return x.astype(dtype)
        self.xp.copyto(out, x, casting="unsafe")
        return out

    # ---- 16-bit float arithmetic --------------------------------------------------------
    def bf16_binary(self, name: str, a, b, out=None):
        """The namespace function `name` ('add', 'multiply', ...) of bfloat16 a and b of one
        shape: each value computed in float32 and rounded once."""
        self.ran("bf16_binary", self.path)
        return into(getattr(self.xp, name)(a, b), out)

    # ---- activations ---------------------------------------------------------------------
    def sigmoid(self, x, out=None):
        """PyTorch's 1 / (1 + exp(-x)) (an array even for 0-d input).

        0.5 * (1 + tanh(x / 2)) cancels below 0 (float32 gave 0 below x = -17); exp(-x)
        overflows to inf only where the result is 0 anyway, as PyTorch's does; the
        sign-split e / (1 + e) with e = exp(-|x|) takes ~1.7x as long in NumPy."""
        xp = self.xp
        x = xp.asarray(x)
        out = xp.negative(x, out=xp.empty_like(x) if out is None else out)
        with xp.errstate(over="ignore"):
            xp.exp(out, out=out)
        out += 1.0
        return xp.divide(1.0, out, out=out)  # NumPy's reciprocal is slower

    def silu(self, x, out=None):
        """x * sigmoid(x)."""
        self.ran("silu", self.path)
        with self.xp.errstate(invalid="ignore"):  # -inf * 0: NaN, as PyTorch's, quietly
            return into(x * self.sigmoid(x), out)

    def silu_backward(self, g, x, out=None):
        """g * d silu(x) / dx: PyTorch's g * s * (1 + x * (1 - s)), s = sigmoid(x)."""
        self.ran("silu_backward", self.path)
        xp = self.xp
        s = self.sigmoid(x)
        r = xp.multiply(g, s, out=out)
        xp.subtract(1.0, s, out=s)  # the composite's order of operations
        with xp.errstate(invalid="ignore"):  # x = +-inf: NaN, as PyTorch's
            s *= x
            s += 1.0
            r *= s
        return r

    # ---- GELU: Phi(x) and d gelu / dx ---------------------------------------------------
    def normal_cdf(self, x, out=None):
        """Phi(x): float64 through math.erf exactly, other dtypes from the float32 table."""
        if x.dtype.char != "d":
            return self.gelu_table(x, "phi", None, out)
        xp = self.xp
        scaled = (x / _SQRT_2).reshape(-1).tolist()
        erf = xp.asarray([math.erf(v) for v in scaled], xp.float64).reshape(x.shape)
        return into(0.5 * (1.0 + erf), out)

    def gelu_pairs(self, name: str):
        """`name`'s (values, slopes) table interleaved, the layout the compiled kernel reads;
        built on first use (~10 ms) and kept for this table's namespace."""
        return _tables(self.xp, name)[1]

    def gelu_table(self, x, name: str, times=None, out=None):
        """Table `name` ('phi' or 'gelu_grad') at every element of float32 or 16-bit x
        (times `times`, an array of x's shape), in x's dtype: float32 steps, block by block,
        so the temporaries cost a few blocks, not a few copies of x."""
        self.ran("gelu_table", self.path)
        xp = self.xp
        values, slopes = _tables(xp, name)[0]
        flat = x.reshape(-1)
        factor = None if times is None else times.reshape(-1)
        n = flat.size
        res = xp.empty(n, x.dtype)
        f32 = xp.dtype("float32")
        size = min(n, CHUNK)
        buf = xp.empty((3, size), f32)
        idx = xp.empty(size, xp.intp)
        for a in range(0, n, CHUNK):
            b = min(a + CHUNK, n)
            k = b - a
            xb = flat[a:b]
            if xb.dtype != f32:  # 16-bit inputs are computed in float32
                conv = buf[2, :k]
                xp.copyto(conv, xb, casting="unsafe")
                xb = conv
            blk = res[a:b] if res.dtype == f32 else xp.empty(k, f32)
            _interp_block(xp, xb, blk, buf[0, :k], buf[1, :k], idx[:k], values, slopes)
            if factor is not None:
                blk *= factor[a:b]
            if res.dtype != f32:
                res[a:b] = blk
        return into(res.reshape(x.shape), out)


_built: dict = {}


def _tables(xp, name: str):
    """((values, slopes), pairs) of table `name` in float32 on the namespace xp."""
    key = (id(xp), name)
    t = _built.get(key)
    if t is None:
        f = _phi if name == "phi" else _gelu_grad
        values = [f((k - OFFSET) / STEPS) for k in range(2 * OFFSET)]
        values[0] = 0.0
        v64 = xp.asarray(values, xp.float64)
        slopes = xp.concatenate([xp.diff(v64), xp.zeros(1, xp.float64)])
        pair = (v64.astype(xp.float32), slopes.astype(xp.float32))
        t = _built[key] = (pair, xp.stack(pair, axis=1).reshape(-1), xp)  # xp kept: its id
    return t


def _interp_block(xp, x, out, v, f, idx, values, slopes) -> None:
    """The table at x into out, for float32 blocks; v, f float32 and idx intp scratch."""
    f32 = xp.float32
    with xp.errstate(over="ignore"):  # beyond float32's range: clipped to the table's end
        xp.multiply(x, f32(STEPS), out=v)  # exact
    xp.clip(v, f32(-OFFSET), f32(LIMIT * STEPS), out=v)
    xp.floor(v, out=f)
    xp.subtract(v, f, out=v)  # the fraction in [0, 1): exact, as v and f are close
    f += f32(OFFSET)
    with xp.errstate(invalid="ignore"):  # NaN casts to some index; its fraction stays NaN
        xp.copyto(idx, f, casting="unsafe")  # intp, as take would convert int32 twice
    xp.take(values, idx, out=out, mode="clip")
    xp.take(slopes, idx, out=f, mode="clip")
    f *= v
    out += f
