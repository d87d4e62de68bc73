"""Beta(concentration1, concentration0): a two-category Dirichlet, X / (X + Y) of gammas."""

from __future__ import annotations

import numbers

from ..ops.elementwise import digamma, lgamma, where, xlogy
from ..tensor import Tensor
from . import constraints
from ._gamma_math import standard_gamma
from .distribution import Distribution
from .utils import broadcast_all, finfo

__all__ = ["Beta"]


class Beta(Distribution):
    """The beta distribution on [0, 1] with concentrations alpha (1) and beta (0)."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        scalar = (isinstance(concentration1, numbers.Number)
                  and isinstance(concentration0, numbers.Number))
        shape = () if scalar else tuple(self.concentration1.shape)
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Beta:
        new = self._get_checked_instance(Beta, _instance)
        shape = tuple(batch_shape)
        new.concentration1 = self.concentration1.expand(*shape)
        new.concentration0 = self.concentration0.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        # as torch's (its Dirichlet's mode): both below 1 gives the first category, x = 1
        m1, m0 = (self.concentration1 - 1).clamp(min=0), (self.concentration0 - 1).clamp(min=0)
        both_below = (self.concentration1 < 1) & (self.concentration0 < 1)
        return where(both_below, 1.0, m1 / (m1 + m0))

    @property
    def variance(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = a + b
        return a * b / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration1.expand(*shape))
        y = standard_gamma(self.concentration0.expand(*shape))
        tiny, eps = float(finfo(x).tiny), float(finfo(x).eps)
        return (x / (x + y)).clamp(tiny, 1 - eps)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (xlogy(a - 1, value) + xlogy(b - 1, 1 - value)
                + lgamma(a + b) - lgamma(a) - lgamma(b))

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (lgamma(a) + lgamma(b) - lgamma(total) - (a - 1) * digamma(a)
                - (b - 1) * digamma(b) + (total - 2) * digamma(total))
