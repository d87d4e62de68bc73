"""The matmul family's portable kernels, written against `self.xp`: products (plain, with a
row bias, accumulating, batched) and sums, which a BLAS runs as products with ones."""

from __future__ import annotations

from .base import into


def _half(dtype) -> bool:
    """Whether `dtype` is a 16-bit float (bfloat16, float16): products and sums accumulate
    in float32 and round once, as PyTorch's do."""
    return dtype.itemsize == 2 and dtype.kind not in "biu"


class MatmulKernels:
    """matmul kernels (a mixin of ReferenceKernels)."""

    def matmul(self, a, b, out=None):
        """a @ b for operands of 1 or more dims (batch dims broadcast)."""
        return self.matmul_bias(a, b, None, out)

    def bmm(self, a, b, out=None):
        """a @ b batched (any rank, batch dims broadcast): matmul, never a 2-D-only path."""
        return self.matmul_bias(a, b, None, out)

    def matmul_bias(self, a, b, bias, out=None):
        """a @ b + bias (broadcast over rows; None: none), rounded once for 16-bit floats."""
        xp = self.xp
        dtype = a.dtype
        if _half(dtype):
            f32 = xp.float32
            r = xp.matmul(a.astype(f32), b.astype(f32))
            if bias is not None:
                r += bias.astype(f32)
            return into(r.astype(dtype), out)
        r = xp.matmul(a, b, out=out)
        if bias is not None:
            r += bias
        return r

    def matmul_accumulate(self, a, b, out):
        """out += a @ b in place (2-D; out may be a row block of a bigger array)."""
        if _half(a.dtype):
            f32 = self.xp.float32
            out[...] = (out.astype(f32) + self.xp.matmul(a.astype(f32), b.astype(f32))
                        ).astype(out.dtype)
            return out
        out += a @ b
        return out

    # ---- sums: a BLAS runs them as products with a vector of ones -------------------------
    def sum(self, x, axes: tuple, keepdims: bool = False, dtype=None, out=None):
        """x summed over `axes` (sorted) in `dtype` (None: x's); 16-bit floats in float32."""
        xp = self.xp
        dtype = x.dtype if dtype is None else dtype
        if _half(dtype):
            r = xp.asarray(xp.sum(x, axis=axes, keepdims=keepdims, dtype=xp.float32))
            return into(r.astype(dtype), out)
        return xp.sum(x, axis=axes, keepdims=keepdims, dtype=dtype, out=out)

    def row_sums(self, x2, out=None):
        """Sums of the rows of a 2-D float array, shape [rows]."""
        return x2.sum(axis=1, out=out)

    def col_sums(self, x2, out=None):
        """Sums of the columns of a 2-D float array, shape [cols]."""
        return x2.sum(axis=0, out=out)

    def row_means(self, x2, out=None):
        """Means of the rows of a 2-D float array, shape [rows, 1]."""
        m = self.row_sums(x2)[:, None]
        m /= x2.shape[1]
        return into(m, out)
