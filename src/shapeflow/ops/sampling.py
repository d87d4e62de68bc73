"""Sampling from distributions through shapeflow's Generator (reproducible from sf.manual_seed).

multinomial, bernoulli, normal, poisson, randint_like and the in-place fills
(`uniform_`, `normal_`, `exponential_`, `bernoulli_`, `geometric_`, `log_normal_`,
`cauchy_`). Samples carry no gradient: PyTorch's are zero for these, so the graph stops
here (noted as a graph break by kind "int").

Draws come from the host generator, as NumPy arrays, and go to the tensor's device with
`device.from_numpy` (free on cpu, so cpu values stay those of the generator); the rest is
computed on the device.
"""

from __future__ import annotations

import numbers

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..device import get_device, meta
from ..errors import DTypeError, GraphError, ShapeError, ShapeflowError
from ..random import Generator, get_rng
from ..shape import broadcast_shapes
from ..tensor import Tensor, describe
from .base import Op, apply
from .movement.index_arrays import host
from .registry import public

_I64, _F64 = _dt.int64.np, _dt.float64.np


class DistributionError(ShapeflowError, ValueError, RuntimeError):
    """Parameters outside a distribution's domain (negative weights, p outside [0, 1])."""

    kind = "DistributionError"


def _float_only(op: str, x: Tensor, what: str = "input") -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: {what} must be a floating tensor, got {x.dtype}", op=op,
                         operands=[(what, describe(x))], hint="convert with .float()")


class Multinomial(Op):
    """Indices drawn from the categories of each row, weighted by the input."""

    name = "multinomial"
    differentiable = False

    def __init__(self, num_samples: int, replacement: bool, rng) -> None:
        self.num_samples, self.replacement, self.rng = num_samples, replacement, rng

    def infer(self, w):
        ops = [("input", describe(w))]
        _float_only(self.name, w)
        if w.ndim not in (1, 2):
            raise ShapeError(f"multinomial: prob_dist must be 1 or 2 dim, got {w.ndim} dims",
                             op=self.name, operands=ops)
        k = self.num_samples
        if not isinstance(k, numbers.Integral) or k <= 0:
            raise ShapeError(f"multinomial: num_samples must be a positive int, got {k!r}",
                             op=self.name, operands=ops)
        n = w.shape[-1]
        if not self.replacement and type(n) is int and k > n:
            raise ShapeError(
                f"multinomial: cannot sample n_sample ({k}) > prob_dist.size(-1) ({n}) "
                "samples without replacement", op=self.name, operands=ops,
                hint="pass replacement=True, or draw fewer samples")
        return tuple(w.shape[:-1]) + (k,), _dt.int64

    def forward(self, w):
        dev = self.device
        xp = dev.xp
        p = xp.atleast_2d(w).astype(_F64)
        if p.size and not (xp.isfinite(p).all() and (p >= 0).all()):
            raise DistributionError(
                "multinomial: probability tensor contains either inf, nan or element < 0",
                op=self.name, operands=[("input", f"{w.shape} {w.dtype}")])
        total = p.sum(-1)
        if (total <= 0).any():
            raise DistributionError(
                "multinomial: invalid multinomial distribution (sum of probabilities <= 0)",
                op=self.name, operands=[("input", f"{list(w.shape)}")],
                hint="each row needs at least one positive weight")
        rows, n = p.shape
        k = self.num_samples
        if self.replacement:
            cdf = xp.cumsum(p, -1)
            cdf /= cdf[:, -1:]  # the last entry exactly 1.0: a draw in [0, 1) lands inside
            u = dev.from_numpy(self.rng.random((rows, k)))
            out = xp.empty((rows, k), _I64)
            for r in range(rows):  # searchsorted per row: exact, and rows are few
                out[r] = xp.searchsorted(cdf[r], u[r], side="right")
            xp.minimum(out, n - 1, out=out)
        else:
            if ((p > 0).sum(-1) < k).any():
                raise DistributionError(
                    "multinomial: invalid multinomial distribution (with replacement=False, "
                    "not enough non-negative category to sample)", op=self.name,
                    operands=[("input", f"{list(w.shape)}")])
            # the exponential race: draws in order of E / p are weighted sampling without
            # replacement (each next draw among the rest, in proportion to its weight)
            with xp.errstate(divide="ignore"):
                keys = dev.from_numpy(self.rng.standard_exponential((rows, n))) / p
            out = xp.argsort(keys, axis=-1, kind="stable")[:, :k].astype(_I64)
        return out.reshape(w.shape[:-1] + (k,))


@public(method=True)
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Generator | None = None) -> Tensor:
    """Draw num_samples category indices per row, with probabilities proportional to input."""
    return apply(Multinomial(num_samples, replacement, get_rng(generator)), input)


class Bernoulli(Op):
    """0/1 draws with probability p (the input, or a float p), in the input's dtype."""

    name = "bernoulli"
    differentiable = False

    def __init__(self, p, rng) -> None:
        self.p, self.rng = p, rng

    def infer(self, x):
        if self.p is None:
            _float_only(self.name, x)
        elif not 0 <= self.p <= 1:
            raise DistributionError(f"bernoulli: p must be in [0, 1], got {self.p}",
                                    op=self.name, operands=[("input", describe(x))])
        return tuple(x.shape), x.dtype

    def forward(self, x):
        p = float(self.p) if self.p is not None else x.astype(_F64)
        if self.p is None and x.size and not ((p >= 0) & (p <= 1)).all():
            raise DistributionError("bernoulli: every probability must be in [0, 1]",
                                    op=self.name, operands=[("input", f"{list(x.shape)}")])
        return (self.device.from_numpy(self.rng.random(x.shape)) < p).astype(x.dtype)


@public(method=True)
def bernoulli(input: Tensor, p: float | None = None, *,  # noqa: A002
              generator: Generator | None = None) -> Tensor:
    """1 with probability input (or p), else 0."""
    return apply(Bernoulli(p, get_rng(generator)), input)


class Poisson(Op):
    name = "poisson"
    differentiable = False

    def __init__(self, rng) -> None:
        self.rng = rng

    def infer(self, rate):
        _float_only(self.name, rate)
        return tuple(rate.shape), rate.dtype

    def forward(self, rate):
        if rate.size and not (rate >= 0).all():
            raise DistributionError("poisson: every rate must be >= 0", op=self.name,
                                    operands=[("input", f"{list(rate.shape)}")])
        # the generator draws on the host: the rates go there, the counts come back
        dev = self.device
        counts = self.rng.poisson(dev.to_numpy(rate.astype(_F64)))
        return dev.from_numpy(host.asarray(counts).astype(rate.dtype))


@public()
def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """A Poisson draw for each rate in input."""
    return apply(Poisson(get_rng(generator)), input)


class Normal(Op):
    """N(mean, std^2) draws, mean and std broadcast (either may be a number)."""

    name = "normal"
    differentiable = False

    def __init__(self, rng, mean=None, std=None) -> None:
        self.rng, self.mean, self.std = rng, mean, std

    def infer(self, *ts):
        for t in ts:
            _float_only(self.name, t, "mean" if self.mean is None and t is ts[0] else "std")
        shape = tuple(ts[0].shape)
        if len(ts) == 2:
            shape = broadcast_shapes(shape, tuple(ts[1].shape), self.name, ("mean", "std"))
        self.shape = tuple(shape)
        if self.std is not None and self.std < 0:
            raise DistributionError(f"normal: std must be >= 0, got {self.std}", op=self.name)
        return shape, _dt.promote_types(ts[0].dtype, ts[-1].dtype)

    def forward(self, *arrays):
        if self.mean is None and self.std is None:
            mean, std = arrays
        elif self.mean is None:
            mean, std = arrays[0], self.std
        else:
            mean, std = self.mean, arrays[0]
        if getattr(std, "ndim", 0) and std.size and not (std >= 0).all():
            raise DistributionError("normal: every std must be >= 0", op=self.name)
        dev = self.device
        out = mean + std * dev.from_numpy(self.rng.standard_normal(self.shape))
        dt = dev.xp.result_type(*[a.dtype for a in arrays])
        return dev.xp.asarray(out).astype(dt, copy=False)


@public()
def normal(mean, std=1.0, size=None, *, generator: Generator | None = None, dtype=None,
           device=None, requires_grad: bool = False, layout=None) -> Tensor:
    """N(mean, std^2): mean and/or std tensors (broadcast), or two numbers and a size."""
    from ..factories import check_layout

    check_layout(layout, "normal")
    rng = get_rng(generator)
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if mt and st:
        return apply(Normal(rng), mean, std)
    if mt:
        return apply(Normal(rng, std=float(std)), mean)
    if st:
        return apply(Normal(rng, mean=float(mean)), std)
    if size is None:
        raise ShapeError("normal: with a number for mean and std, give a size", op="normal")
    if std < 0:
        raise DistributionError(f"normal: std must be >= 0, got {std}", op="normal")
    from ..factories import empty

    out = empty(*((size,) if isinstance(size, int) else tuple(size)), dtype=dtype,
                device=device)
    _fill(out, "normal", lambda shape, dev: dev.from_numpy(rng.normal(mean, std, shape)))
    out.requires_grad = requires_grad
    return out


@public()
def randint_like(input: Tensor, low: int = 0, high: int | None = None, *,  # noqa: A002
                 generator: Generator | None = None, dtype=None, device=None) -> Tensor:
    """Integers in [low, high) in input's shape (randint_like(x, high) starts at 0)."""
    from ..factories import randint

    if high is None:
        low, high = 0, low
    dtype = input.dtype if dtype is None else dtype
    device = input.device if device is None else get_device(device)
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype,
                   device=device)


