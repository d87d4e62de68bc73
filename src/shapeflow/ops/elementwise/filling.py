"""Filling: `fill` (a new tensor of x's shape and dtype holding one value), `zero_` as a
function (torch.zero_), and `scalar_tensor` (a 0-d tensor of the default float dtype)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeRuntimeError
from ...tensor import Tensor, describe
from ..inplace import zero_ as _zero_
from ..registry import public
from .casts import cast


@public()
def fill(input: Tensor, value) -> Tensor:  # noqa: A002
    """A new tensor of input's shape and dtype holding value (a number or a 0-d tensor,
    whose gradient is the sum of the output's; input gets none, as its values are gone)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeRuntimeError(f"fill: only supports a 0-dimension value tensor, got "
                                    f"{value.ndim} dimensions", op="fill",
                                    operands=[("value", describe(value))])
        v = value if value.dtype is input.dtype else cast(value, input.dtype)
        return v.expand(tuple(input.shape)).contiguous()
    from ...factories import full

    return full(tuple(input.shape), value, dtype=input.dtype, device=input.device)


@public()
def zero_(input: Tensor) -> Tensor:  # noqa: A002
    """Fill input with zeros in place and return it (torch.zero_)."""
    return _zero_(input)


@public()
def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False) -> Tensor:
    """A 0-d tensor holding s; the default float dtype unless dtype is given (as PyTorch,
    whatever s's type)."""
    from ...factories import check_layout, full

    check_layout(layout, "scalar_tensor")
    if isinstance(s, Tensor):
        s = s.item()
    dt = _dt.get_default_dtype() if dtype is None else dtype
    return full((), s, dtype=dt, device=device, requires_grad=requires_grad)
