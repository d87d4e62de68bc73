"""The optim family's portable kernels, written against `self.xp`.

The updates run in place: each writes into the arrays it updates (the parameter and its
state), the buffers the caller owns, so they take no `out=`. Large contiguous operands go
chunk by chunk, so the operands and the one temporary stay in cache.
"""

from __future__ import annotations

BLOCK = 1 << 16  # elements per chunk: temporaries of this size stay in cache


def chunks(n: int):
    """(start, stop) slices covering range(n) in cache-sized pieces."""
    for s in range(0, n, BLOCK):
        yield s, min(s + BLOCK, n)


def flat(a):
    """A 1-D view of a C-contiguous array (None if it has no such view)."""
    return a.reshape(-1) if a.flags.c_contiguous else None


class OptimKernels:
    """optim kernels (a mixin of ReferenceKernels)."""

    def axpy(self, y, x, alpha: float) -> None:
        """y += alpha * x in place (torch's add_(x, alpha=)), without a full-size temporary."""
        xp = self.xp
        yf, xf = flat(y), flat(x)
        if y.size <= BLOCK or yf is None or xf is None or x.shape != y.shape:
            y += x * alpha
            return
        tmp = xp.empty(BLOCK, dtype=y.dtype)
        for s, e in chunks(y.size):
            t = tmp[:e - s]
            xp.multiply(xf[s:e], alpha, out=t)
            yf[s:e] += t

    def adam(self, param, grad, m, v, vmax, scalars: tuple) -> None:
        """One Adam update in place of param, m, v (and vmax: amsgrad), in PyTorch's order of
        float32 operations; `scalars` as optim/adam.py computes them."""
        xp = self.xp
        if param.size > BLOCK and self._adam_chunked(param, grad, m, v, vmax, scalars):
            return
        _adam_block(xp, param, grad, m, v, vmax, xp.empty_like(param), scalars)

    def _adam_chunked(self, param, grad, m, v, vmax, scalars) -> bool:
        """The update chunk by chunk (False where an operand has no flat view)."""
        arrays = (param, grad, m, v) if vmax is None else (param, grad, m, v, vmax)
        views = [flat(a) for a in arrays]
        if any(f is None for f in views) or grad.shape != param.shape:
            return False
        fp, fg, fm, fv = views[:4]
        fx = views[4] if vmax is not None else None
        xp = self.xp
        tmp = xp.empty(BLOCK, dtype=param.dtype)
        for a, b in chunks(param.size):
            _adam_block(xp, fp[a:b], fg[a:b], fm[a:b], fv[a:b],
                        None if fx is None else fx[a:b], tmp[:b - a], scalars)
        return True

    # ---- iadd: in-place accumulation (the engine's gradient sums) ----------------------
    def iadd(self, dst, src):
        """dst += src in place, and dst returned (bfloat16 too: ml_dtypes rounds each sum)."""
        dst += src
        return dst


def _adam_block(xp, param, grad, m, v, vmax, tmp, scalars) -> None:
    """One Adam update in place, in PyTorch's order of float32 operations."""
    w1, beta2, w2, bc2_sqrt, eps, neg_step_size = scalars
    xp.subtract(grad, m, out=tmp)  # m.lerp_(grad, 1 - beta1) = m + w * (g - m)
    tmp *= w1
    m += tmp
    v *= beta2  # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    xp.multiply(grad, w2, out=tmp)
    tmp *= grad
    v += tmp
    if vmax is not None:
        xp.maximum(vmax, v, out=vmax)
        xp.sqrt(vmax, out=tmp)
    else:
        xp.sqrt(v, out=tmp)
    tmp /= bc2_sqrt  # denom = sqrt(v) / sqrt(bias_correction2) + eps
    tmp += eps
    xp.divide(m, tmp, out=tmp)  # p.addcdiv_(m, denom, value=-step_size)
    tmp *= neg_step_size
    param += tmp
