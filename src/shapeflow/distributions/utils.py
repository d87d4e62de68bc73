"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits, caching."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..ops.sampling import DistributionError
from ..tensor import Tensor, tensor

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits", "sum_rightmost"]


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """Tensors of one broadcast shape; numbers take the first tensor's dtype (else the default)."""
    for v in values:
        if not isinstance(v, (Tensor, numbers.Number)):
            raise DistributionError("Input arguments must all be instances of numbers.Number "
                                    f"or shapeflow.Tensor, got {type(v).__name__}",
                                    op="distributions.broadcast_all")
    dtype = next((v.dtype for v in values if isinstance(v, Tensor)), _dt.get_default_dtype())
    ts = [v if isinstance(v, Tensor) else tensor(float(v), dtype=dtype) for v in values]
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in ts))
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in ts)


def finfo(x: Tensor) -> np.finfo:
    """NumPy's float limits for x's dtype."""
    return np.finfo(x.dtype.np)


def clamp_probs(probs: Tensor) -> Tensor:
    """probs kept eps away from 0 and 1, so that their logs stay finite."""
    eps = float(finfo(probs).eps)
    return probs.clamp(eps, 1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits of probabilities: log-odds for a binary variable, log-probs otherwise."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities of logits: sigmoid for a binary variable, softmax over the last dim."""
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """value summed over its `dim` rightmost dims."""
    if dim == 0:
        return value
    return value.reshape(*value.shape[:len(value.shape) - dim], -1).sum(-1)


class lazy_property:  # noqa: N801  (a decorator, as torch's)
    """A property computed on first access and then stored on the instance."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
