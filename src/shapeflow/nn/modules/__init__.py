"""`shapeflow.nn.modules`: torch.nn.modules' file paths (`nn.modules.conv.Conv2d`,
`from shapeflow.nn.modules.batchnorm import _BatchNorm`) for shapeflow.nn's classes.

Each file module reads shapeflow.nn when a name is asked for; a class PyTorch defines in
that file and shapeflow lacks raises an AttributeError that says so.
"""

from __future__ import annotations

from ..._porting_hooks import missing_attribute, torch_names_of
from . import (
    activation,
    adaptive,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    lazy,
    linear,
    linear_cross_entropy_options,
    loss,
    module,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
    utils,
)

__all__ = [
    "activation", "adaptive", "batchnorm", "channelshuffle", "container", "conv", "distance",
    "dropout", "flatten", "fold", "instancenorm", "lazy", "linear",
    "linear_cross_entropy_options", "loss", "module", "normalization", "padding",
    "pixelshuffle", "pooling", "rnn", "sparse", "transformer", "upsampling", "utils",
]


def __getattr__(name: str):
    # torch.nn.modules re-exports its files' classes: nn.modules.Linear is nn.Linear
    if name in torch_names_of("torch.nn.modules"):
        import shapeflow.nn

        try:
            return getattr(shapeflow.nn, name)
        except AttributeError:
            pass  # PyTorch's name, shapeflow lacks it: the message below says so
    raise missing_attribute("module 'shapeflow.nn.modules'", "torch.nn.modules", name)
