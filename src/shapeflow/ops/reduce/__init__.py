"""Reductions over dims: sum, mean, prod, max/min, var/std, logsumexp, cumsum, all/any, norm.

`dim` is an int, a tuple or None (all dims), negative ok; as in PyTorch an empty tuple
also means all dims for sum, mean, prod, amax/amin, var/std, logsumexp and norm.
"""

from __future__ import annotations

# Re-exports: importers name shapeflow.ops.reduce.X (Sum, expand_to...); `sf.*` gets __all__.
# ruff: noqa: F401
from ._common import Reduction, expand_to, reduce_dims, reduced_shape
from .cumulative import Cumsum, cumsum
from .extrema import (
    AMax,
    ArgMax,
    MaxDim,
    MaxResult,
    MinResult,
    OneHot,
    amax,
    amin,
    argmax,
    argmin,
    max,
    min,
)
from .logical import AllAny, all, any
from .moments import Std, Var, std, var
from .norm import VectorNorm, norm
from .sums import LogSumExp, Mean, Prod, Sum, logsumexp, mean, prod, sum

METHODS = ("sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var",
           "std", "logsumexp", "cumsum", "all", "any", "norm")
__all__ = list(METHODS)
