"""Broadcast operands with short inner runs, widened so NumPy's loop runs long.

NumPy's elementwise loop runs over the innermost dims that both operands step through
alike. An operand broadcast inside a short run (rotary's cos [T, 1, D/2] against q's [B, T,
H, D/2]; a per-channel [C, 1, 1] scale) leaves a loop of D/2 elements: ~5x slower than a
dense one. Copying that operand over its inner dims first (a block much smaller than the
output) makes the run long. Elementwise results do not depend on the loop's shape, so the
values are the same bit for bit. The copy is made with the operand's own array namespace
(`__array_namespace__`), so this works on any device's arrays.
"""

from __future__ import annotations

import math

_MIN_OUT = 8192  # below this the widening (~5 us) costs what the long loop saves
_SHORT = 16  # an inner run this long or longer is already fast


def widen_runs(a, b) -> tuple:
    """(a, b), each broadcast operand with a short inner run copied dense over its inner dims
    where that copy is at most a quarter of the output; unchanged otherwise."""
    if a.size == 1 or b.size == 1:  # a scalar broadcast: NumPy's scalar loop is fast
        return a, b
    if max(a.shape[-1], b.shape[-1]) >= _SHORT:  # each inner run spans the long last dim
        return a, b
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    shape = tuple(x if y == 1 else y for x, y in zip(sa, sb))
    size = math.prod(shape)
    if size < _MIN_OUT:
        return a, b
    return (a if sa == shape else _widen(a, sa, shape, size),
            b if sb == shape else _widen(b, sb, shape, size))


def _widen(x, xs: tuple, shape: tuple, size: int):
    # NumPy merges adjacent dims where x is broadcast in both (or in neither): its inner loop
    # is the innermost such stretch; `d` is where that stretch ends
    run, state, d = 1, None, -1
    for k in range(len(shape) - 1, -1, -1):
        if shape[k] == 1:
            continue
        b = xs[k] == 1
        if state is None:
            state = b
        elif b != state:
            d = k
            break
        run *= shape[k]
        if run >= _SHORT:
            return x
    if d < 0:
        return x  # one stretch: x is a dense block, or broadcast over whole rows
    budget = size // 4
    best = None
    for j in range(d, -1, -1):  # widen dims j.. (as many as the budget allows)
        if math.prod(xs[:j]) * math.prod(shape[j:]) > budget:
            break
        best = j
    if best is None:
        return x
    xp = x.__array_namespace__()
    out = xp.empty(xs[:best] + shape[best:], x.dtype)
    xp.copyto(out, x.reshape(xs))
    return out
