"""Parameter initialisation (as `torch.nn.init`): in place, from shapeflow.random.

Every function writes into the tensor's array under no_grad, bumps its version and returns
the tensor. On the meta device there is no data: they check what they can and do nothing.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import ShapeError
from ..random import get_rng
from ..tensor import Tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ShapeError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ShapeError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    """(fan_in, fan_out): size(1) and size(0) times the receptive field (dims 2 and up)."""
    if tensor.ndim < 2:
        raise ShapeError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive = receptive * s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ShapeError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _done(tensor: Tensor) -> Tensor:
    tensor._version[0] += 1
    tensor._version[1] = "init"
    return tensor


def _fill_random(arr: np.ndarray, kind: str, generator) -> None:
    """U[0,1) or N(0,1) draws written straight into a contiguous float32/64 array."""
    rng = get_rng(generator)
    draw = rng.random if kind == "uniform" else rng.standard_normal
    draw(out=arr, dtype=arr.dtype)


def _direct(arr: np.ndarray) -> bool:
    return arr.dtype in (np.float32, np.float64) and arr.flags.c_contiguous


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from U(a, b)."""
    if tensor.data is None:
        return tensor
    arr = tensor.data
    if _direct(arr):
        _fill_random(arr, "uniform", generator)
        arr *= b - a
        arr += a
    else:
        u = get_rng(generator).random(arr.shape)
        arr[...] = a + (b - a) * u
    return _done(tensor)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from N(mean, std^2)."""
    if tensor.data is None:
        return tensor
    arr = tensor.data
    if _direct(arr):
        _fill_random(arr, "normal", generator)
        arr *= std
        arr += mean
    else:
        arr[...] = mean + std * get_rng(generator).standard_normal(arr.shape)
    return _done(tensor)


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2) draws restricted to [a, b] (redrawn until inside)."""
    if tensor.data is None:
        return tensor
    arr = tensor.data
    n = arr.size
    rng = get_rng(generator)
    lo, hi = (a - mean) / std, (b - mean) / std
    if hi <= lo:
        raise ShapeError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    p = _norm_cdf(hi) - _norm_cdf(lo)
    if p >= 0.05:  # rejection sampling: exact, and at most ~20 draws per value
        out = np.empty(n, dtype=np.float64)
        filled = 0
        while filled < n:
            need = n - filled
            z = rng.standard_normal(int(need / p * 1.1) + 16)
            z = z[(z >= lo) & (z <= hi)][:need]
            out[filled:filled + z.size] = z
            filled += z.size
    else:  # a far tail or a narrow window: inverse CDF, on the side where it is precise
        from statistics import NormalDist

        flip = lo > 0
        if flip:
            lo, hi = -hi, -lo
        u = rng.uniform(_norm_cdf(lo), _norm_cdf(hi), n)
        u = np.clip(u, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0))
        out = np.vectorize(NormalDist().inv_cdf, otypes=[np.float64])(u)
        if flip:
            out = -out
    out = np.clip(out * std + mean, a, b)
    arr[...] = out.reshape(arr.shape)
    return _done(tensor)


def constant_(tensor: Tensor, val: float) -> Tensor:
    if tensor.data is None:
        return tensor
    tensor.data.fill(val)
    return _done(tensor)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ShapeError("Only tensors with 2 dimensions are supported")
    if tensor.data is None:
        return tensor
    tensor.data[...] = np.eye(*tensor.shape)
    return _done(tensor)


def _zero_size(tensor: Tensor) -> bool:
    if any(type(s) is int and s == 0 for s in tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if tensor.data is None:
        return tensor
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if tensor.data is None:
        return tensor
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015)."""
    if _zero_size(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    if tensor.data is None:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if _zero_size(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    if tensor.data is None:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]
