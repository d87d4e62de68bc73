"""Categorical(probs | logits): an index in 0..K-1 drawn with the given weights."""

from __future__ import annotations

import math

import numpy as np

from ..autograd import grad_mode
from ..factories import arange
from ..ops.sampling import multinomial
from ..tensor import Tensor
from . import constraints
from .bernoulli import _one_of
from .distribution import Distribution
from .utils import finfo, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    """A categorical distribution over the last dim of probs (normalized) or logits."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        _one_of(type(self).__name__, probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(tuple(self._param.shape)[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> Categorical:
        new = self._get_checked_instance(Categorical, _instance)
        shape = tuple(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*shape, self._num_events)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*shape, self._num_events)
            new._param = new.logits
        new._num_events = self._num_events
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        """Normalized log-probabilities."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return self.probs.sum(-1) * math.nan

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return self.probs.sum(-1) * math.nan

    def sample(self, sample_shape=()) -> Tensor:
        sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (
            sample_shape,)
        n = int(np.prod(sample_shape, dtype=np.int64))
        with grad_mode.no_grad():
            probs2d = self.probs.reshape(-1, self._num_events)
            drawn = multinomial(probs2d, n, True).T  # (n, batch)
        return drawn.reshape(*self._extended_shape(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = np.broadcast_shapes(tuple(value.shape), tuple(self.logits.shape)[:-1] + (1,))
        value = value.expand(*shape)
        logits = self.logits.expand(*shape[:-1], self._num_events)
        return logits.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        logits = self.logits.clamp(min=float(finfo(self.logits).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events).reshape(-1, *((1,) * len(self.batch_shape)))
        return values.expand(-1, *self.batch_shape) if expand else values

