"""Helpers shared by the elementwise families: casts, operands from numbers, refusals."""

from __future__ import annotations

from ... import dtypes as _dt
from ...dtypes import DType, result_type
from ...errors import DTypeError
from ...tensor import Tensor

_f32 = _dt.float32


def _cast(arr, dtype: DType):
    return arr if arr.dtype is dtype.np or arr.dtype == dtype.np else arr.astype(dtype.np)


_NUMBER = (int, float, bool, complex)


def _scalar_tensor(c, like: Tensor) -> Tensor:
    """A Python number as a 0-d tensor on `like`'s device (for ops with no scalar form)."""
    dt = result_type(c)
    return Tensor._make(like.device.asarray(c, dt.np), (), dt, like.device)


def _is_host_scalar(x) -> bool:
    """A NumPy scalar (np.float32(2.0)): a 0-d value with .item() and, unlike an array, no
    length."""
    return getattr(x, "shape", None) == () and hasattr(x, "item") and not hasattr(x, "__len__")


def _as_operand(x, other: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _NUMBER):
        return _scalar_tensor(x, other)
    if _is_host_scalar(x):
        return _scalar_tensor(x.item(), other)
    if hasattr(x, "__array_namespace__"):  # a host NumPy array: the factory's, shared
        from ...tensor import from_numpy

        return from_numpy(x)
    raise DTypeError(f"expected a tensor or a number, got {type(x).__name__}")



def refuse_dtype(op: str, x: Tensor, runtime: bool = False) -> None:
    """PyTorch has no kernel of `op` for x's dtype: NotImplementedError (or RuntimeError)."""
    from ...errors import DTypeNotImplementedError, DTypeRuntimeError
    from ...tensor import describe

    cls = DTypeRuntimeError if runtime else DTypeNotImplementedError
    raise cls(f"{op}: not implemented for {x.dtype} (as in PyTorch)", op=op,
              operands=[("input", describe(x))], hint="cast with .to() first")
