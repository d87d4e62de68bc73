"""rms_norm: layer_norm's row-blocked primitive without the mean (x / rms(x) * weight)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...tensor import Tensor
from .. import autocast as _autocast
from ..base import apply
from ..registry import public
from .layer_norm import _Norm, _norm_shape


class RMSNorm(_Norm):
    name = "rms_norm"
    rms = True


# machine epsilon of each float dtype (rms_norm's default eps; float32's for the rest)
_EPS = {_dt.float64: 2.0**-52, _dt.float32: 2.0**-23, _dt.float16: 2.0**-10,
        _dt.bfloat16: 2.0**-7}


def _finfo_eps(dt: _dt.DType) -> float:
    return _EPS.get(dt, _EPS[_dt.float32])


@public(functional=True)
def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dims; eps defaults to finfo.eps."""
    if _autocast_hot.on:  # sf.autocast: a bfloat16 input with float32 weights gives bfloat16
        (weight,) = _autocast.params_like(input, weight)
    ns = _norm_shape(normalized_shape)
    if eps is None:
        eps = _finfo_eps(input.dtype)
    extra = (weight,) if weight is not None else ()
    return apply(RMSNorm(ns, eps, weight is not None, False), input, *extra)
