"""`shapeflow.nn.functional` (imported as F): PyTorch's functional API over shapeflow's ops.

Layers in `shapeflow.nn` call these; each is a primitive in `ops/nn/`, `ops/conv/` or
`ops/elementwise/`, or a short composite of them.
"""

from __future__ import annotations

from ..ops import elementwise as _E
from ..ops.conv import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    fold,
    interpolate,
    max_pool1d,
    max_pool2d,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
)
from ..ops.nn import (
    batch_norm,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    dropout,
    elu,
    embedding,
    group_norm,
    instance_norm,
    l1_loss,
    layer_norm,
    leaky_relu,
    linear,
    log_softmax,
    mse_loss,
    nll_loss,
    normalize,
    one_hot,
    rms_norm,
    scaled_dot_product_attention,
    softmax,
)
from ..ops.nn.activations_extra import (
    celu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    logsigmoid,
    mish,
    prelu,
    relu6,
    rrelu,
    selu,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from ..ops.nn.dropout import (
    alpha_dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
)
from ..ops.nn.feature_mixing import bilinear, channel_shuffle
from ..ops.nn.loss_extra import (
    cosine_embedding_loss,
    cosine_similarity,
    gaussian_nll_loss,
    huber_loss,
    kl_div,
    margin_ranking_loss,
    pairwise_distance,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
)
from ..ops.reduce.distances import pdist
from ..tensor import Tensor
from .local_response_norm import local_response_norm

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


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """The older name of interpolate (PyTorch keeps it, deprecated)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """The older name of interpolate(mode="nearest") (PyTorch keeps it, deprecated)."""
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """The older name of interpolate(mode="bilinear", align_corners=True) (deprecated)."""
    return interpolate(input, size, scale_factor, "bilinear", True)


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
    "max_pool2d", "avg_pool2d", "pad", "celu", "glu", "hardshrink", "hardsigmoid", "hardswish",
    "hardtanh", "logsigmoid", "mish", "prelu", "relu6", "selu", "softmin", "softshrink",
    "softsign", "tanhshrink",
    "batch_norm", "conv1d", "conv_transpose1d",
    "conv_transpose2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "group_norm", "instance_norm", "normalize", "conv3d", "interpolate",
    "upsample", "pixel_shuffle", "pixel_unshuffle", "unfold", "fold", "local_response_norm",
    "smooth_l1_loss", "huber_loss", "kl_div", "margin_ranking_loss", "soft_margin_loss",
    "cosine_embedding_loss", "gaussian_nll_loss", "poisson_nll_loss", "cosine_similarity",
    "pairwise_distance", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "threshold", "bilinear", "channel_shuffle", "pdist",
    "upsample_nearest", "upsample_bilinear", "rrelu",
]


def __getattr__(name: str):
    from .._porting_hooks import missing_attribute  # says so for a name PyTorch has

    raise missing_attribute("module 'shapeflow.nn.functional'", "torch.nn.functional", name)
