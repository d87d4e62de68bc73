"""`with sf.detect_anomaly():` find the first op that makes a NaN or Inf, forward or backward."""

from __future__ import annotations

import numpy as np

from ..autograd.inspect_hooks import anomaly as _anomaly
from ..errors import ShapeflowError
from ..tensor import describe
from .trace import current_path


class AnomalyError(ShapeflowError, RuntimeError):
    """An op produced NaN or Inf from finite inputs (raised under detect_anomaly)."""

    kind = "AnomalyError"


def _bad(arr) -> bool:
    return arr is not None and arr.dtype.kind == "f" and not np.isfinite(arr).all()


def check_forward(op, inputs, data) -> None:
    """Raise if this op turned finite inputs into NaN/Inf."""
    if _anomaly.in_backward or not _bad(data) or any(_bad(t._data) for t in inputs):
        return
    what = "NaN" if np.isnan(data).any() else "Inf"
    err = AnomalyError(
        f"{op.name} produced {what} from finite inputs (forward)", op=op.name,
        operands=[(f"input {i}", describe(t)) for i, t in enumerate(inputs)],
        module_path=current_path(),
        hint=_hint(op.name, inputs))
    err.user_line = _anomaly.user_frame()
    raise err


def checked_backward(node, grad):
    """node.backward(grad), then a check of what it produced."""
    prev, _anomaly.in_backward = _anomaly.in_backward, True
    try:
        in_grads = node.backward(grad)
    finally:
        _anomaly.in_backward = prev
    check_backward(node, grad, in_grads)
    return in_grads


def check_backward(node, grad, in_grads) -> None:
    """Raise if this node's backward turned a finite gradient into NaN/Inf."""
    if grad._data is None or _bad(grad._data):
        return
    for i, g in enumerate(in_grads):
        if g is not None and _bad(g._data):
            err = AnomalyError(
                f"backward of {node.name} produced NaN/Inf in the gradient of input {i}",
                op=node.name, operands=[("grad", describe(grad)), (f"grad {i}", describe(g))],
                module_path=getattr(node, "module_path", None),
                hint=_hint(node.name, ()))
            err.user_line = node.created_at and f"created at {node.created_at}"
            raise err


def _hint(op: str, inputs) -> str | None:
    if op in ("log", "log1p"):
        return "log of 0 or a negative number: clamp the input (x.clamp(min=1e-12)) first"
    if op in ("div", "rdiv"):
        return "division by zero: add an epsilon to the denominator"
    if op in ("sqrt", "rsqrt", "pow"):
        return "sqrt/pow of 0 or a negative number (its gradient is infinite at 0)"
    if op == "exp":
        return "exp overflowed: subtract the max first (use logsumexp / softmax)"
    return None


class detect_anomaly:
    """Context manager: every op checks its output, every backward its gradients."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = _anomaly.enabled
        _anomaly.enabled = self.check_nan
        return self

    def __exit__(self, *exc):
        _anomaly.enabled = self.prev
        return False


# ops/base.py's apply and the engine call these through the hooks (they sit below inspect)
_anomaly.check_forward = check_forward
_anomaly.checked_backward = checked_backward
