"""linear: x @ weight.T + bias as one primitive, with a gemm-only backward."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeRuntimeError
from ...shape import dims_equal, format_shape, prod_dims
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import X1, Op, apply
from ..registry import public
from ._common import _LAYER_X, _create_graph, _dense

_KEEP_X_W, _KEEP_X, _KEEP_W = (_LAYER_X, X1), (_LAYER_X,), (X1,)  # what linear keeps
# the integer dtypes PyTorch's cpu addmm takes (no unsigned wider than a byte)
_INT_NAMES = frozenset({"int8", "int16", "int32", "int64", "uint8"})


class Linear(Op):
    """x @ weight.T + bias in one kernel; weight is [out_features, in_features]."""

    name = "linear"

    def __init__(self, has_bias: bool) -> None:
        self.has_bias = has_bias

    def infer(self, x, w, *b):
        xs, ws, dt = x.shape, w.shape, x.dtype
        # integers too, as PyTorch (products wrap in the dtype; no gradient flows to them)
        ok = len(ws) == 2 and len(xs) >= 1 and dt is w.dtype and (
            dt.is_floating_point or dt.name in _INT_NAMES)
        if ok:
            a, c = xs[-1], ws[1]
            ok = a == c if type(a) is int and type(c) is int else dims_equal(a, c) is True
        if not ok:
            _linear_error(x, w)
        if b:
            bs = b[0].shape
            if len(bs) != 1 or dims_equal(bs[0], ws[0]) is not True or b[0].dtype is not dt:
                raise ShapeRuntimeError(
                    f"linear: bias {format_shape(bs)} does not match out_features of weight "
                    f"{format_shape(ws)} ({ws[0]})", op="linear",
                    operands=[("x", describe(x)), ("weight", describe(w)),
                              ("bias", describe(b[0]))],
                    hint=f"bias must be 1-D of size out_features = {ws[0]}")
        return tuple(xs[:-1]) + (ws[0],), dt

    def saved(self, x, w, *b, out):
        # w's gradient needs x, x's needs w
        if w.requires_grad:
            return _KEEP_X_W if x.requires_grad else _KEEP_X
        return _KEEP_W if x.requires_grad else ()

    def forward(self, x, w, b=None):
        k = self.device.kernels
        # with a bias, MKL starts from it (beta = 1), as PyTorch's addmm
        x2 = x if x.ndim == 2 else x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
        out = k.matmul(x2, w.T) if b is None else k.matmul_bias(x2, w.T, b)
        return out if x.ndim == 2 else out.reshape(x.shape[:-1] + (w.shape[0],))

    def backward(self, g):
        saved = list(self.saved_tensors)
        x = saved.pop(0) if self.needs_grad(1) else None
        w = saved.pop(0) if self.needs_grad(0) else None
        g = _dense(g)
        if not _create_graph() and g.dtype in _DIRECT_DTYPES:
            return self._grads_from_arrays(g, x, w)
        shape = g.shape
        gx = gw = gb = None
        g2 = g if len(shape) == 2 else g.reshape(prod_dims(shape[:-1]), shape[-1])
        if w is not None:
            gx = g2 @ w
            if len(shape) != 2:
                gx = gx.reshape(tuple(shape[:-1]) + (w.shape[1],))
        if x is not None:
            x2 = x if x.ndim == 2 else x.reshape(prod_dims(x.shape[:-1]), x.shape[-1])
            gw = g2.mT @ x2
        if self.has_bias:
            gb = g2.sum(0)
            return gx, gw, gb
        return gx, gw

    def _grads_from_arrays(self, g, x, w):
        """The same three gradients straight from the arrays (no grad of grad needed):
        two gemms and a column sum, without an op dispatch for each product."""
        shape, dt, dev = tuple(g.shape), g.dtype, g.device
        k = dev.kernels
        out_f = shape[-1]
        in_f = (w if w is not None else x).shape[-1]
        ga = g._data
        # rows spelled out, not -1: NumPy cannot solve -1 when out_f or in_f is 0
        rows = None if ga is None else math.prod(shape[:-1])
        g2 = None if ga is None else ga.reshape(rows, out_f)
        gx = gw = None
        if w is not None:
            gx = Tensor._make(None if g2 is None else k.matmul(g2, w._data).reshape(
                shape[:-1] + (in_f,)), shape[:-1] + (in_f,), dt, dev)
        if x is not None:
            x2 = None if g2 is None else x._data.reshape(rows, in_f)
            gw = Tensor._make(None if g2 is None else k.matmul(g2.T, x2), (out_f, in_f),
                              dt, dev)
        if self.has_bias:
            # column sums; 16-bit floats summed in float32, rounded once
            gb = Tensor._make(None if g2 is None else k.bias_grad(g2), (out_f,), dt, dev)
            return gx, gw, gb
        return gx, gw


# bfloat16/float16: the table's matmul accumulates in float32 and rounds once, as PyTorch
_DIRECT_DTYPES = (_dt.float32, _dt.float64, _dt.bfloat16, _dt.float16)


def _linear_error(x, w):
    ops = [("x", describe(x)), ("weight", describe(w))]
    if w.ndim != 2:
        raise ShapeRuntimeError(f"linear: weight must be 2-D [out_features, in_features], got "
                                f"{format_shape(w.shape)}", op="linear", operands=ops)
    if x.ndim == 0:
        raise ShapeRuntimeError("linear: x must have at least 1 dim, got a 0-d tensor", op="linear",
                                operands=ops, hint="use x.reshape(1) for a single feature")
    if not x.dtype.is_floating_point and not (x.dtype.name in _INT_NAMES and
                                              w.dtype is x.dtype):
        raise DTypeError(
            f"linear: x has dtype {x.dtype}; linear needs floating-point input (or integer x "
            f"and weight of one dtype)", op="linear",
            operands=ops, hint="call x.float() first (token ids go through an Embedding "
            "layer, not a Linear)")
    if w.dtype is not x.dtype:
        raise DTypeError(f"linear: x is {x.dtype} but weight is {w.dtype}", op="linear",
                         operands=ops, hint=f"cast x with x.to({w.dtype}) (or the layer with "
                         f".to({x.dtype}))")
    a, c = x.shape[-1], w.shape[1]
    if dims_equal(a, c) is None:
        raise ShapeRuntimeError(f"linear: cannot tell whether x's last dim ({a}) == in_features of "
                                f"weight {format_shape(w.shape)} ({c})", op="linear", operands=ops,
                                hint="bind the symbols to sizes or use the same name for both")
    if dims_equal(a, w.shape[0]):
        hint = (f"the weight looks transposed: linear expects [out_features, in_features] = "
                f"[?, {a}], got {format_shape(w.shape)}; pass weight.T (nn.Linear stores "
                f"[out, in])")
    else:
        hint = (f"x must end in in_features={c}: check the size the previous layer "
                f"produces, or flatten x first (x.reshape(x.shape[0], -1))")
    raise ShapeRuntimeError(
        f"linear: x's last dim ({a}) != in_features of weight {format_shape(w.shape)} ({c})",
        op="linear", operands=ops, hint=hint)


@public(sf=False, functional=True)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = input @ weight.T + bias (weight [out_features, in_features])."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
    if bias is None:
        return apply(Linear(False), input, weight)
    return apply(Linear(True), input, weight, bias)
