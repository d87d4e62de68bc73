"""Attach op functions to Tensor as methods and operators (`t.exp()`, `t + u`, `t @ w`)."""

from __future__ import annotations

from . import _porting, tensor_compat
from .errors import ShapeflowError
from .ops import elementwise as E
from .ops import indexing, linalg, movement, reduce
from .ops import inplace as I
from .ops import nn as nn_ops
from .ops.base import apply
from .tensor import Tensor

_MODULES = (E, reduce, movement, linalg, nn_ops, indexing)


def _attach_methods() -> None:
    for module in _MODULES:
        for name in getattr(module, "METHODS", ()):
            setattr(Tensor, name, getattr(module, name))


def _swap(fn):
    def swapped(self, other):
        try:
            return fn(other, self)
        except ShapeflowError:
            if _porting.is_torch_tensor(other):  # `torch_t - sf_t`, after torch declined
                raise _porting.mixing_error(other, fn.__name__) from None
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
            if _porting.is_torch_tensor(b):
                raise _porting.mixing_error(b, general.__name__) from None
            raise

    operator.__name__ = general.__name__
    return operator


def _inplace_method(name: str, fn):
    def method(self, *args, **kwargs):
        return I.inplace(self, name, lambda src, *a: fn(src, *a, **kwargs), *args)

    method.__name__ = name
    return method


def _attach_operators() -> None:
    T = Tensor
    T.__add__ = T.__radd__ = _operator(E.Add, E.add)
    T.__sub__, T.__rsub__ = _operator(E.Sub, E.sub), _swap(E.sub)
    T.__mul__ = T.__rmul__ = _operator(E.Mul, E.mul)
    T.__truediv__, T.__rtruediv__ = _operator(E.Div, E.div), _swap(E.div)
    T.__floordiv__, T.__rfloordiv__ = E.floor_divide, _swap(E.floor_divide)
    T.__mod__, T.__rmod__ = E.remainder, _swap(E.remainder)
    T.__pow__, T.__rpow__ = E.pow, _swap(E.pow)
    T.__matmul__, T.__rmatmul__ = linalg.matmul, _swap(linalg.matmul)
    T.__neg__ = E.neg
    T.__abs__ = E.abs
    T.__pos__ = lambda self: self
    T.__eq__, T.__ne__ = E.eq, E.ne
    T.__lt__, T.__le__, T.__gt__, T.__ge__ = E.lt, E.le, E.gt, E.ge
    T.__and__ = T.__rand__ = E.logical_and
    T.__or__ = T.__ror__ = E.logical_or
    T.__xor__ = T.__rxor__ = E.logical_xor
    T.__invert__ = E.logical_not
    T.__hash__ = lambda self: id(self)
    T.T = property(lambda self: movement.permute(self, tuple(range(self.ndim))[::-1]))
    T.mT = property(lambda self: movement.transpose(self, -2, -1))
    T.zero_, T.fill_, T.copy_ = I.zero_, I.fill_, I.copy_
    for name, fn in [("add_", E.add), ("sub_", E.sub), ("mul_", E.mul), ("div_", E.div),
                     ("pow_", E.pow), ("clamp_", E.clamp), ("exp_", E.exp), ("neg_", E.neg),
                     ("sqrt_", E.sqrt), ("relu_", E.relu), ("tanh_", E.tanh),
                     ("sigmoid_", E.sigmoid), ("abs_", E.abs), ("floor_divide_",
                                                                E.floor_divide),
                     ("remainder_", E.remainder)]:
        setattr(T, name, _inplace_method(name, fn))
    for name, fn in [("__iadd__", E.add), ("__isub__", E.sub), ("__imul__", E.mul),
                     ("__itruediv__", E.div), ("__ipow__", E.pow),
                     ("__ifloordiv__", E.floor_divide), ("__imod__", E.remainder)]:
        setattr(T, name, _inplace_method(name, fn))


def _attach_porting_aids() -> None:
    tensor_compat.attach()
    Tensor.__torch_function__ = classmethod(_porting.torch_function)
    Tensor.__dir__ = _porting.tensor_dir
    _porting.install_tensor_names(Tensor)  # last: only names nothing else gave Tensor


_attach_methods()
_attach_operators()
_attach_porting_aids()
