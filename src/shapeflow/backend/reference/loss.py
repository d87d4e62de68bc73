"""The loss family's portable kernels, written against `self.xp`: cross entropy (log_softmax
and nll in one pass, class indices or probabilities, weights, label smoothing) and nll_loss,
forward and backward; and two layers' gradients (linear's bias, embedding's table).

Logits [N, C, d1, ...] (class dim 1) or [C] are worked as rows [rows, C]. Class targets out
of range raise ShapeIndexError here, where they are read.
"""

from __future__ import annotations

from ...errors import ShapeIndexError
from ...shape import format_shape
from .base import into
from .softmax import block_rows, blocks, compute_dtype, exp_rows_unshifted, finite_max


def batch_shape(shape) -> tuple:
    """The logits' shape without the class dim (dim 1, or dim 0 of [C])."""
    cax = 1 if len(shape) >= 2 else 0
    return tuple(shape[:cax]) + tuple(shape[cax + 1:])


def _rows(xp, a):
    """[N, C, d1, ...] (class dim 1) or [C] as [rows, C]."""
    if a.ndim == 1:
        return a.reshape(1, -1)
    if a.ndim == 2:
        return a
    return xp.moveaxis(a, 1, -1).reshape(-1, a.shape[1])


def _unrows(xp, a2, shape):
    if len(shape) == 2:
        return a2
    if len(shape) < 2:
        return a2.reshape(shape)
    return xp.moveaxis(a2.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


def class_targets(xp, op: str, t2, C: int, ignore_index: int):
    """(valid mask or None, targets with ignored entries set to 0); ShapeIndexError if a
    target is out of range."""
    valid = t2 != ignore_index
    if valid.all():
        valid, tt = None, t2
    else:
        tt = xp.where(valid, t2, 0)
    if tt.size and (int(tt.min()) < 0 or int(tt.max()) >= C):
        bad = tt[(tt < 0) | (tt >= C)]
        raise ShapeIndexError(
            f"{op}: target class {int(bad.reshape(-1)[0])} is out of range for {C} classes "
            f"(valid classes are 0..{C - 1}, or ignore_index={ignore_index})", op=op,
            operands=[("target", f"{format_shape(t2.shape)} {t2.dtype}")],
            hint="check the number of classes the model outputs against the labels")
    return valid, tt


def _row_weights(xp, w, tt, valid, cdt):
    """Per-row weight w[target] (1 without weights), 0 for ignored rows."""
    if w is not None:
        wt = w.astype(cdt, copy=False)[tt]
        if valid is not None:
            wt = wt * valid
    else:
        wt = xp.ones(len(tt), cdt) if valid is None else valid.astype(cdt)
    return wt


def _smoothed(y2, eps, C, w, cdt):
    """Class-probability targets with label smoothing and class weights applied."""
    wy = y2 * (1 - eps) + eps / C if eps else y2.copy() if w is not None else y2
    if w is not None:
        wy *= w.astype(cdt, copy=False)
    return wy


def _coef_dot(k, b, coef, sl: slice):
    """sum over j of coef[.., j] * b[:, j] per row (coef None: ones; [C]; or [rows, C])."""
    if coef is None:
        return k.row_sums(b)
    if coef.ndim == 1:
        return b @ coef
    return k.xp.einsum("ij,ij->i", b, coef[sl])


def _max_logsum(k, x2, dot: bool = False, coef=None):
    """(m, log(sum(exp(x - m))), d) per row of [rows, C], m the row max (0 where not finite).

    Kept apart, lse - x[t] = (m - x[t]) + logsum loses nothing to lse's rounding (at logits
    of 1e5 float32's spacing, 0.008, would be the loss's error). With `dot`, d is the sum
    over j of coef[.., j] * (m - x[:, j]) (coef None: ones; [C] or [rows, C]), from the same
    pass, else None. A +inf logit gives NaN."""
    xp = k.xp
    rows, n = x2.shape
    m, logs = xp.zeros(rows, x2.dtype), xp.full(rows, -xp.inf, x2.dtype)
    d = xp.zeros(rows, x2.dtype) if dot else None
    if n == 0:
        return m, logs, d
    buf = xp.empty((block_rows(rows, n), n), x2.dtype)
    with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in blocks(rows, n):
            xb = x2[sl]
            b = buf[: len(xb)]
            # logits <= 64 need no shift (m = 0): lse - x then cancels at most ~1e-5
            s = exp_rows_unshifted(k, xb, b)
            if s is None:
                mb = finite_max(xp, xb, 1)
                xp.subtract(xb, mb, out=b)
                if dot:  # x - m, before exp overwrites it
                    d[sl] = -_coef_dot(k, b, coef, sl)
                xp.exp(b, out=b)
                s = k.row_sums(b)
                m[sl] = mb[:, 0]
            else:
                s = s[:, 0]
                if dot:
                    d[sl] = -_coef_dot(k, xb, coef, sl)
            logs[sl] = xp.log(s, out=s)
    logs[logs == xp.inf] = xp.nan  # as PyTorch's log_softmax: x - max is NaN at +inf
    return m, logs, d


class LossKernels:
    """loss kernels (a mixin of ReferenceKernels)."""

    def cross_entropy(self, x, t, w, ignore_index: int, reduction: str,
                      label_smoothing: float = 0.0, prob: bool = False, with_lse: bool = True,
                      out=None):
        """(loss in x's dtype: 0-d, or the batch shape for reduction 'none'; the logsumexp
        per row in float64, of the batch shape, or None) of logits x against class indices t
        (or probabilities t of x's shape: `prob`), class weights w [C] or None."""
        self.ran("cross_entropy", self.path)
        xp = self.xp
        cdt = compute_dtype(xp, x.dtype)
        batch = batch_shape(x.shape)
        x2 = _rows(xp, x)
        if x2.dtype != cdt:
            x2 = x2.astype(cdt)
        R, C = x2.shape
        eps = label_smoothing
        w1 = None if w is None else w.astype(cdt, copy=False)
        # sum_j c_j (lse - x_j) = logs * sum_j c_j + sum_j c_j (m - x_j): no cancellation
        if prob:
            wy = _smoothed(_rows(xp, t).astype(cdt, copy=False), eps, C, w, cdt)
            m, logs, dot = _max_logsum(self, x2, True, wy)
        else:
            m, logs, dot = _max_logsum(self, x2, bool(eps), w1)
        with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if prob:
                loss = logs * wy.sum(axis=1) + dot
                denom = R
            else:
                valid, tt = class_targets(xp, "cross_entropy", t.reshape(-1), C, ignore_index)
                wt = _row_weights(xp, w, tt, valid, cdt)
                loss = ((m - x2[xp.arange(R), tt]) + logs) * wt
                if eps:
                    smooth = logs * (C if w1 is None else w1.sum()) + dot
                    loss = loss * (1 - eps) + smooth * (eps / C)
                if valid is not None:  # left out, whatever they hold (NaN * 0 is NaN)
                    loss[~valid] = 0
                denom = wt.sum()
            if reduction == "none":
                res = loss.reshape(batch)
            else:
                res = loss.sum()
                if reduction == "mean":
                    res = res / denom
        lse = (m.astype(xp.float64) + logs).reshape(batch) if with_lse else None
        return into(xp.asarray(res).astype(x.dtype, copy=False), out), lse

    def cross_entropy_backward(self, x, t, lse, g, w, ignore_index: int, reduction: str,
                               label_smoothing: float = 0.0, prob: bool = False, out=None):
        """d cross_entropy / d logits from the saved logsumexp (float64): (softmax(x) * a - b)
        * g per row, in one pass over the logits; in x's dtype."""
        self.ran("cross_entropy_backward", self.path)
        xp = self.xp
        eps = label_smoothing
        cdt = compute_dtype(xp, x.dtype)
        x2 = _rows(xp, x)
        R, C = x2.shape
        # lse = hi + lo: exp(x - lse) = exp(x - hi) * exp(-lo), exp(-lo) folded into a
        lse = lse.reshape(-1)
        hi = lse.astype(cdt)
        with xp.errstate(invalid="ignore"):
            fade = xp.exp(hi - lse).astype(cdt)
        lse2 = hi.reshape(-1, 1)
        g = g.astype(cdt, copy=False)
        scale = g.reshape(-1) if reduction == "none" else xp.full(R, g.reshape(()), cdt)
        dx2 = xp.empty((R, C), cdt)
        if prob:
            if reduction == "mean":
                scale = scale / R
            wy = _smoothed(_rows(xp, t).astype(cdt, copy=False), eps, C, w, cdt)
            a = wy.sum(axis=1) * scale * fade
            for sl in blocks(R, C):
                db = dx2[sl]
                xp.subtract(x2[sl], lse2[sl], out=db)
                xp.exp(db, out=db)
                db *= a[sl, None]
                db -= wy[sl] * scale[sl, None]
        else:
            valid, tt = class_targets(xp, "cross_entropy", t.reshape(-1), C, ignore_index)
            wt = _row_weights(xp, w, tt, valid, cdt)
            if reduction == "mean":
                scale = scale / wt.sum()
            if eps:
                w1 = xp.ones(C, cdt) if w is None else w.astype(cdt, copy=False)
                vs = scale if valid is None else scale * valid
                a = ((1 - eps) * wt + (eps / C) * w1.sum() * (1 if valid is None else valid))
                a = a * scale
                smooth = (eps / C) * vs
            else:
                a = wt * scale
                smooth = None
            a = a * fade
            with xp.errstate(invalid="ignore", over="ignore"):
                for sl in blocks(R, C):
                    db = dx2[sl]
                    xp.subtract(x2[sl], lse2[sl], out=db)
                    xp.exp(db, out=db)
                    db *= a[sl, None]
                    if smooth is not None:
                        db -= (xp.outer(smooth[sl], w1) if w is not None else smooth[sl, None])
            dx2[xp.arange(R), tt] -= (1 - eps) * wt * scale
            if valid is not None:  # ignored rows get no gradient, whatever they hold
                dx2[~valid] = 0
        return into(_unrows(xp, dx2, x.shape).astype(x.dtype, copy=False), out)

    def cross_entropy_coef(self, t, w, C: int, ignore_index: int, reduction: str,
                           label_smoothing: float, x_shape, dtype, out=None):
        """The constant b of the logits' shape with loss = -sum(b * log_softmax(x)) for class
        indices t (for grad of grad); `dtype` the statistics' NumPy dtype."""
        self.ran("cross_entropy_coef", self.path)
        xp = self.xp
        eps = label_smoothing
        valid, tt = class_targets(xp, "cross_entropy", t.reshape(-1), C, ignore_index)
        wt = _row_weights(xp, w, tt, valid, dtype)
        R = len(tt)
        b = xp.zeros((R, C), dtype)
        if eps:
            w1 = xp.ones(C, dtype) if w is None else w.astype(dtype)
            b += (eps / C) * w1
            if valid is not None:
                b *= valid[:, None]
        b[xp.arange(R), tt] += (1 - eps) * wt
        if reduction == "mean":
            b /= wt.sum()
        return into(_unrows(xp, b, x_shape), out)

    def nll_loss(self, x, t, w, ignore_index: int, reduction: str, out=None):
        """-x[target] * w[target] from log-probabilities x [N, C, d...] or [C], reduced; in
        x's dtype."""
        self.ran("nll_loss", self.path)
        xp = self.xp
        cdt = compute_dtype(xp, x.dtype)
        x2 = _rows(xp, x)
        R, C = x2.shape
        valid, tt = class_targets(xp, "nll_loss", t.reshape(-1), C, ignore_index)
        wt = _row_weights(xp, w, tt, valid, cdt)
        loss = -x2[xp.arange(R), tt].astype(cdt, copy=False) * wt
        with xp.errstate(divide="ignore", invalid="ignore"):
            if reduction == "none":
                res = loss.reshape(batch_shape(x.shape))
            else:
                res = loss.sum()
                if reduction == "mean":
                    res = res / wt.sum()
        return into(xp.asarray(res).astype(x.dtype, copy=False), out)

    def nll_loss_backward(self, g, t, w, C: int, ignore_index: int, reduction: str, x_shape,
                          out=None):
        """d nll_loss / d input [x_shape]: -w[t] * g at each target entry, zero elsewhere (in
        g's compute dtype)."""
        self.ran("nll_loss_backward", self.path)
        xp = self.xp
        cdt = compute_dtype(xp, g.dtype)
        R = len(t.reshape(-1))
        valid, tt = class_targets(xp, "nll_loss", t.reshape(-1), C, ignore_index)
        wt = _row_weights(xp, w, tt, valid, cdt)
        g = g.astype(cdt, copy=False)
        scale = g.reshape(-1) if reduction == "none" else xp.full(R, g.reshape(()), cdt)
        if reduction == "mean":
            with xp.errstate(divide="ignore", invalid="ignore"):
                scale = scale / wt.sum()
        dx2 = xp.zeros((R, C), cdt)
        dx2[xp.arange(R), tt] = -wt * scale
        return into(_unrows(xp, dx2, x_shape), out)

    # ---- layers' gradients with no family of their own yet: linear's bias, embedding ----
    def bias_grad(self, g2, out=None):
        """The column sums of g2 [rows, out] in its dtype (linear's bias gradient): 16-bit
        floats summed in float32 and rounded once."""
        self.ran("bias_grad", self.path)
        if g2.dtype.itemsize != 2:
            return into(self.col_sums(g2), out)
        return into(self.col_sums(g2.astype(self.xp.float32)).astype(g2.dtype), out)

    def embedding_backward(self, flat, rows, num: int, out=None):
        """A [num, d] table of zeros with rows[i] added at row flat[i], in the order of
        flat (each repeated index's rows summed first to last, as np.add.at does).

        Portable: round r adds the r-th occurrence of every index, so no round writes one
        row twice (plain fancy-index adds, no ufunc.at)."""
        self.ran("embedding_backward", self.path)
        xp = self.xp
        dw = xp.zeros((num, rows.shape[1]), rows.dtype) if out is None else out
        if out is not None:
            dw[...] = 0
        n = len(flat)
        if n == 0:
            return dw
        order = xp.argsort(flat, kind="stable")
        ordered = flat[order]
        start = xp.concatenate([xp.ones(1, bool), ordered[1:] != ordered[:-1]])
        starts = xp.flatnonzero(start)
        rank = xp.arange(n) - starts[xp.cumsum(start) - 1]  # occurrence number in its run
        for r in range(int(rank.max()) + 1):
            sel = order[rank == r]
            dw[flat[sel]] += rows[sel]
        return dw
