"""Normal(loc, scale): the Gaussian, reparameterized as loc + scale * eps."""

from __future__ import annotations

import math

from ..factories import randn
from ..tensor import Tensor
from .loc_scale import LocScale

__all__ = ["Normal"]


class Normal(LocScale):
    """The normal distribution with mean loc and standard deviation scale."""

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2)

    def rsample(self, sample_shape=()) -> Tensor:
        eps = randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (-((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log()
                - math.log(math.sqrt(2 * math.pi)))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
