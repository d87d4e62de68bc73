"""Zero-copy exchange with NumPy, PyTorch and any DLPack library.

`t.__dlpack__()` / `t.__dlpack_device__()` export a cpu tensor's NumPy buffer (so
`torch.from_dlpack(t)` and `np.from_dlpack(t)` share its memory), and `sf.from_dlpack(x)`
wraps any object with `__dlpack__` (a torch tensor, a NumPy array) without a copy.
"""

from __future__ import annotations

import numpy as np

from .device import meta
from .errors import DeviceError, DTypeError, GraphError
from .tensor import Tensor, describe, from_numpy

_KDLCPU = 1  # DLPack's device type for host memory


def _exportable(t: Tensor, what: str) -> np.ndarray:
    if t.device is meta:
        raise DeviceError(f"{what}: a meta tensor {describe(t)} has no memory to share",
                          op=what, hint="move it to cpu with .to('cpu') first")
    if t.requires_grad:
        raise GraphError(f"{what}: can't export a tensor that requires grad {describe(t)}",
                         op=what, hint="use tensor.detach() first")
    return t._data


def __dlpack__(self: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this cpu tensor's memory (shared unless copy=True)."""
    arr = _exportable(self, "__dlpack__")
    kwargs = {"copy": copy}
    if max_version is not None:
        kwargs["max_version"] = max_version
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    return arr.__dlpack__(stream=stream, **kwargs)


def __dlpack_device__(self: Tensor) -> tuple[int, int]:
    """(kDLCPU, 0): shapeflow's data lives in host memory."""
    if self.device is meta:
        raise DeviceError(f"__dlpack_device__: a meta tensor {describe(self)} has no memory",
                          op="__dlpack_device__", hint="move it to cpu with .to('cpu') first")
    return (_KDLCPU, 0)


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing the memory of `ext_tensor` (anything with `__dlpack__`)."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if not hasattr(ext_tensor, "__dlpack__"):
        raise DTypeError(f"from_dlpack: expected an object with __dlpack__ (a torch tensor, a "
                         f"NumPy array), got {type(ext_tensor).__name__}", op="from_dlpack",
                         hint="a bare DLPack capsule is not accepted: pass the tensor itself")
    try:
        arr = np.from_dlpack(ext_tensor)
    except (BufferError, TypeError, RuntimeError) as e:
        raise DTypeError(f"from_dlpack: cannot share the memory of {type(ext_tensor).__name__}:"
                         f" {e}", op="from_dlpack",
                         hint="only cpu memory and NumPy's dtypes can be shared") from None
    return from_numpy(arr)


def attach() -> None:
    Tensor.__dlpack__ = __dlpack__
    Tensor.__dlpack_device__ = __dlpack_device__


__all__ = ["from_dlpack"]
