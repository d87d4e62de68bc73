"""Attach op functions to Tensor as methods and operators (`t.exp()`, `t + u`, `t @ w`).

Also the Tensor methods that need factories or the engine (`t.to()`, `t.new_zeros()`,
`t.backward()`): tensor.py sits below all three and cannot import them.
"""

from __future__ import annotations

from . import dlpack, factories, tensor_compat, torch_interop
from . import dtypes as _dt
from .autograd import engine
from .device import get_device, is_device_name
from .dtypes import DType
from .errors import ShapeflowError
from .ops import activation, linalg, movement, registry
from .ops import elementwise as E
from .ops import inplace as I
from .ops.base import apply
from .tensor import Tensor


def _attach_methods() -> None:
    """t.<op>(): every op function declared @public(method=...) (ops/registry.py)."""
    for name, fn in registry.namespace("method").items():
        setattr(Tensor, name, fn)


def _swap(fn):
    def swapped(self, other):
        try:
            return fn(other, self)
        except ShapeflowError:
            if torch_interop.is_torch_tensor(other):  # `torch_t - sf_t`, after torch declined
                raise torch_interop.mixing_error(other, fn.__name__) from None
            raise

    return swapped


def _operator(op_class, general):
    """`t + u` and kin: two tensors go straight to apply, anything else through `general`
    (a torch tensor there raises the mixing error, at no cost to the other paths)."""

    def operator(a, b):
        if isinstance(b, Tensor):
            return apply(op_class(), a, b)
        try:
            return general(a, b)
        except ShapeflowError:
            if torch_interop.is_torch_tensor(b):
                raise torch_interop.mixing_error(b, general.__name__) from None
            raise

    operator.__name__ = general.__name__
    return operator


def _inplace_method(name: str, fn):
    def method(self, *args, **kwargs):
        return I.inplace(self, name, lambda src, *a: fn(src, *a, **kwargs), *args)

    method.__name__ = name
    return method


def _matrix_transpose(t: Tensor, name: str, batched: bool) -> Tensor:
    """t.mT / t.H / t.mH: the last two dims swapped; 0-d as is (as PyTorch's H and mH)."""
    from .errors import ShapeRuntimeError

    if t.ndim == 0 and name != "mT":
        return E.conj(t)
    if t.ndim < 2 or (not batched and t.ndim != 2):
        what = "matrices or batches of matrices" if batched else "matrices (2-D tensors)"
        raise ShapeRuntimeError(f"tensor.{name} is only supported on {what}. Got {t.ndim}-D "
                                "tensor.", op=name, hint="for batches of matrices use .mH"
                                if name == "H" else None)
    out = movement.transpose(t, -2, -1)
    return E.conj(out) if name != "mT" else out  # H, mH: the conjugate transposes


def _attach_operators() -> None:
    T = Tensor
    T.__add__ = T.__radd__ = _operator(E.Add, E.add)
    T.__sub__, T.__rsub__ = _operator(E.Sub, E.sub), _swap(E.sub)
    T.__mul__ = T.__rmul__ = _operator(E.Mul, E.mul)
    T.__truediv__, T.__rtruediv__ = _operator(E.Div, E.div), _swap(E.div)
    T.__rdiv__ = T.__rtruediv__  # PyTorch keeps Python 2's name
    T.__floordiv__, T.__rfloordiv__ = E.floor_divide, _swap(E.floor_divide)
    T.__mod__, T.__rmod__ = E.remainder, _swap(E.remainder)
    T.__pow__, T.__rpow__ = E.pow, _swap(E.pow)
    T.__matmul__, T.__rmatmul__ = linalg.matmul, _swap(linalg.matmul)
    T.__neg__ = E.neg
    T.__abs__ = E.abs
    T.__pos__ = lambda self: self
    T.__eq__, T.__ne__ = E.eq, E.ne
    T.__lt__, T.__le__, T.__gt__, T.__ge__ = E.lt, E.le, E.gt, E.ge
    # bitwise on integers, logical on bools, an error on floats (as PyTorch)
    T.__and__ = T.__rand__ = E.bitwise_and
    T.__or__ = T.__ror__ = E.bitwise_or
    T.__xor__ = T.__rxor__ = E.bitwise_xor
    T.__lshift__, T.__rlshift__ = E.bitwise_left_shift, _swap(E.bitwise_left_shift)
    T.__rshift__, T.__rrshift__ = E.bitwise_right_shift, _swap(E.bitwise_right_shift)
    T.__invert__ = E.invert
    T.__hash__ = lambda self: id(self)
    T.T = property(lambda self: movement.permute(self, tuple(range(self.ndim))[::-1]))
    T.mT = property(lambda self: _matrix_transpose(self, "mT", True))
    # a complex tensor's parts: views of its floats, assignable (a real tensor's real is itself)
    T.real = property(E.real, lambda self, value: E.real(self).copy_(value))
    T.imag = property(E.imag, lambda self, value: E.imag(self).copy_(value))
    T.H = property(lambda self: _matrix_transpose(self, "H", False))
    T.mH = property(lambda self: _matrix_transpose(self, "mH", True))
    T.zero_, T.fill_, T.copy_ = I.zero_, I.fill_, I.copy_
    for name, fn in [("add_", E.add), ("sub_", E.sub), ("mul_", E.mul), ("div_", E.div),
                     ("pow_", E.pow), ("clamp_", E.clamp), ("exp_", E.exp), ("neg_", E.neg),
                     ("sqrt_", E.sqrt), ("relu_", activation.relu), ("tanh_", E.tanh),
                     ("sigmoid_", activation.sigmoid), ("abs_", E.abs), ("floor_divide_",
                                                                E.floor_divide),
                     ("remainder_", E.remainder)]:
        setattr(T, name, _inplace_method(name, fn))
    for name, fn in [("__iadd__", E.add), ("__isub__", E.sub), ("__imul__", E.mul),
                     ("__itruediv__", E.div), ("__ipow__", E.pow),
                     ("__ifloordiv__", E.floor_divide), ("__imod__", E.remainder),
                     ("__iand__", E.bitwise_and), ("__ior__", E.bitwise_or),
                     ("__ixor__", E.bitwise_xor), ("__ilshift__", E.bitwise_left_shift),
                     ("__irshift__", E.bitwise_right_shift)]:
        setattr(T, name, _inplace_method(name, fn))


