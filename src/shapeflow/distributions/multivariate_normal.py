"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril)."""

from __future__ import annotations

import math

import numpy as np

from .. import linalg
from ..factories import randn
from ..ops.sampling import DistributionError
from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(m: Tensor, v: Tensor) -> Tensor:
    return (m @ v.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(lower: Tensor, x: Tensor) -> Tensor:
    """x^T (L L^T)^-1 x for a batch of lower triangular L, broadcast with x."""
    n = x.shape[-1]
    shape = np.broadcast_shapes(tuple(lower.shape)[:-2], tuple(x.shape)[:-1])
    lower, x = lower.expand(*shape, n, n), x.expand(*shape, n)
    z = linalg.solve_triangular(lower, x.unsqueeze(-1), upper=False).squeeze(-1)
    return z.pow(2).sum(-1)


class MultivariateNormal(Distribution):
    """A Gaussian over vectors: mean loc, covariance given by one of three matrices."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        op = "distributions.MultivariateNormal"
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise DistributionError("Exactly one of covariance_matrix or precision_matrix or "
                                    "scale_tril may be specified.", op=op)
        matrix = given[0]
        if matrix.ndim < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at "
                             "least two-dimensional, with optional leading batch dimensions")
        batch = tuple(np.broadcast_shapes(tuple(matrix.shape)[:-2], tuple(loc.shape)[:-1]))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch, n, n)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch, n, n)
        else:
            self.precision_matrix = precision_matrix.expand(*batch, n, n)
        self.loc = loc.expand(*batch, n)
        super().__init__(batch, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))

    def expand(self, batch_shape, _instance=None) -> MultivariateNormal:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        shape = tuple(batch_shape)
        n = self.event_shape[0]
        new.loc = self.loc.expand(*shape, n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*shape, n, n))
        Distribution.__init__(new, shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance."""
        n = self.event_shape[0]
        return self._unbroadcasted_scale_tril.expand(*self.batch_shape, n, n)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """The covariance, L @ L^T."""
        lower = self._unbroadcasted_scale_tril
        n = self.event_shape[0]
        return (lower @ lower.mT).expand(*self.batch_shape, n, n)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """The inverse covariance."""
        n = self.event_shape[0]
        lower = self._unbroadcasted_scale_tril
        return linalg.inv(lower @ lower.mT).expand(*self.batch_shape, n, n)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        var = self._unbroadcasted_scale_tril.pow(2).sum(-1)
        return var.expand(*self.batch_shape, *self.event_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        eps = randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        n = self.event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self) -> Tensor:
        n = self.event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(*self.batch_shape) if self.batch_shape else h
