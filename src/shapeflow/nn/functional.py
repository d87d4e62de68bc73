"""`shapeflow.nn.functional` (imported as F): PyTorch's functional API over shapeflow's ops.

Layers in `shapeflow.nn` call these; each is a primitive in `ops/nn/`, `ops/conv.py` or
`ops/elementwise/`, or a short composite of them.
"""

from __future__ import annotations

from ..ops import elementwise as _E
from ..ops.conv import avg_pool2d, conv2d, max_pool2d
from ..ops.nn import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    dropout,
    elu,
    embedding,
    l1_loss,
    layer_norm,
    leaky_relu,
    linear,
    log_softmax,
    mse_loss,
    nll_loss,
    one_hot,
    rms_norm,
    scaled_dot_product_attention,
    softmax,
)
from ..tensor import Tensor

gelu = _E.gelu
tanh = _E.tanh
sigmoid = _E.sigmoid
softplus = _E.softplus


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0); `inplace=True` changes input (as PyTorch) and returns it."""
    return input.relu_() if inplace else _E.relu(input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x); `inplace` is accepted for PyTorch compatibility (result is new)."""
    return _E.silu(input)


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pad the last dims (PyTorch's F.pad): pad = (left, right, top, bottom, ...)."""
    from ..ops import movement

    fn = getattr(movement, "pad", None)
    if fn is None:
        raise NotImplementedError("F.pad needs shapeflow.ops.movement.pad, which is not "
                                  "available in this build")
    if value is None:
        return fn(input, pad, mode=mode)
    return fn(input, pad, mode=mode, value=value)


__all__ = [
    "linear", "softmax", "log_softmax", "layer_norm", "rms_norm", "embedding", "one_hot",
    "dropout", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "binary_cross_entropy_with_logits", "binary_cross_entropy", "scaled_dot_product_attention",
    "gelu", "relu", "silu", "tanh", "sigmoid", "softplus", "leaky_relu", "elu", "conv2d",
    "max_pool2d", "avg_pool2d", "pad",
]
