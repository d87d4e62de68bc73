"""SiLU's one-op backward: the kernel table's silu_backward (a compiled pass on cpu).

Forward is x * sigmoid(x) (the table's `silu`); backward g * s * (1 + x * (1 - s)) with
s = sigmoid(x), both PyTorch's formulas. The compiled kernels (backend/cpu/norm_act_kernels.c)
take float32 in one pass each; the portable kernels compute what the composite ops compute,
bit for bit.
"""

from __future__ import annotations

from ..base import Op


class SiluBackward(Op):
    """g * d silu(x) / dx as one op (the backward without grad of grad), float32/float64.

    Not differentiable itself: with create_graph Silu's backward takes its composite path.
    """

    name = "silu_backward"
    differentiable = False

    def infer(self, g, x):
        return x.shape, x.dtype

    def forward(self, g, x):
        return self.device.kernels.silu_backward(g, x)
