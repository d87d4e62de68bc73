"""Parameter initialisation (as `torch.nn.init`): in place, from shapeflow.random.

Every function writes into the tensor's array under no_grad, bumps its version and returns
the tensor. On the meta device there is no data: they check what they can and do nothing.
The values are drawn on the host (shapeflow's generator) and move with `device.from_numpy`;
on cpu the draws are written straight into the tensor's array.
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


def _host(tensor: Tensor) -> np.ndarray:
    """The tensor's values as a host array: its own array on cpu, a copy elsewhere."""
    return tensor.device.to_numpy(tensor._data)


def _keep(tensor: Tensor, host: np.ndarray) -> None:
    """Write a host array from `_host` back to the tensor's device (nothing to do on cpu)."""
    if host is not tensor._data:
        tensor._data[...] = tensor.device.from_numpy(host)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from U(a, b)."""
    if tensor._data is None:
        return tensor
    arr = _host(tensor)
    if _direct(arr):
        _fill_random(arr, "uniform", generator)
        arr *= b - a
        arr += a
    else:
        u = get_rng(generator).random(arr.shape)
        arr[...] = a + (b - a) * u
    _keep(tensor, arr)
    return _done(tensor)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from N(mean, std^2)."""
    if tensor._data is None:
        return tensor
    arr = _host(tensor)
    if _direct(arr):
        _fill_random(arr, "normal", generator)
        arr *= std
        arr += mean
    else:
        arr[...] = mean + std * get_rng(generator).standard_normal(arr.shape)
    _keep(tensor, arr)
    return _done(tensor)


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2) draws restricted to [a, b] (redrawn until inside)."""
    if tensor._data is None:
        return tensor
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    arr = tensor._data
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
    arr[...] = tensor.device.from_numpy(out.reshape(arr.shape))
    return _done(tensor)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with the value val."""
    if tensor._data is None:
        return tensor
    tensor._data.fill(val)
    return _done(tensor)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ShapeError("Only tensors with 2 dimensions are supported")
    if tensor._data is None:
        return tensor
    tensor._data[...] = tensor.device.from_numpy(np.eye(*tensor.shape))
    return _done(tensor)


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D conv weight with the Dirac delta: the conv passes channels through."""
    nd = tensor.ndim
    if nd not in (3, 4, 5):
        raise ShapeError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ShapeError("dim 0 must be divisible by groups")
    if tensor._data is None:
        return tensor
    arr = tensor._data
    out_per_group = tensor.shape[0] // groups
    arr[...] = 0
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, tensor.shape[1])):
            arr[(g * out_per_group + d, d) + centre] = 1
    return _done(tensor)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """A (semi) orthogonal matrix times gain, dims after the first flattened (Saxe et al.)."""
    if tensor.ndim < 2:
        raise ShapeError("Only tensors with 2 or more dimensions are supported")
    if tensor._data is None or tensor._data.size == 0:
        return tensor
    arr = tensor._data
    rows = arr.shape[0]
    cols = arr.size // rows
    flat = get_rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))  # makes Q uniform over orthogonal matrices (Mezzadri, 2007)
    if rows < cols:
        q = q.T
    arr[...] = tensor.device.from_numpy((q * gain).reshape(arr.shape))
    return _done(tensor)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """N(0, std^2) values with ceil(sparsity * rows) zeros in each column (Martens, 2010)."""
    if tensor.ndim != 2:
        raise ShapeError("Only tensors with 2 dimensions are supported")
    if tensor._data is None:
        return tensor
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    normal_(tensor, 0.0, std, generator)
    # per column, num_zeros distinct rows: the first of a random permutation of the rows
    zero_rows = np.argsort(get_rng(generator).random((rows, cols)), axis=0)[:num_zeros]
    arr = _host(tensor)
    arr[zero_rows, np.arange(cols)] = 0
    _keep(tensor, arr)
    return tensor


def _zero_size(tensor: Tensor) -> bool:
    if any(type(s) is int and s == 0 for s in tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if tensor._data is None:
        return tensor
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if tensor._data is None:
        return tensor
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015)."""
    if _zero_size(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    if tensor._data is None:
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
    if tensor._data is None:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def _deprecated(fn):
    """PyTorch's old name without the trailing underscore: warns, then calls fn."""
    new_name = fn.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"Deprecated: use nn.init.{new_name}."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "orthogonal_", "sparse_", "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform",
    "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse",
]


def __getattr__(name: str):
    from .._porting_hooks import missing_attribute  # says so for a name PyTorch has

    raise missing_attribute("module 'shapeflow.nn.init'", "torch.nn.init", name)
