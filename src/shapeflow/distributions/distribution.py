"""Distribution: the base class, with torch.distributions' shapes, sampling and validation."""

from __future__ import annotations

from typing import Any

from ..autograd import grad_mode
from ..ops.sampling import DistributionError
from ..tensor import Tensor
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _size(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


class Distribution:
    """A probability distribution with batch_shape (independent copies) and event_shape."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True  # torch validates by default (under __debug__)

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument and sample validation on or off for distributions made later."""
        if value not in (True, False):
            raise ValueError("set_default_validate_args: expected True or False")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (),
                 validate_args: bool | None = None) -> None:
        self._batch_shape, self._event_shape = _size(batch_shape), _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if not self._validate_args:
            return
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param),
                                                         lazy_property):
                continue  # the other parametrization was given: nothing to check
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise DistributionError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{value}",
                    op=f"distributions.{type(self).__name__}")

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Distribution:
        """This distribution with its batch dims broadcast to batch_shape (no copy)."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """Constraint per parameter name."""
        raise NotImplementedError

    @property
    def support(self) -> constraints.Constraint:
        """The constraint the values of this distribution satisfy."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Samples of shape sample_shape + batch_shape + event_shape, without gradient."""
        with grad_mode.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """Reparameterized samples: gradients flow back to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample")

    def sample_n(self, n: int) -> Tensor:
        """n samples (deprecated in torch: use sample((n,)))."""
        return self.sample((n,))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the density (or mass) at value."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at value."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at value."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """All values of a discrete distribution, along a new leading dim."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, over batch_shape."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Any = ()) -> tuple[int, ...]:
        return _size(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value: Any) -> None:
        op = f"distributions.{type(self).__name__}"
        if not isinstance(value, Tensor):
            raise DistributionError("The value argument to log_prob must be a Tensor", op=op)
        shape = tuple(value.shape)
        start = len(shape) - len(self._event_shape)
        if shape[start:] != self._event_shape:
            raise DistributionError("The right-most size of value must match event_shape: "
                                    f"{shape} vs {self._event_shape}.", op=op)
        actual, expected = shape, self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise DistributionError("Value is not broadcastable with batch_shape+"
                                        f"event_shape: {actual} vs {expected}.", op=op)
        try:
            support = self.support
        except NotImplementedError:
            return
        if not bool(support.check(value).all()):
            raise DistributionError(
                f"Expected value argument ({type(value).__name__} of shape {shape}) to be "
                f"within the support ({support!r}) of the distribution {self!r}, but found "
                f"invalid values:\n{value}", op=op)

    def _get_checked_instance(self, cls: type, _instance: Distribution | None) -> Distribution:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return type(self).__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else tuple(self.__dict__[p].shape)}"  # noqa: E501
                         for p in names)
        return f"{type(self).__name__}({args})"
