"""In-place ops: compute out of place, write into the tensor's memory, bump its version."""

from __future__ import annotations

from ..autograd import grad_mode
from ..dtypes import can_cast
from ..errors import DTypeError, GraphError, ShapeRuntimeError
from ..shape import format_shape
from ..tensor import Tensor, describe


def _snapshot(t: Tensor) -> Tensor:
    """A copy of t's current value that keeps t's place in the graph (its grad_fn)."""
    data = None if t._data is None else t._data.copy()
    s = Tensor._make(data, t.shape, t.dtype, t.device)
    s.grad_fn, s.requires_grad = t.grad_fn, t.requires_grad
    return s


def inplace(target: Tensor, name: str, fn, *args) -> Tensor:
    """`target.<name>(*args)`: write fn(target, *args) into target; the graph follows."""
    record = (grad_mode.hot.quiet or grad_mode.state.enabled) and (
        target.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args)
    )
    if record and target.requires_grad and target.grad_fn is None:
        raise GraphError(
            f"{name}: a leaf tensor that requires grad {describe(target)} is used in an "
            "in-place operation",
            op=name,
            hint="do parameter updates under sf.no_grad(), or work on a clone()",
        )
    if record and target._base is not None and (target.requires_grad or
                                                 target._base.requires_grad):
        raise GraphError(
            f"{name}: in-place change of a view {describe(target)} inside the graph is not "
            "supported",
            op=name,
            hint="write the out-of-place op (y = x.masked_fill(...)), or clone() the view first",
        )
    source = _snapshot(target) if record and target.requires_grad else target
    result = fn(source, *args)
    if tuple(result.shape) != tuple(target.shape):
        raise ShapeRuntimeError(
            f"{name}: the result {format_shape(result.shape)} does not fit the tensor changed in "
            f"place {format_shape(target.shape)}",
            op=name, operands=[("self", describe(target))],
            hint="an in-place op cannot broadcast the tensor it changes; use the out-of-place op",
        )
    if result.dtype is not target.dtype and not can_cast(result.dtype, target.dtype):
        raise DTypeError(
            f"{name}: result type {result.dtype} cannot be cast to the tensor's {target.dtype} "
            "in place", op=name, operands=[("self", describe(target))],
            hint=f"use the out-of-place op, or convert first with .to({result.dtype})")
    # into the tensor's memory (None on meta: its namespace computes nothing)
    target.device.xp.copyto(target._data, result._data, casting="unsafe")
    if not grad_mode.hot.quiet and grad_mode.state.tracer is not None:
        grad_mode.state.tracer.inplace(target, result)
    target._version[0] += 1
    target._version[1] = name
    if record and result.grad_fn is not None:
        target.grad_fn = result.grad_fn
        target.requires_grad = True
    return target


def inplace_method(name: str, fn):
    """The Tensor method `name` (`x.erf_()`, `x.scatter_(...)`): fn's result written into x."""

    def method(self: Tensor, *args, **kwargs) -> Tensor:
        return inplace(self, name, lambda src, *a: fn(src, *a, **kwargs), *args)

    method.__name__ = name
    method.__doc__ = f"In-place {name[:-1]}: writes the result into self."
    return method


def zero_(t: Tensor) -> Tensor:
    return fill_(t, 0)


def fill_(t: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        value = value.item()
    if (grad_mode.hot.quiet or grad_mode.state.enabled) and t.requires_grad and t.grad_fn is None:
        raise GraphError(f"fill_: a leaf tensor that requires grad {describe(t)} is used in an "
                         "in-place operation", op="fill_",
                         hint="do parameter updates under sf.no_grad()")
    if t._data is not None:
        t._data.fill(value)
    t._version[0] += 1
    t._version[1] = "fill_"
    if t.grad_fn is not None:  # a constant now: no gradient flows to what it was computed from
        t.grad_fn, t.requires_grad = None, False
    return t


def copy_(t: Tensor, src: Tensor) -> Tensor:
    from .movement import expand

    def take(_, s):
        s = s if isinstance(s, Tensor) else Tensor(s)
        out = expand(s, tuple(t.shape)) if tuple(s.shape) != tuple(t.shape) else s
        return out.to(t.dtype) if out.dtype is not t.dtype else out + 0 if out is s else out

    return inplace(t, "copy_", take, src)
