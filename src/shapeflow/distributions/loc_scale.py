"""The part Normal and Laplace share: a real location, a positive scale, broadcast together."""

from __future__ import annotations

import numbers

from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class LocScale(Distribution):
    """A distribution of loc + scale * (a fixed standard one): parameters, expand, mean, mode."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        scalar = isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number)
        super().__init__(() if scalar else tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LocScale:
        new = self._get_checked_instance(type(self), _instance)
        shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(*shape), self.scale.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc
