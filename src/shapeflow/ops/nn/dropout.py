"""dropout: a saved bool mask and one scaled multiply each way."""

from __future__ import annotations

import warnings

from ... import dtypes as _dt
from ...errors import ShapeError, ShapeRuntimeError
from ...random import get_rng
from ...tensor import Tensor, describe
from ..base import DROPOUT_MASK, Op, Saved, apply
from ..registry import public
from ._common import _create_graph, _need_float


class Dropout(Op):
    """Zero each element with probability p, scale the rest by 1/(1-p); keeps a bool mask."""

    name = "dropout"

    def __init__(self, p: float, generator=None) -> None:
        self.p, self.generator = p, generator
        self.scale = 1.0 / (1.0 - p) if p < 1 else 0.0

    def infer(self, x):
        _need_float("dropout", x)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (Saved.new("mask", x.shape, _dt.bool_, DROPOUT_MASK),)

    def forward(self, x):
        rng = get_rng(self.generator)  # draws on the host, moved (free on cpu)
        if x.dtype == _F32:
            r = self.device.from_numpy(rng.random(x.shape, dtype=_F32))
            mask = r >= self.p
            out = self.device.xp.multiply(x, _F32.type(self.scale), out=r)  # reuse the draws
        else:  # no buffer to reuse: draw in blocks, so the float32 draws are never whole
            mask = keep_mask(self.device, rng, x.shape, self.p)
            out = x * x.dtype.type(self.scale)
        out *= mask
        self.mask = mask
        return out

    def backward(self, g):
        (mask,) = self.saved_tensors
        return (_mask_scale(g, mask, self.scale),)


BLOCK = 1 << 16  # float32 draws per block: the same stream as one whole draw
_F32 = _dt.float32.np


def keep_mask(device, rng, shape: tuple, p: float):
    """rng.random(shape, float32) >= p on `device`, drawn on the host block by block
    (scratch: one block)."""
    mask = device.xp.empty(shape, _dt.bool_.np)
    flat = mask.reshape(-1)
    for a in range(0, flat.size, BLOCK):
        flat[a:a + BLOCK] = device.from_numpy(rng.random(min(BLOCK, flat.size - a),
                                                         dtype=_F32) >= p)
    return mask


class MaskScale(Op):
    """g * mask * scale in one pass (dropout's backward)."""

    name = "dropout_backward"
    differentiable = False

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def infer(self, g, mask):
        return g.shape, g.dtype

    def forward(self, g, mask):
        out = self.device.xp.multiply(g, mask, dtype=g.dtype)
        out *= g.dtype.type(self.scale)
        return out


def _mask_scale(g: Tensor, mask: Tensor, scale: float) -> Tensor:
    if _create_graph():
        return g * mask * scale
    return apply(MaskScale(scale), g, mask)


@public(functional=True)
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator=None) -> Tensor:
    """Zero elements with probability p and scale by 1/(1-p) (identity when not training).

    `inplace` is accepted for PyTorch compatibility; the result is always a new tensor.
    """
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    return apply(Dropout(float(p), generator), input)


SELU_ALPHA = 1.7580993408473766  # SELU's scale * alpha: where SELU saturates (PyTorch's value)


