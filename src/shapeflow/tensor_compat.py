"""PyTorch idioms on Tensor that are not ops: `f"{loss:.4f}"`, `t.type()`, `t.view_as(u)`,
`t.is_cuda`, `t.cuda()`. Attached to Tensor in `_methods.py`."""

from __future__ import annotations

from . import dtypes as _dt
from .device import cpu
from .errors import DTypeError
from .tensor import Tensor

# PyTorch's legacy type names, by dtype (what `torch.ones(2).type()` returns on cpu)
_TYPE_NAMES = {
    _dt.float32: "FloatTensor", _dt.float64: "DoubleTensor", _dt.float16: "HalfTensor",
    _dt.bfloat16: "BFloat16Tensor", _dt.int64: "LongTensor", _dt.int32: "IntTensor",
    _dt.int16: "ShortTensor", _dt.int8: "CharTensor", _dt.uint8: "ByteTensor",
    _dt.bool_: "BoolTensor",
}
_BY_TYPE_NAME = {name: dt for dt, name in _TYPE_NAMES.items()}


def tensor_format(self: Tensor, format_spec: str) -> str:
    """As torch.Tensor.__format__: a 0-d tensor with data formats as its Python number."""
    if self.ndim == 0 and self.device.computes and type(self) is Tensor:
        # the value without item()'s graph-break note: printing a loss breaks nothing
        return Tensor._make(self.data, (), self.dtype, self.device).item().__format__(format_spec)
    return object.__format__(self, format_spec)


def tensor_type(self: Tensor, dtype=None, non_blocking: bool = False, **kwargs):
    """`t.type()`: PyTorch's type string ('torch.FloatTensor'); `t.type(dtype)`: `t.to(dtype)`.

    The strings are PyTorch's (code compares them with 'torch.FloatTensor'); a meta tensor's
    read 'torch.meta.FloatTensor', as PyTorch's do.
    """
    if dtype is None:
        prefix = "torch." if self.device is cpu else f"torch.{self.device}."
        return prefix + _TYPE_NAMES[self.dtype]
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        if name.startswith("cuda."):
            return self.to("cuda")  # raises: no cuda device
        if name not in _BY_TYPE_NAME:
            raise DTypeError(f"type: invalid type {dtype!r}",
                             op="type", hint="use a dtype (sf.float64) or a name such as "
                             "'torch.DoubleTensor'")
        dtype = _BY_TYPE_NAME[name]
    return self.to(dtype)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    """`self.view(other.size())`."""
    return self.view(other.shape)


def is_cuda(self: Tensor) -> bool:
    """False: a shapeflow tensor is on cpu or meta."""
    return False


def cuda(self: Tensor, device=None, non_blocking: bool = False) -> Tensor:
    """`t.to('cuda')`: raises a DeviceError, as there is no cuda device (see sf.cuda)."""
    return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int)
                   else device)


def is_contiguous(self: Tensor, memory_format=None) -> bool:
    """Whether the elements lie in row-major order with no gaps (views may not)."""
    if self.data is None:  # a device that does not compute (meta): no array to ask
        from .ops import meta_layout

        return meta_layout.is_contiguous(self)
    return bool(self.data.flags.c_contiguous)


def apply_(self: Tensor, callable) -> Tensor:  # noqa: A002  (PyTorch's name)
    """Replace each element by callable(element), in place (cpu only; slow, no gradient)."""
    import numpy as np

    from .errors import DeviceError, GraphError

    if self.data is None:  # a device that does not compute (meta): no array to ask
        raise DeviceError("apply_: a meta tensor has no elements to apply a function to",
                          op="apply_")
    if self.requires_grad:
        raise GraphError("apply_: a tensor that requires grad cannot be changed by a Python "
                         "function (no gradient can follow it)", op="apply_",
                         hint="use tensor ops, or apply_ to a detached copy")
    if self.data.size:
        out = np.vectorize(callable, otypes=[self.data.dtype])(self.data)
        np.copyto(self.data, out, casting="unsafe")
    self._version[0] += 1
    self._version[1] = "apply_"
    return self


def attach() -> None:
    Tensor.__format__ = tensor_format
    Tensor.type = tensor_type
    Tensor.view_as = view_as
    Tensor.is_cuda = property(is_cuda)
    Tensor.cuda = cuda
    Tensor.is_contiguous = is_contiguous
    Tensor.apply_ = apply_
