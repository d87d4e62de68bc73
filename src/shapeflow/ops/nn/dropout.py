"""dropout: a saved bool mask and one scaled multiply each way."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...errors import ShapeError
from ...random import get_rng
from ...tensor import Tensor
from ..base import DROPOUT_MASK, Op, Saved, apply
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
        rng = get_rng(self.generator)
        if x.dtype == np.float32:
            r = np.asarray(rng.random(x.shape, dtype=np.float32))
            mask = r >= self.p
            out = np.multiply(x, np.float32(self.scale), out=r)  # reuse the random buffer
        else:  # no buffer to reuse: draw in blocks, so the float32 draws are never whole
            mask = keep_mask(rng, x.shape, self.p)
            out = x * x.dtype.type(self.scale)
        out *= mask
        self.mask = mask
        return out

    def backward(self, g):
        (mask,) = self.saved_tensors
        return (_mask_scale(g, mask, self.scale),)


BLOCK = 1 << 16  # float32 draws per block: the same stream as one whole draw


def keep_mask(rng, shape: tuple, p: float) -> np.ndarray:
    """rng.random(shape, float32) >= p, drawn block by block (scratch: one block)."""
    mask = np.empty(shape, np.bool_)
    flat = mask.reshape(-1)
    for a in range(0, flat.size, BLOCK):
        np.greater_equal(rng.random(min(BLOCK, flat.size - a), dtype=np.float32), p,
                         out=flat[a:a + BLOCK])
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
        out = np.multiply(g, mask, dtype=g.dtype)
        out *= g.dtype.type(self.scale)
        return out


def _mask_scale(g: Tensor, mask: Tensor, scale: float) -> Tensor:
    if _create_graph():
        return g * mask * scale
    return apply(MaskScale(scale), g, mask)


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
