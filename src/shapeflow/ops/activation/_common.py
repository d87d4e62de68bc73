"""Bases the activation ops share: the float-only unary and the fused-backward kernel op."""

from __future__ import annotations

from ..base import Op
from ..elementwise._common import refuse_dtype
from ..elementwise.unary import Unary


class _FloatOnly(Unary):
    """PyTorch's activation kernels exist for floating-point inputs only."""

    def infer(self, x):
        if not x.dtype.is_floating_point:
            refuse_dtype(self.name, x)
        return x.shape, x.dtype


class _GradKernel(Op):
    """A fused backward `forward(g, x)`: the gradient of x, with x's shape and dtype.

    Not differentiable itself: with create_graph the op's backward takes its composite path.
    """

    differentiable = False

    def infer(self, g, x):
        return x.shape, x.dtype
