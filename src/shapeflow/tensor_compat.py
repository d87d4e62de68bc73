"""PyTorch idioms on Tensor that are not ops: `f"{loss:.4f}"`, `t.type()`, `t.view_as(u)`,
`t.is_cuda` and the other `is_*` flags, `t.cuda()`, memory formats. Attached to Tensor in
`_methods.py`."""

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
        return Tensor._make(self._data, (), self.dtype, self.device).item().__format__(format_spec)
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
    if self._data is None:  # a device that does not compute (meta): no array to ask
        from .ops import meta_layout

        return meta_layout.is_contiguous(self)
    return bool(self._data.flags.c_contiguous)


class memory_format:  # noqa: N801  (PyTorch's name: torch.memory_format)
    """A memory layout (`sf.contiguous_format`, `sf.channels_last`...), as PyTorch's."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"shapeflow.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickles as the module-level instance


preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
_CHANNELS_LAST_RANK = {channels_last: 4, channels_last_3d: 5}


def with_memory_format(t: Tensor, fmt, op: str, copied: bool) -> Tensor:
    """`t` laid out as `fmt` asks, where `copied` (as PyTorch's to(), which lays out only
    the copies it makes). Channels-last is accepted as a no-op on layout: shapeflow's data
    are row-major NumPy arrays (its convolutions pick NHWC inside), and values match."""
    from .errors import ShapeRuntimeError

    if fmt is None or fmt is preserve_format:
        return t
    if fmt is contiguous_format:
        return t.contiguous() if copied and not t.is_contiguous() else t
    if fmt in _CHANNELS_LAST_RANK:
        if t.ndim != _CHANNELS_LAST_RANK[fmt]:
            raise ShapeRuntimeError(f"{op}: required rank {_CHANNELS_LAST_RANK[fmt]} tensor to "
                                    f"use {fmt.name} format, got rank {t.ndim}", op=op)
        return t
    raise DTypeError(f"{op}: memory_format must be a memory format (sf.preserve_format, "
                     f"sf.contiguous_format, sf.channels_last), got {fmt!r}", op=op)


def _false(self: Tensor) -> bool:
    return False


# PyTorch's device and layout flags for devices and layouts shapeflow has none of
_FALSE_FLAGS = ("is_ipu", "is_maia", "is_mkldnn", "is_mps", "is_mtia", "is_nested",
                "is_quantized", "is_sparse", "is_sparse_csr", "is_vulkan", "is_xla", "is_xpu")


def is_cpu(self: Tensor) -> bool:
    """Whether the tensor is on the cpu device (not meta)."""
    return self.device is cpu


def is_complex(self: Tensor) -> bool:
    """Whether the dtype is complex (complex64 or complex128)."""
    return self.dtype.is_complex


def is_signed(self: Tensor) -> bool:
    """Whether the dtype holds negative values (floats and signed integers), as PyTorch's."""
    return self.dtype.is_signed


def is_nonzero(self: Tensor) -> bool:
    """The truth of a one-element tensor, as `bool(t)` (more or fewer elements raise)."""
    from .errors import ShapeRuntimeError

    if self.numel() != 1:
        raise ShapeRuntimeError(f"is_nonzero: Boolean value of Tensor with "
                                f"{'no values' if self.numel() == 0 else 'more than one value'}"
                                " is ambiguous", op="is_nonzero")
    return bool(self.item())


def is_same_size(self: Tensor, other: Tensor) -> bool:
    """Whether both tensors have the same shape."""
    return tuple(self.shape) == tuple(other.shape)


def is_set_to(self: Tensor, other: Tensor) -> bool:
    """Whether both tensors view the same memory with the same shape and strides."""
    a, b = self._data, other._data
    if a is None or b is None:
        return self is other
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)


def _no(what: str):
    def method(self: Tensor, *args, **kwargs) -> bool:
        return False

    method.__doc__ = f"False: {what}."
    return method


def apply_(self: Tensor, callable) -> Tensor:  # noqa: A002  (PyTorch's name)
    """Replace each element by callable(element), in place (on the host; slow, no gradient)."""
    import numpy as np

    from .errors import DeviceError, GraphError

    if self._data is None:  # a device that does not compute (meta): no array to ask
        raise DeviceError("apply_: a meta tensor has no elements to apply a function to",
                          op="apply_")
    if self.requires_grad:
        raise GraphError("apply_: a tensor that requires grad cannot be changed by a Python "
                         "function (no gradient can follow it)", op="apply_",
                         hint="use tensor ops, or apply_ to a detached copy")
    if self._data.size:  # on the host: a Python function per element
        host = self.device.to_numpy(self._data)
        out = np.vectorize(callable, otypes=[host.dtype])(host)
        self._data[...] = self.device.from_numpy(out)
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
    Tensor.is_cpu = property(is_cpu)
    for name in _FALSE_FLAGS:
        setattr(Tensor, name, property(_false, doc="False: shapeflow has no such device or "
                                       "layout (cpu and meta, dense row-major arrays)."))
    Tensor.is_complex, Tensor.is_signed = is_complex, is_signed
    Tensor.is_nonzero, Tensor.is_same_size, Tensor.is_set_to = is_nonzero, is_same_size, is_set_to
    Tensor.is_conj = _no("shapeflow conjugates into new memory, never lazily")
    Tensor.is_neg = _no("shapeflow never negates lazily")
    Tensor.is_distributed = _no("as PyTorch's")
    Tensor.is_pinned = _no("shapeflow has no pinned memory (no accelerator)")
    Tensor.is_shared = _no("shapeflow runs in one process and shares no tensor memory")
    Tensor.is_inference = _no("shapeflow's inference_mode is no_grad: it makes ordinary tensors")
