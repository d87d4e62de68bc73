"""Gradient utilities (as `torch.nn.utils`): clipping by total norm or by value."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeflowError
from ...ops.base import replayed_as_call
from ...tensor import Tensor


class NonFiniteNormError(ShapeflowError, RuntimeError):
    """clip_grad_norm_(error_if_nonfinite=True) met a total norm that is inf or nan."""

    kind = "NonFiniteNormError"


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _norm(arr, norm_type: float, xp=np) -> float:
    """The `norm_type` norm of an array of the namespace `xp` (a device's), in float64."""
    a = xp.abs(arr.astype(xp.float64, copy=False)) if arr.dtype != xp.float64 else xp.abs(arr)
    if a.size == 0:
        return 0.0
    if norm_type == math.inf:
        return float(a.max())
    if norm_type == -math.inf:
        return float(a.min())
    if norm_type == 0:
        return float(xp.count_nonzero(a))
    if norm_type == 1:
        return float(a.sum())
    if norm_type == 2:
        return float(xp.sqrt(xp.vdot(a.ravel(), a.ravel())))
    return float(xp.sum(a**norm_type) ** (1.0 / norm_type))


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    """The norm of the norms of `tensors` (the norm of all of them as one vector)."""
    from ...factories import tensor as make

    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return make(0.0)
    dtype = tensors[0].dtype
    if any(not t.device.computes for t in tensors):
        from ...factories import zeros

        return zeros((), dtype=dtype, device="meta")
    np_dtype = dtype.np if dtype.is_floating_point else np.float32
    # Each per-tensor norm rounds to the grads' dtype, as PyTorch's do.
    norms = np.array([_norm(t._data, norm_type, t.device.xp) for t in tensors], dtype=np_dtype)
    total = np_dtype.type(_norm(norms, norm_type)) if norms.size else np_dtype.type(0)
    if error_if_nonfinite and not np.isfinite(total):
        raise NonFiniteNormError(
            f"the total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped",
            op="clip_grad_norm_",
            hint="set error_if_nonfinite=False to scale the gradients by the non-finite norm "
            "anyway, or look for the inf/nan with sf.detect_anomaly()",
        )
    device = tensors[0].device
    return Tensor._make(device.from_numpy(np.asarray(total, dtype=np_dtype)), (), dtype, device)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the grads in place so their total norm is at most max_norm; return that norm.

    As PyTorch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1, every grad
    multiplied by it (in the grads' dtype).
    """
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if replayed_as_call(clip_grad_norm_, parameters, max_norm, norm_type, error_if_nonfinite):
        return _meta_scalar(parameters)  # (sf.compile's trace: each replay clips)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if not grads or not total.device.computes:
        return total
    host = total.device.to_numpy(total._data)  # the coefficient is a host scalar
    t = host.dtype.type
    # PyTorch computes max_norm / x as x.reciprocal() * max_norm.
    coef = (t(1) / (host + t(1e-6))) * t(max_norm)
    coef = min(coef, t(1.0))
    for g in grads:
        if g._data is not None:
            g.device.xp.multiply(g._data, coef, out=g._data, casting="unsafe")
            g._version[0] += 1
    return total


def _meta_scalar(parameters: list) -> Tensor:
    from ...factories import zeros

    dtype = parameters[0].dtype if parameters else None
    return zeros((), dtype=dtype, device="meta")


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every grad elementwise into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if replayed_as_call(clip_grad_value_, parameters, clip_value):
        return
    for g in _grads(parameters):
        if g._data is not None:
            g.device.xp.clip(g._data, -clip_value, clip_value, out=g._data)
            g._version[0] += 1


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened into one 1-D tensor (a copy)."""
    from ...dtypes import from_numpy_dtype

    parameters = list(parameters)
    device = parameters[0].device
    flat = device.xp.concatenate([p._data.reshape(-1) for p in parameters])
    return Tensor._make(flat, flat.shape, from_numpy_dtype(flat.dtype), device)


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy slices of a 1-D tensor back into the parameters, in place."""
    offset = 0
    for p in parameters:
        n = p._data.size
        p._data[...] = vec._data[offset:offset + n].reshape(p._data.shape)
        p._version[0] += 1
        offset += n


from . import rnn  # noqa: E402  (torch.nn.utils.rnn)

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "NonFiniteNormError"]
