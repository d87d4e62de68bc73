"""Bernoulli(probs | logits): a coin with P(1) = probs = sigmoid(logits)."""

from __future__ import annotations

import math
import numbers

from ..autograd import grad_mode
from ..nn.functional import softplus
from ..ops.elementwise import where
from ..ops.sampling import DistributionError, bernoulli
from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


def _one_of(name: str, probs, logits) -> None:
    if (probs is None) == (logits is None):
        raise DistributionError("Either `probs` or `logits` must be specified, but not both.",
                                op=f"distributions.{name}")


class Bernoulli(Distribution):
    """The Bernoulli distribution, parametrized by probs or by logits (log-odds)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        _one_of("Bernoulli", probs, logits)
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        shape = () if isinstance(given, numbers.Number) else tuple(param.shape)
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Bernoulli:
        new = self._get_checked_instance(Bernoulli, _instance)
        shape = tuple(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*shape)
            new._param = new.logits
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self) -> Tensor:
        """Log-odds of 1."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """Probability of 1."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        p = self.probs
        return where(p == 0.5, math.nan, (p >= 0.5).to(p.dtype))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with grad_mode.no_grad():
            return bernoulli(self.probs.expand(*shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return value * logits - softplus(logits)  # -BCE with logits, stable for large |logits|

    def entropy(self) -> Tensor:
        return softplus(self.logits) - self.logits * self.probs

    def enumerate_support(self, expand: bool = True) -> Tensor:
        from ..factories import arange

        values = arange(2, dtype=self._param.dtype).reshape(2, *((1,) * len(self.batch_shape)))
        return values.expand(2, *self.batch_shape) if expand else values
