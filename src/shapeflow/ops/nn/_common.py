"""Helpers the layer op families share (ops/nn/, ops/activation/, ops/loss/, ops/norm/):
recording checks, compute dtypes, rows views."""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd import grad_mode
from ...errors import DTypeError
from ...tensor import Tensor, describe
from ..base import LAYER_INPUT, Saved

_LAYER_X = Saved.input(0, LAYER_INPUT)


def _recording(*inputs) -> bool:
    """Whether apply() will record this op (so forward should keep what backward needs)."""
    # hot.quiet first: it spares the threading.local read of this thread's grad mode
    on = grad_mode.hot.quiet or grad_mode.state.enabled
    return on and any(t.requires_grad for t in inputs)


def _create_graph() -> bool:
    """Inside backward: True when create_graph=True (grads must be differentiable)."""
    return grad_mode.hot.quiet or grad_mode.state.enabled


def _compute_np(dt: _dt.DType):
    """float16/bfloat16 are computed in float32 (as PyTorch's CPU kernels do); infer has
    refused the other dtypes (_need_float)."""
    return _dt.opmath(dt).np


def _stat_dtype(dt: _dt.DType) -> _dt.DType:
    """The dtype of a norm's saved statistics: its float input's opmath dtype."""
    return _dt.opmath(dt)


def _need_float(op: str, x: Tensor, name: str = "x", hint: str | None = None) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"{op}: {name} must be floating point, got {x.dtype}", op=op,
            operands=[(name, describe(x))],
            hint=hint or f"call {name}.float() first")


def _dense(g: Tensor) -> Tensor:
    """g without zero strides (a broadcast upstream grad, e.g. from sum()): NumPy's matmul
    falls back from BLAS to a slow loop on those."""
    d = g._data
    if d is not None and d.ndim and not d.flags.c_contiguous and 0 in d.strides:
        return g.contiguous()
    return g


def _as_rows(a, n: int):
    """The array as [rows, n] over its trailing elements (a view when it can be)."""
    return a.reshape(-1, n) if n else a.reshape(a.size, 0)