# ---- in-place fills ------------------------------------------------------------------------
def _fill(t: Tensor, name: str, draw) -> Tensor:
    """Write draw(shape, device), an array of t's device, into t: a constant afterwards, as
    fill_ leaves it."""
    if grad_mode.state.enabled and t.requires_grad and t.grad_fn is None:
        raise GraphError(f"{name}: a leaf tensor that requires grad {describe(t)} is used in "
                         "an in-place operation", op=name,
                         hint="initialize parameters under sf.no_grad() (or use sf.nn.init)")
    if t.device is not meta:
        t._data[...] = draw(tuple(t.shape), t.device)
    t._version[0] += 1
    t._version[1] = name
    if t.grad_fn is not None:  # the values no longer depend on what computed them
        t.grad_fn, t.requires_grad = None, False
    return t


@public(sf=False, method=True)
def uniform_(t: Tensor, from_: float = 0.0, to: float = 1.0, *,
             generator: Generator | None = None, **kwargs) -> Tensor:
    """Fill t with U(from, to) draws (`from` is PyTorch's keyword)."""
    from_ = kwargs.pop("from", from_)
    if from_ > to:
        raise DistributionError(f"uniform_: expects a [from, to) range, but found from={from_} "
                                f"> to={to}", op="uniform_", operands=[("self", describe(t))])
    rng = get_rng(generator)
    return _fill(t, "uniform_", lambda s, dev: dev.from_numpy(rng.uniform(from_, to, s)))


@public(sf=False, method=True)
def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill t with N(mean, std^2) draws."""
    if std < 0:
        raise DistributionError(f"normal_: std must be >= 0, got {std}", op="normal_",
                                operands=[("self", describe(t))])
    rng = get_rng(generator)
    return _fill(t, "normal_", lambda s, dev: dev.from_numpy(rng.normal(mean, std, s)))


@public(sf=False, method=True)
def exponential_(t: Tensor, lambd: float = 1.0, *,
                 generator: Generator | None = None) -> Tensor:
    """Fill t with Exponential(rate lambd) draws."""
    if not lambd > 0:
        raise DistributionError(f"exponential_: lambd must be > 0, got {lambd}",
                                op="exponential_", operands=[("self", describe(t))])
    rng = get_rng(generator)
    return _fill(t, "exponential_",
                 lambda s, dev: dev.from_numpy(rng.exponential(1.0 / lambd, s)))


@public(sf=False, method=True)
def bernoulli_(t: Tensor, p=0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill t with 1 (probability p, a number or a tensor broadcast to t) or 0."""
    rng = get_rng(generator)
    if isinstance(p, Tensor):
        pa = p._data
        if pa is not None and pa.size and not ((pa >= 0) & (pa <= 1)).all():
            raise DistributionError("bernoulli_: every probability must be in [0, 1]",
                                    op="bernoulli_", operands=[("p", describe(p))])
        broadcast_shapes(tuple(t.shape), tuple(p.shape), "bernoulli_", ("self", "p"))
    elif not 0 <= p <= 1:
        raise DistributionError(f"bernoulli_: p must be in [0, 1], got {p}", op="bernoulli_",
                                operands=[("self", describe(t))])
    else:
        pa = p
    return _fill(t, "bernoulli_", lambda s, dev: dev.from_numpy(rng.random(s)) < pa)


@public(sf=False, method=True)
def geometric_(t: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    """Fill t with Geometric(p) draws: the number of Bernoulli(p) trials up to the first
    success (1, 2, ...), integer or floating t."""
    if not 0 < p < 1:
        raise DistributionError(f"geometric_: p must be in (0, 1), got {p}", op="geometric_",
                                operands=[("self", describe(t))])
    rng = get_rng(generator)
    return _fill(t, "geometric_", lambda s, dev: dev.from_numpy(rng.geometric(p, s)))


@public(sf=False, method=True)
def log_normal_(t: Tensor, mean: float = 1.0, std: float = 2.0, *,
                generator: Generator | None = None) -> Tensor:
    """Fill t with exp(N(mean, std^2)) draws (mean and std are the logarithm's)."""
    _float_only("log_normal_", t, "self")
    if not std > 0:
        raise DistributionError(f"log_normal_: std must be > 0, got {std}", op="log_normal_",
                                operands=[("self", describe(t))])
    rng = get_rng(generator)
    return _fill(t, "log_normal_", lambda s, dev: dev.from_numpy(rng.lognormal(mean, std, s)))


@public(sf=False, method=True)
def cauchy_(t: Tensor, median: float = 0.0, sigma: float = 1.0, *,
            generator: Generator | None = None) -> Tensor:
    """Fill t with Cauchy(median, sigma) draws (location median, half-width sigma)."""
    _float_only("cauchy_", t, "self")
    if not sigma > 0:
        raise DistributionError(f"cauchy_: sigma must be > 0, got {sigma}", op="cauchy_",
                                operands=[("self", describe(t))])
    rng = get_rng(generator)
    return _fill(t, "cauchy_",
                 lambda s, dev: dev.from_numpy(median + sigma * rng.standard_cauchy(s)))
