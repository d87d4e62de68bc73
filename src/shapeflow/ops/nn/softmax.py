"""softmax and log_softmax, and softmax's backward: the device's softmax kernels."""

from __future__ import annotations

from ...device import cpu
from ...shape import normalize_dim
from ...tensor import Tensor
from ..base import OUT_ACT, Op, apply
from ..registry import public
from ._common import _create_graph, _need_float


def _softmax_rows(x2, out, log: bool, zero_empty: bool = False):
    """softmax (log_softmax) of each row of the host array x2 [rows, n] into out (x2 itself
    allowed): the cpu table's blocked NumPy rows, which the compiled kernel is tested against."""
    return cpu.kernels.softmax_blocked(x2, out, log, zero_empty)


class Softmax(Op):
    name = "softmax"
    log = False

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x):
        _need_float(self.name, x)
        # on 0-d too: dims other than 0 and -1 are out of range there, as in PyTorch
        self.axis = normalize_dim(self.dim, x.ndim, self.name) if x.ndim or \
            self.dim is not None else 0
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,)

    def forward(self, x):
        return self.device.kernels.softmax(x, self.axis, self.log)

    def backward(self, g):
        (out,) = self.saved_tensors
        d = self.axis if out.ndim else None
        if _create_graph() or out.ndim == 0:
            return (out * (g - (g * out).sum(d, keepdim=True)),)
        return (apply(SoftmaxBackward(self.axis), out, g),)


class LogSoftmax(Softmax):
    name = "log_softmax"
    log = True

    def backward(self, g):
        (out,) = self.saved_tensors
        d = self.axis if out.ndim else None
        return (g - out.exp() * g.sum(d, keepdim=True),)


class SoftmaxBackward(Op):
    """d softmax: scale * p * (m*g - sum(p * m*g)) along axis, for g, p and a keep mask m."""

    name = "softmax_backward"
    differentiable = False

    def __init__(self, axis: int, scale: float = 1.0) -> None:
        self.axis, self.scale = axis, scale

    def infer(self, p, g, *mask):
        return p.shape, p.dtype

    def forward(self, p, g, mask=None):
        # one compiled pass per row (float32, last axis, no mask), else NumPy's blocked rows
        return self.device.kernels.softmax_backward(p, g, self.axis, self.scale, mask)


@public(method=True, functional=True)
def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim (computed stably); dim is required."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(Softmax(dim), input)


@public(method=True, functional=True)
def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """x - logsumexp(x) along dim (stable); dim is required."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(LogSoftmax(dim), input)
