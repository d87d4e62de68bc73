"""RNNCell, LSTMCell, GRUCell: one time step, the recurrent op over a sequence of length 1."""

from __future__ import annotations

import math

from ..errors import ArgumentValueError, ShapeError
from ..factories import empty, zeros
from ..ops.movement.slicing import Index
from ..ops.movement.views import _view_apply
from ..ops.nn.lstm_cell import lstm_cell
from ..ops.nn.recurrent import recurrence
from ..shape import dims_equal, format_shape, shapes_equal
from ..tensor import Tensor, describe
from . import init
from .module import Module
from .parameter import Parameter


class RNNCellBase(Module):
    """weight_ih [G*H, F], weight_hh [G*H, H], bias_ih and bias_hh [G*H], as PyTorch's."""

    _gates = 1
    _mode = "rnn_tanh"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        g, kw = self._gates * hidden_size, {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(empty((g, input_size), **kw))
        self.weight_hh = Parameter(empty((g, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(empty((g,), **kw))
            self.bias_hh = Parameter(empty((g,), **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: U(-1/sqrt(H), 1/sqrt(H)) for every parameter."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _weights(self) -> list:
        w = [self.weight_ih, self.weight_hh]
        return w + [self.bias_ih, self.bias_hh] if self.bias else w

    def _prepare(self, input: Tensor, states: list) -> tuple:
        """(input [B, F], states [B, H] each, batched?) after checking the shapes."""
        kind = type(self).__name__
        if input.ndim not in (1, 2):
            raise ShapeError(f"{kind}: Expected input to be 1D or 2D, got {input.ndim}D "
                             "instead", op=kind, operands=[("input", describe(input))])
        if dims_equal(input.shape[-1], self.input_size) is not True:
            raise ShapeError(f"{kind}: input has inconsistent input_size: got "
                             f"{input.shape[-1]} expected {self.input_size}", op=kind,
                             operands=[("input", describe(input))])
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        batch = x.shape[0]
        out = []
        for name, s in states:
            if s is None:
                s = zeros((batch, self.hidden_size), dtype=x.dtype, device=x.device)
            else:
                want = (batch, self.hidden_size) if batched else (self.hidden_size,)
                if len(s.shape) != len(want) or not all(
                        dims_equal(a, b) is True for a, b in zip(s.shape, want)):
                    raise ShapeError(
                        f"{kind}: {name} must be {format_shape(want)} "
                        f"({'[B, hidden_size]' if batched else '[hidden_size]'}), got "
                        f"{format_shape(s.shape)}", op=kind, operands=[(name, describe(s))])
                s = s if batched else s.unsqueeze(0)
            out.append(s)
        return x, out, batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._prepare(input, [("hx", hx)])
        mode = "rnn_tanh" if self.nonlinearity == "tanh" else "rnn_relu"
        out = recurrence(mode, x.unsqueeze(0), h, None, self._weights())[0]
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c'). Gates i, f, g, o as PyTorch's.

    One fused op per step (ops/nn/lstm_cell.py): a cell stepped from Python pays per op."""

    _gates = 4

    def forward(self, input: Tensor, hx=None):
        h, c = (None, None) if hx is None else hx
        kind = "LSTMCell"
        if input.ndim not in (1, 2):
            raise ShapeError(f"{kind}: Expected input to be 1D or 2D, got {input.ndim}D "
                             "instead", op=kind, operands=[("input", describe(input))])
        xs, hs = input.shape, self.hidden_size
        if dims_equal(xs[-1], self.input_size) is not True:
            raise ShapeError(f"{kind}: input has inconsistent input_size: got "
                             f"{xs[-1]} expected {self.input_size}", op=kind,
                             operands=[("input", describe(input))])
        want = (xs[0], hs) if len(xs) == 2 else (hs,)
        h, c = _state(kind, "h0", h, want, input), _state(kind, "c0", c, want, input)
        if self.bias:
            out = lstm_cell(input, h, c, self.weight_ih, self.weight_hh, self.bias_ih,
                            self.bias_hh)
        else:
            out = lstm_cell(input, h, c, self.weight_ih, self.weight_hh)
        return _view_apply(Index((0,)), out), _view_apply(Index((1,)), out)


def _state(kind: str, name: str, s: Tensor | None, want: tuple, x: Tensor) -> Tensor:
    """A cell's state: zeros of `want` for None, else s after checking its shape."""
    if s is None:
        return zeros(want, dtype=x.dtype, device=x.device)
    shape = s.shape
    if not shapes_equal(shape, want) and (len(shape) != len(want) or not all(
            dims_equal(a, b) is True for a, b in zip(shape, want))):
        raise ShapeError(
            f"{kind}: {name} must be {format_shape(want)} "
            f"({'[B, hidden_size]' if len(want) == 2 else '[hidden_size]'}), got "
            f"{format_shape(shape)}", op=kind, operands=[(name, describe(s))])
    return s


class GRUCell(RNNCellBase):
    """One GRU step: h' = (1 - z) * n + z * h. Gates r, z, n as PyTorch's."""

    _gates = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), batched = self._prepare(input, [("hx", hx)])
        out = recurrence("gru", x.unsqueeze(0), h, None, self._weights())[0]
        return out if batched else out.squeeze(0)
