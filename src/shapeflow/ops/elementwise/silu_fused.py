"""SiLU's forward kernel and its one-op backward: the compiled pass, or NumPy's.

Forward is x * sigmoid(x); backward g * s * (1 + x * (1 - s)) with s = sigmoid(x), both
PyTorch's formulas. The compiled kernels (backend/cpu/norm_act_kernels.c) take float32 in one
pass each; the NumPy fallback computes what the composite ops compute, bit for bit.
"""

from __future__ import annotations

import numpy as np

from ...backend.cpu import norm_act_kernels
from ..base import Op


def silu_forward(x: np.ndarray, sigmoid) -> np.ndarray:
    """x * sigmoid(x): one compiled pass for float32, else NumPy with `sigmoid`."""
    fused = norm_act_kernels.silu(x) if x.dtype == np.float32 else None
    if fused is not None:
        return fused
    with np.errstate(invalid="ignore"):  # -inf * 0: NaN, as PyTorch's, without a warning
        return x * sigmoid(x)


class SiluBackward(Op):
    """g * d silu(x) / dx as one op (the backward without grad of grad), float32/float64.

    Not differentiable itself: with create_graph Silu's backward takes its composite path.
    """

    name = "silu_backward"
    differentiable = False

    def infer(self, g, x):
        return x.shape, x.dtype

    def forward(self, g, x):
        fused = norm_act_kernels.silu_backward(g, x)
        if fused is not None:
            return fused
        from .activations import _sigmoid  # (activations imports this module)

        s = _sigmoid(x)
        out = np.multiply(g, s)
        np.subtract(1.0, s, out=s)  # the composite's order: g * s * (1 + x * (1 - s))
        with np.errstate(invalid="ignore"):  # x = +-inf: NaN, as PyTorch's
            s *= x
            s += 1.0
            out *= s
        return out