def to(self, *args, dtype=None, device=None, non_blocking: bool = False, copy: bool = False,
       memory_format=None) -> Tensor:
    """A tensor with another dtype and/or device (`t.to('meta')`, `t.to(sf.float16)`).

    As PyTorch's: `copy=True` always copies; `non_blocking` changes nothing (every copy
    here is synchronous); `memory_format=sf.channels_last` is accepted and keeps the layout
    (shapeflow's arrays are row-major; values are the same), `sf.contiguous_format` makes
    the copy it takes contiguous.
    """
    flags = []  # PyTorch's positional non_blocking and copy: t.to(sf.float64, False, True)
    for a in args:
        if isinstance(a, bool):
            flags.append(a)
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, DType):
            dtype = a
        elif isinstance(a, str):
            if is_device_name(a):
                device = a
            else:
                dtype = a
        else:
            dtype = a
    if len(flags) > 1:
        copy = copy or flags[1]
    out = self
    if dtype is not None:
        dtype = _dt.get_dtype(dtype)
        if dtype is not self.dtype:
            out = E.cast(out, dtype)
    if device is not None:
        device = get_device(device)
        if device is not out.device:
            out = E.to_device(out, device)
    if copy and out is self:
        out = self.clone()
    return tensor_compat.with_memory_format(out, memory_format, "to", out is not self)


def backward(self, gradient=None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(self)/d(leaf) into each leaf's .grad (chain rule over the graph)."""
    engine.backward([self], None if gradient is None else [gradient], retain_graph,
                    create_graph, inputs)


def _or(value, default):
    """value unless it is None."""
    return default if value is None else value


def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros of the given size; dtype and device default to self's."""
    return factories.zeros(*size, dtype=_or(dtype, self.dtype), device=_or(device, self.device),
                           requires_grad=requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones of the given size; dtype and device default to self's."""
    return factories.ones(*size, dtype=_or(dtype, self.dtype), device=_or(device, self.device),
                          requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """fill_value in the given size; dtype and device default to self's."""
    return factories.full(size, fill_value, dtype=_or(dtype, self.dtype),
                          device=_or(device, self.device), requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uninitialised values of the given size; dtype and device default to self's."""
    return factories.empty(*size, dtype=_or(dtype, self.dtype), device=_or(device, self.device),
                           requires_grad=requires_grad)


def new_empty_strided(self, size, stride, *, dtype=None, device=None,
                      requires_grad: bool = False) -> Tensor:
    """Uninitialised values of `size` (row-major: stride sets no layout); dtype and device
    default to self's."""
    from .ops.movement import empty_strided

    return empty_strided(size, stride, dtype=_or(dtype, self.dtype),
                         device=_or(device, self.device), requires_grad=requires_grad)


def _attach_tensor_methods() -> None:
    for fn in (to, backward, new_zeros, new_ones, new_full, new_empty, new_empty_strided):
        setattr(Tensor, fn.__name__, fn)


def _attach_special_methods() -> None:
    """torch.special's functions that torch.Tensor also has as methods, under their names."""
    from . import special

    Tensor.i0 = special.i0
    Tensor.igamma, Tensor.igammac = special.gammainc, special.gammaincc
    Tensor.polygamma = lambda self, n: special.polygamma(n, self)
    Tensor.mvlgamma = lambda self, p: special.multigammaln(self, p)


_attach_methods()
_attach_operators()
_attach_tensor_methods()
_attach_special_methods()
tensor_compat.attach()
dlpack.attach()
