"""Laplace(loc, scale), reparameterized through its inverse CDF."""

from __future__ import annotations

import math

import numpy as np

from ..factories import rand
from ..tensor import Tensor
from .loc_scale import LocScale

__all__ = ["Laplace"]


class Laplace(LocScale):
    """The Laplace (double exponential) distribution with location loc and scale."""

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()) -> Tensor:
        eps = float(np.finfo(self.loc.dtype.np).eps)
        u = rand(*self._extended_shape(sample_shape), dtype=self.loc.dtype) * (2 - eps) - 1 + eps
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * (-d.abs() / self.scale).expm1()

    def icdf(self, value: Tensor) -> Tensor:
        t = value - 0.5
        return self.loc - self.scale * t.sign() * (-2 * t.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()
