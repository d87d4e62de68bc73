"""`shapeflow.nn.functional` (imported as F): PyTorch's functional API over shapeflow's ops.

Layers in `shapeflow.nn` call these; each is a primitive in `ops/nn/`, `ops/activation/`,
`ops/loss/`, `ops/norm/`, `ops/conv/` or `ops/elementwise/`, or a short composite of them.
"""

from __future__ import annotations

from ..ops import activation as _A
from ..ops import registry as _registry
from ..ops.conv import interpolate
from ..tensor import Tensor

# F.<op>: every op function declared @public(functional=...) (ops/registry.py)
_REGISTERED = _registry.namespace("functional")
globals().update(_REGISTERED)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0); `inplace=True` changes input (as PyTorch) and returns it."""
    return input.relu_() if inplace else _A.relu(input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x); `inplace` is accepted for PyTorch compatibility (result is new)."""
    return _A.silu(input)


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


# the op functions, and the ones written here (PyTorch's keywords over them, older names)
__all__ = [*_REGISTERED, "relu", "silu", "upsample", "upsample_nearest", "upsample_bilinear",
           "pad"]


def __getattr__(name: str):
    from .._porting_hooks import missing_attribute  # says so for a name PyTorch has

    raise missing_attribute("module 'shapeflow.nn.functional'", "torch.nn.functional", name)
