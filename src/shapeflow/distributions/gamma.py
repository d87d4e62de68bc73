"""Gamma(concentration, rate), with implicit reparameterization gradients for rsample."""

from __future__ import annotations

import numbers

from ..ops.elementwise import digamma, lgamma, xlogy
from ..tensor import Tensor
from . import constraints
from ._gamma_math import regularized_gamma, standard_gamma
from .distribution import Distribution
from .utils import broadcast_all, finfo

__all__ = ["Gamma"]


class Gamma(Distribution):
    """The gamma distribution with shape `concentration` and inverse scale `rate`."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        scalar = isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number)
        super().__init__(() if scalar else tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Gamma:
        new = self._get_checked_instance(Gamma, _instance)
        shape = tuple(batch_shape)
        new.concentration, new.rate = self.concentration.expand(*shape), self.rate.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration.expand(*shape)) / self.rate.expand(*shape)
        return x.clamp(min=float(finfo(x).tiny))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return xlogy(c, r) + xlogy(c - 1, value) - r * value - lgamma(c)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return regularized_gamma(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        c = self.concentration
        return c - self.rate.log() + lgamma(c) + (1.0 - c) * digamma(c)
