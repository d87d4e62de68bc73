"""Dirichlet(concentration): normalized gamma draws, so rsample has gradients."""

from __future__ import annotations

from ..factories import arange
from ..ops.elementwise import digamma, lgamma, where, xlogy
from ..tensor import Tensor
from . import constraints
from ._gamma_math import standard_gamma
from .distribution import Distribution
from .utils import finfo

__all__ = ["Dirichlet"]


class Dirichlet(Distribution):
    """The Dirichlet distribution over the simplex, with concentration along the last dim."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Dirichlet:
        new = self._get_checked_instance(Dirichlet, _instance)
        shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(*shape, *self.event_shape)
        Distribution.__init__(new, shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(*shape))
        tiny, eps = float(finfo(g).tiny), float(finfo(g).eps)
        return (g / g.sum(-1, keepdim=True)).clamp(tiny, 1 - eps)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        m = (self.concentration - 1).clamp(min=0.0)
        mode = m / m.sum(-1, keepdim=True)
        # all concentrations below 1: the density peaks at a corner; torch picks the first
        all_below = (self.concentration < 1).all(-1).unsqueeze(-1)
        first = (arange(m.shape[-1]) == 0).to(m.dtype)
        return where(all_below, first, mode)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self) -> Tensor:
        c = self.concentration
        k, c0 = c.shape[-1], c.sum(-1)
        return (lgamma(c).sum(-1) - lgamma(c0) - (k - c0) * digamma(c0)
                - ((c - 1.0) * digamma(c)).sum(-1))
