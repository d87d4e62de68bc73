"""The norm family's portable kernels, written against `self.xp`: layer and rms norm over
rows, batch norm over [N, C, L], instance norm over planes [N * C, L], and their backwards.

Statistics are computed in float32 for 16-bit inputs (float64 stays float64); each kernel
says which arrays come back in the input's dtype and which in the compute dtype.
"""

from __future__ import annotations

from .base import into, into_all
from .softmax import block_rows, blocks, compute_dtype


class NormKernels:
    """norm kernels (a mixin of ReferenceKernels)."""

    # ---- layer norm and rms norm over rows ------------------------------------------------
    def layer_norm(self, x2, w, b, eps: float, rms: bool = False, out=None):
        """(y [rows, n] in x2's dtype, mean [rows, 1] or None for rms, rstd [rows, 1] in the
        compute dtype) of (x - mean) * rstd * w + b per row; w, b [n] in the compute dtype."""
        self.ran("rms_norm" if rms else "layer_norm", self.path)
        xp = self.xp
        rows, n = x2.shape
        cdt = compute_dtype(xp, x2.dtype)
        y = xp.empty((rows, n), cdt)
        mean = None if rms else xp.empty((rows, 1), cdt)
        rstd = xp.empty((rows, 1), cdt)
        buf = xp.empty((block_rows(rows, n), n), cdt)
        for sl in blocks(rows, n):
            xb, ob = x2[sl], y[sl]
            if xb.dtype != cdt:
                xb = xb.astype(cdt)
            if rms:
                v = self.row_means(xp.square(xb, out=buf[: len(xb)]))
                xp.copyto(ob, xb)
            else:
                m = self.row_means(xb)
                xp.subtract(xb, m, out=ob)
                v = self.row_means(xp.square(ob, out=buf[: len(xb)]))
                mean[sl] = m
            v += eps
            r = xp.sqrt(v, out=v)
            xp.reciprocal(r, out=r)
            ob *= r
            rstd[sl] = r
            if w is not None:
                ob *= w
            if b is not None:
                ob += b
        return into_all((y.astype(x2.dtype, copy=False), mean, rstd), out)

    def layer_norm_backward(self, g2, x2, mean, rstd, w, with_dw: bool = False, out=None):
        """(dx [rows, n], dw [n] or None) in x2's dtype, of layer norm (rms norm when mean is
        None) from rows g2, x2, the saved mean/rstd [rows, 1] and w [n] (or None)."""
        self.ran("layer_norm_backward", self.path)
        xp = self.xp
        rows, n = x2.shape
        cdt = rstd.dtype
        r2 = rstd.reshape(-1, 1)
        m2 = None if mean is None else mean.reshape(-1, 1)
        w1 = None if w is None else w.astype(cdt, copy=False)
        dx = xp.empty((rows, n), cdt)
        step = block_rows(rows, n)
        xh_buf, dh_buf = xp.empty((step, n), cdt), xp.empty((step, n), cdt)
        dw = xp.zeros(n, cdt) if with_dw else None
        for sl in blocks(rows, n):
            xb, gb, ob, rb = x2[sl], g2[sl], dx[sl], r2[sl]
            k = len(xb)
            xhat = xh_buf[:k]
            if m2 is None:
                xp.multiply(xb, rb, out=xhat)
            else:
                xp.subtract(xb, m2[sl], out=xhat)
                xhat *= rb
            if w1 is not None:
                dxhat = xp.multiply(gb, w1, out=dh_buf[:k])
            else:
                dxhat = gb if gb.dtype == cdt else gb.astype(cdt)
            if dw is not None:  # g * xhat, summed over rows (ob is free until below)
                dw += self.col_sums(xp.multiply(gb, xhat, out=ob))
            xp.multiply(dxhat, xhat, out=ob)
            c = self.row_means(ob)
            xhat *= c
            xp.subtract(dxhat, xhat, out=ob)
            if m2 is not None:
                ob -= self.row_means(dxhat)
            ob *= rb
        if dw is not None:
            dw = dw.astype(x2.dtype, copy=False)
        return into_all((dx.astype(x2.dtype, copy=False), dw), out)

    def layer_norm_weight_backward(self, g2, x2, mean, rstd, out=None):
        """d weight [n] (in x2's dtype) of layer norm: the sum over rows of g * xhat."""
        self.ran("layer_norm_weight_backward", self.path)
        xp = self.xp
        cdt = rstd.dtype
        n = x2.shape[1]
        r2 = rstd.reshape(-1, 1)
        m2 = None if mean is None else mean.reshape(-1, 1)
        acc = xp.zeros(n, cdt)
        buf = xp.empty((block_rows(len(x2), n), n), cdt)
        for sl in blocks(len(x2), n):
            xb = x2[sl]
            xhat = buf[: len(xb)]
            if m2 is None:
                xp.multiply(xb, r2[sl], out=xhat)
            else:
                xp.subtract(xb, m2[sl], out=xhat)
                xhat *= r2[sl]
            xhat *= g2[sl]
            acc += self.col_sums(xhat)
        return into(acc.astype(x2.dtype, copy=False), out)

    # ---- batch norm over [N, C, L] ----------------------------------------------------------
    def batch_norm(self, x3, w, b, eps: float, running=None, out=None):
        """(y [N, C, L], mean [C], invstd [C], sq [C] or None) of batch norm over x3 in its
        compute dtype (float32/64): the batch's statistics (sq, the sum of squared deviations,
        for the running variance) or, given `running` (mean, var), those."""
        self.ran("batch_norm", self.path)
        xp = self.xp
        cdt = x3.dtype
        sq = None
        if running is None:
            n = x3.shape[0] * x3.shape[2]
            mean = x3.sum(axis=2).sum(axis=0) / n
            xc = x3 - mean[:, None]
            sq = xp.einsum("ncl,ncl->c", xc, xc)
            var = sq / n
        else:
            rm, rv = running
            mean, var = rm.astype(cdt), rv.astype(cdt)
            xc = x3 - mean[:, None]
        invstd = 1.0 / xp.sqrt(var + eps)
        scale = invstd if w is None else invstd * w
        xc *= scale.astype(cdt, copy=False)[:, None]
        if b is not None:
            xc += b.astype(cdt, copy=False)[:, None]
        return into_all((xc, mean.astype(cdt), invstd.astype(cdt), sq), out)

    def batch_norm_backward(self, g3, x3, mean, invstd, w, training: bool, out=None):
        """(dx [N, C, L], dw [C], db [C]) of batch norm, in the compute dtype of g3 and x3
        (float32/64); `training`: the statistics were the batch's (they depend on x)."""
        self.ran("batch_norm_backward", self.path)
        xp = self.xp
        cdt = invstd.dtype
        n = x3.shape[0] * x3.shape[2]
        sum_g = g3.sum(axis=2).sum(axis=0)
        dot = xp.einsum("ncl,ncl->c", g3, x3) - mean * sum_g  # sum g * (x - mean)
        k1 = invstd if w is None else invstd * w.astype(cdt, copy=False)
        if training:
            k2 = -k1 * invstd * invstd * dot / n
            k3 = -k1 * sum_g / n - mean * k2
        dx = g3 * k1[:, None]
        if training:
            dx += x3 * k2[:, None]
            dx += k3[:, None]
        return into_all((dx, dot * invstd, sum_g), out)

    # ---- instance norm over planes [N * C, L] -----------------------------------------------
    def instance_norm(self, x2, w, b, C: int, eps: float, out=None):
        """(y, mean [N*C], rstd [N*C]) of the planes x2 [N*C, L] (plane r is channel r % C),
        the affine w, b [C] (or None) applied; all in x2's dtype (float32/64)."""
        self.ran("instance_norm", self.path)
        xp = self.xp
        rows, L = x2.shape
        y, mean, rstd = xp.empty_like(x2), xp.empty(rows, x2.dtype), xp.empty(rows, x2.dtype)
        mean[:] = x2.mean(1)
        xp.subtract(x2, mean[:, None], out=y)
        rstd[:] = 1.0 / xp.sqrt(xp.einsum("rl,rl->r", y, y) / L + eps)
        scale = rstd.reshape(-1, C) * (w if w is not None else 1)
        y *= scale.reshape(-1, 1)
        if b is not None:
            y.reshape(-1, C, L)[...] += b[:, None]
        return into_all((y, mean, rstd), out)

    def instance_norm_backward(self, g2, x2, mean, rstd, w, C: int, need_x: bool,
                               need_wb: bool, out=None):
        """(dx [N*C, L] or None, dw [C] or None, db [C] or None) of instance_norm; dw and db
        (float64) summed over the batch."""
        self.ran("instance_norm_backward", self.path)
        xp = self.xp
        rows, L = x2.shape
        f64 = xp.dtype("float64")
        dx = xp.empty_like(x2) if need_x else None
        dw = xp.zeros(C, f64) if need_wb else None
        db = xp.zeros(C, f64) if need_wb else None
        sum_g = g2.sum(1)
        dot = xp.einsum("rl,rl->r", g2, x2) - mean * sum_g  # sum g * (x - mean)
        if need_wb:
            dw[:] = (dot * rstd).reshape(-1, C).sum(0, dtype=f64)
            db[:] = sum_g.reshape(-1, C).sum(0, dtype=f64)
        if need_x:
            k1 = rstd if w is None else (rstd.reshape(-1, C) * w).reshape(-1)
            k2 = -k1 * rstd * rstd * dot / L
            k3 = -k1 * sum_g / L - mean * k2
            xp.multiply(g2, k1[:, None], out=dx)
            dx += x2 * k2[:, None]
            dx += k3[:, None]
        return into_all((dx, dw, db), out)
