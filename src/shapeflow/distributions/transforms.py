"""Bijections y = f(x) with log|det df/dx|, for TransformedDistribution (torch's transforms)."""

from __future__ import annotations

import math
import numbers

from ..nn.functional import softplus
from ..tensor import Tensor
from . import constraints
from .utils import finfo, sum_rightmost

__all__ = ["AffineTransform", "ComposeTransform", "ExpTransform", "PowerTransform",
           "SigmoidTransform", "SoftmaxTransform", "TanhTransform", "Transform",
           "identity_transform"]


class Transform:
    """An invertible map with domain/codomain constraints and log_abs_det_jacobian(x, y)."""

    bijective = False
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached: tuple[Tensor, Tensor] | None = None  # (x, y) of the last call
        self._inv: _InverseTransform | None = None

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        """The inverse transform: inv(y) = x."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self) -> int:
        """+1 or -1: whether this elementwise map increases or decreases."""
        raise NotImplementedError

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size and self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """log |dy/dx|, summed over the transform's event dims."""
        raise NotImplementedError

    def forward_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of f(x) for x of the given shape."""
        return tuple(shape)

    def inverse_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of inv(y) for y of the given shape."""
        return tuple(shape)

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


def _same(a, b) -> bool:
    """Equal parameters, numbers or tensors (kl_divergence compares transforms)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return bool((a == b).all()) if isinstance(a, Tensor) else bool((b == a).all())
    return a == b


class _Parameterless:
    """Transforms without parameters are equal when of one class."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    __hash__ = object.__hash__


class _InverseTransform(Transform):
    """The inverse of a bijective transform."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv_of = transform

    domain = property(lambda self: self._inv_of.codomain)
    codomain = property(lambda self: self._inv_of.domain)
    bijective = property(lambda self: self._inv_of.bijective)
    sign = property(lambda self: self._inv_of.sign)

    @property
    def inv(self) -> Transform:
        return self._inv_of

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv_of._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv_of.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv_of.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv_of.forward_shape(shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _InverseTransform) and self._inv_of == other._inv_of

    __hash__ = object.__hash__


class ComposeTransform(Transform):
    """The transforms applied in order: parts[0] first."""

    def __init__(self, parts: list[Transform], cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    @property
    def domain(self) -> constraints.Constraint:
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim  # shapes may grow event dims on the way
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @property
    def codomain(self) -> constraints.Constraint:
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self) -> bool:
        return all(p.bijective for p in self.parts)

    @property
    def sign(self) -> int:
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def _call(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return x * 0
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms, event_dim = [], self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(sum_rightmost(part.log_abs_det_jacobian(a, b),
                                       event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return tuple(shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class ExpTransform(_Parameterless, Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = 1

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class PowerTransform(Transform):
    """y = x ** exponent on positive x."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    @property
    def sign(self):
        return self.exponent.sign() if isinstance(self.exponent, Tensor) else (
            1 if self.exponent > 0 else -1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PowerTransform) and _same(self.exponent, other.exponent)

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        e = self.exponent
        scale = e.abs().log() if isinstance(e, Tensor) else math.log(abs(e))
        return scale + (y / x).log()


class SigmoidTransform(_Parameterless, Transform):
    """y = sigmoid(x) = 1 / (1 + exp(-x))."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = 1

    def _call(self, x: Tensor) -> Tensor:
        eps = finfo(x)
        return x.sigmoid().clamp(float(eps.tiny), 1 - float(eps.eps))

    def _inverse(self, y: Tensor) -> Tensor:
        eps = finfo(y)
        y = y.clamp(float(eps.tiny), 1 - float(eps.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -softplus(-x) - softplus(x)


class TanhTransform(_Parameterless, Transform):
    """y = tanh(x)."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = 1

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.atanh()  # the cache (cache_size=1) avoids atanh's loss near +-1

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # log(1 - tanh(x)^2), written stably as torch does
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AffineTransform(Transform):
    """y = loc + scale * x, over event_dim rightmost dims."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @property
    def domain(self) -> constraints.Constraint:
        return constraints.real if self._event_dim == 0 else constraints.independent(
            constraints.real, self._event_dim)

    codomain = domain

    @property
    def sign(self):
        s = self.scale
        return s.sign() if isinstance(s, Tensor) else (1 if s > 0 else -1 if s < 0 else 0)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, AffineTransform) and _same(self.loc, other.loc)
                and _same(self.scale, other.scale))

    __hash__ = object.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        s = self.scale
        if isinstance(s, numbers.Real):
            out = x * 0 + math.log(abs(s))
        else:
            out = (s.abs().log() + x * 0)
        return sum_rightmost(out, self._event_dim)

    def forward_shape(self, shape):
        return _broadcast(shape, self.loc, self.scale)

    def inverse_shape(self, shape):
        return _broadcast(shape, self.loc, self.scale)


def _broadcast(shape, *params) -> tuple[int, ...]:
    import numpy as np

    shapes = [tuple(p.shape) for p in params if isinstance(p, Tensor)]
    return tuple(np.broadcast_shapes(tuple(shape), *shapes))


class SoftmaxTransform(_Parameterless, Transform):
    """y = softmax(x) over the last dim (not bijective: no log_abs_det_jacobian)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x: Tensor) -> Tensor:
        return x.softmax(-1)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()