class NoiseDropout(Op):
    """Channel-wise (feature) and/or alpha dropout: one Bernoulli(1-p) draw per element, or
    per (batch, channel) broadcast over the spatial dims; alpha keeps SELU's mean and variance.
    """

    name = "feature_dropout"

    def __init__(self, p: float, feature: bool, alpha: bool, generator=None) -> None:
        self.p, self.feature, self.alpha, self.generator = p, feature, alpha, generator
        if alpha:  # ATen's coefficients: out = a * (x * keep + alpha * (keep - 1)) + alpha*a*p
            self.name = "feature_alpha_dropout" if feature else "alpha_dropout"
            self.scale = 1.0 / ((SELU_ALPHA ** 2 * p + 1) * (1 - p)) ** 0.5
        else:
            self.scale = 1.0 / (1.0 - p)

    def infer(self, x):
        _need_float(self.name, x)
        if self.feature:
            if x.ndim < 2:
                raise ShapeRuntimeError(
                    f"{self.name}: Feature dropout requires at least 2 dimensions in the "
                    f"input, got {describe(x)}", op=self.name,
                    operands=[("input", describe(x))], hint="the input is (N, C, *)")
            self.noise_shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
        else:
            self.noise_shape = tuple(x.shape)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (Saved.new("mask", self.noise_shape, _dt.bool_, DROPOUT_MASK),)

    def forward(self, x):
        mask = keep_mask(self.device, get_rng(self.generator), self.noise_shape, self.p)
        self.mask = mask
        t = x.dtype.type
        out = x * mask
        out *= t(self.scale)
        if self.alpha:  # the dropped places get alpha*a*(p-1), the kept ones alpha*a*p more
            out += self.device.xp.where(mask, t(SELU_ALPHA * self.scale * self.p),
                            t(SELU_ALPHA * self.scale * (self.p - 1)))
        return out

    def backward(self, g):
        (mask,) = self.saved_tensors
        return (_mask_scale(g, mask, self.scale),)


def _noise_dropout(input: Tensor, p: float, training: bool, feature: bool, alpha: bool,
                   generator=None) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:  # as ATen: input * 0 (NaN and inf stay NaN), for alpha dropout too
        return input * 0.0
    return apply(NoiseDropout(float(p), feature, alpha, generator), input)


def feature_dropout(input: Tensor, p: float = 0.5, training: bool = True,
                    generator=None) -> Tensor:
    """Zero whole channels x[n, c] with probability p, scale the rest by 1/(1-p)."""
    return _noise_dropout(input, p, training, True, False, generator)


@public(sf=False, functional=True)
def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False, generator=None) -> Tensor:
    """Dropout for SELU networks: dropped values go to SELU's floor, mean and variance kept."""
    return _noise_dropout(input, p, training, False, True, generator)


@public(sf=False, functional=True)
def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False, generator=None) -> Tensor:
    """alpha_dropout of whole channels x[n, c] (one draw per batch item and channel)."""
    return _noise_dropout(input, p, training, True, True, generator)


def _channel_dropout(name: str, input: Tensor, p: float, training: bool, spatial: int,
                     generator) -> Tensor:
    """dropout1d/2d/3d: PyTorch's checks and warnings, then feature dropout."""
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability has to be between 0 and 1, but got {p}")
    nd = input.ndim
    if spatial == 1 and nd not in (2, 3):
        raise ShapeRuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {nd}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs).", op="dropout1d", operands=[("input", describe(input))])
    if spatial > 1 and nd not in (spatial + 1, spatial + 2):
        warnings.warn(
            f"{name}: Received a {nd}-D input to {name}, which is deprecated and will result "
            f"in an error in a future release. To retain the behavior and silence this warning, "
            f"please use dropout instead. Note that {name} exists to provide channel-wise "
            f"dropout on inputs with {spatial} spatial dimensions, a channel dimension, and an "
            f"optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).",
            stacklevel=3)
    if spatial == 2 and nd == 3:  # PyTorch still reads a 3-D input as (N, C, L) here
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=3)
    # as PyTorch: dropout1d adds a batch dim to 2-D input, dropout3d to anything not 5-D
    unbatched = nd == 2 if spatial == 1 else spatial == 3 and nd != 5
    if unbatched:
        input = input.unsqueeze(0)
    out = feature_dropout(input, p, training, generator)
    return out.squeeze(0) if unbatched else out


@public(sf=False, functional=True)
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator=None) -> Tensor:
    """Channel-wise dropout of (N, C, L) or (C, L): whole channels zeroed with probability p."""
    return _channel_dropout("dropout1d", input, p, training, 1, generator)


@public(sf=False, functional=True)
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator=None) -> Tensor:
    """Channel-wise dropout of (N, C, H, W): whole channels zeroed with probability p."""
    return _channel_dropout("dropout2d", input, p, training, 2, generator)


@public(sf=False, functional=True)
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator=None) -> Tensor:
    """Channel-wise dropout of (N, C, D, H, W) or (C, D, H, W)."""
    return _channel_dropout("dropout3d", input, p, training, 3, generator)
