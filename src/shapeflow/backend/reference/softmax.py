"""The softmax family's portable kernels, written against `self.xp`; and the blocked row
helpers (finite maxima, exp without a shift, out= buffers) the norm and loss kernels share.

Rows are worked in blocks of about `CHUNK` elements, so each block's scratch stays in cache
(about twice as fast as whole-array passes); their sums are the table's `row_sums` (the
matmul family's: a BLAS gemv on cpu). Helpers that sum take the table `k`.
"""

from __future__ import annotations

from .base import into

CHUNK = 1 << 16  # elements per block of rows (256 KiB of float32: stays in L2)

def blocks(rows: int, n: int):
    """Slices of rows covering [0, rows), each about CHUNK elements."""
    step = max(1, CHUNK // max(n, 1))
    for i in range(0, rows, step):
        yield slice(i, i + step)


def block_rows(rows: int, n: int) -> int:
    """Rows of one block's scratch buffer."""
    return min(rows, max(1, CHUNK // max(n, 1)))


def as_rows(a, n: int):
    """The array as [rows, n] over its trailing elements (a view when it can be)."""
    return a.reshape(-1, n) if n else a.reshape(a.size, 0)


def compute_dtype(xp, dtype):
    """float16/bfloat16 are computed in float32 (as PyTorch's CPU kernels do)."""
    return dtype if dtype.char in "fd" else xp.dtype("float32")


def finite_max(xp, a, axis: int, keep_inf: bool = False):
    """Row maxima, with non-finite ones replaced by 0 (so all -inf rows give exp(-inf) = 0).

    keep_inf keeps +inf maxima, as PyTorch's softmax does: x - max is NaN at the +inf
    entries, so the whole row is NaN (logsumexp instead gives +inf: keep_inf False)."""
    m = a.max(axis=axis, keepdims=True)
    bad = ~xp.isfinite(m)
    if bad.any():
        if keep_inf:
            bad &= m != xp.inf
        m[bad] = 0
    return m


# Softmax without the row maxima where it is safe: exp(x) itself cannot overflow when the
# block's largest value is <= 64, and row sums >= 2^-20 lose no probability above 1e-32 to
# underflow. NumPy's row max costs ~85 ns a row; one full max and one check cost ~1.
_NO_SHIFT_MAX, _NO_SHIFT_MIN_SUM = 64.0, 2.0**-20


def exp_rows_unshifted(k, xb, e):
    """exp(xb) into e and its row sums [rows, 1], or None where shifting by the max is
    needed."""
    top = xb.max() if xb.size else 0.0
    if not top <= _NO_SHIFT_MAX:  # also NaN
        return None
    k.xp.exp(xb, out=e)
    s = k.row_sums(e)[:, None]
    return s if s.min() >= _NO_SHIFT_MIN_SUM else None


def softmax_blocked(k, x2, out, log: bool, zero_empty: bool = False):
    """softmax (or log_softmax) of each row of x2 into out (may be x2 itself), in blocks."""
    xp = k.xp
    rows, n = x2.shape
    buf = xp.empty((block_rows(rows, n), n), out.dtype)
    with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in blocks(rows, n):
            xb, ob = x2[sl], out[sl]
            e = buf[: len(ob)]
            s = exp_rows_unshifted(k, xb, e)
            if s is not None:
                if log:
                    xp.subtract(xb, xp.log(s, out=s), out=ob)
                else:
                    xp.divide(e, s, out=ob)
                continue
            m = finite_max(xp, xb, 1, keep_inf=True)
            xp.subtract(xb, m, out=ob)
            if log:
                e = xp.exp(ob, out=e)
                s = k.row_sums(e)[:, None]
                ob -= xp.log(s, out=s)
            else:
                xp.exp(ob, out=ob)
                s = k.row_sums(ob)[:, None]
                if zero_empty:
                    s[s == 0] = 1  # a fully masked attention row gives zeros, as PyTorch does
                ob /= s
    return out


_causal_bounds: dict = {}


def causal_bound(xp, L: int, S: int, dtype):
    """[L, S]: +inf where a causal query may look, -inf above the diagonal.

    np.minimum with it masks the scores in one broadcast pass (a masked copyto is ~10x
    slower), and sends +inf scores above the diagonal to -inf too, as masked_fill does.
    """
    key = (xp, L, S, dtype.char)
    bound = _causal_bounds.get(key)
    if bound is None:
        if len(_causal_bounds) > 16:
            _causal_bounds.clear()
        bound = xp.where(xp.triu(xp.ones((L, S), bool), 1), -xp.inf, xp.inf).astype(dtype)
        _causal_bounds[key] = bound
    return bound


class SoftmaxKernels:
    """softmax kernels (a mixin of ReferenceKernels)."""

    def softmax(self, x, axis: int, log: bool = False, out=None):
        """softmax (log_softmax) of x along axis, in x's dtype (16-bit floats computed in
        float32); 0-d x is one row of one."""
        self.ran("log_softmax" if log else "softmax", self.path)
        xp = self.xp
        shape, dtype = x.shape, x.dtype
        if x.ndim == 0:
            x, axis = x.reshape(1), 0
        cdt = compute_dtype(xp, dtype)
        if x.dtype != cdt:
            x = x.astype(cdt)
        if x.size == 0:
            return into(xp.empty(shape, dtype), out)
        n = x.shape[axis]
        if axis == x.ndim - 1 and x.flags.c_contiguous:
            res = xp.empty(x.shape, cdt)
            softmax_blocked(self, as_rows(x, n), as_rows(res, n), log)
        else:
            with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
                res = xp.subtract(x, finite_max(xp, x, axis, keep_inf=True))
                if log:
                    res -= xp.log(xp.exp(res).sum(axis=axis, keepdims=True))
                else:
                    xp.exp(res, out=res)
                    res /= res.sum(axis=axis, keepdims=True)
        res = res.reshape(shape) if len(shape) == 0 else res
        return into(res.astype(dtype, copy=False), out)

    def softmax_blocked(self, x2, out=None, log: bool = False, zero_empty: bool = False):
        """softmax (log_softmax) of each row of x2 [rows, n] into out (x2 itself allowed),
        block by block; zero_empty: a row whose exps sum to 0 gives zeros, not NaN."""
        self.ran("softmax_blocked", self.path)
        if out is None:
            out = self.xp.empty(x2.shape, x2.dtype)
        return softmax_blocked(self, x2, out, log, zero_empty)

    def softmax_rows(self, x2, scale: float = 1.0, causal_period: int = 0,
                     zero_empty: bool = False):
        """In place: rows of x2 [rows, n] <- softmax(x2 * scale), causal when period > 0
        (entry j of row r kept where j <= r % period); returns x2."""
        self.ran("softmax_rows", self.path)
        xp = self.xp
        x2 *= x2.dtype.type(scale)
        if causal_period > 0 and x2.size:
            n = x2.shape[1]
            v = x2.reshape(-1, causal_period, n)
            xp.minimum(v, causal_bound(xp, causal_period, n, x2.dtype), out=v)
        if x2.size:
            softmax_blocked(self, x2, x2, False, zero_empty)
        return x2

    def softmax_backward(self, p, g, axis: int, scale: float = 1.0, mask=None, out=None):
        """d softmax: scale * p * (m*g - sum(p * m*g)) along axis, m a keep mask (or None)."""
        self.ran("softmax_backward", self.path)
        xp = self.xp
        dx = xp.multiply(g, p, dtype=p.dtype)
        if mask is not None:
            dx *= mask
        n = p.shape[axis]
        if axis == p.ndim - 1 and p.flags.c_contiguous and dx.flags.c_contiguous:
            d2, p2 = as_rows(dx, n), as_rows(p, n)
            buf = xp.empty((block_rows(len(p2), n), n), p.dtype)
            for sl in blocks(len(p2), n):
                db = d2[sl]
                s = self.row_sums(db)[:, None]
                db -= xp.multiply(p2[sl], s, out=buf[: len(db)])
        else:
            dx -= p * dx.sum(axis=axis, keepdims=True)
        if scale != 1.0:
            dx *= scale
        return into(dx, out)
