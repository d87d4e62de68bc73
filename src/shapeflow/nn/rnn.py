"""RNN, LSTM and GRU: PyTorch's layers, parameter names and layouts, one fused op per layer.

Each layer and direction is one `Recurrence` op (ops/nn/recurrent.py): the time loop runs
inside it, so the graph holds one node per layer whatever L is. Parameters are named and
shaped as PyTorch's (`weight_ih_l0`, `weight_hh_l0_reverse`, `weight_hr_l1` ...), so a
PyTorch state_dict loads one to one.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentValueError, ShapeError
from ..factories import empty, zeros
from ..ops.index.dim_index import index_select
from ..ops.movement import cat, stack
from ..ops.nn.recurrent import recurrence
from ..shape import dims_equal, format_shape
from ..tensor import Tensor, describe, tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_OPS = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}


class RNNBase(Module):
    """What RNN, LSTM and GRU share: parameters per layer and direction, the layer loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ArgumentValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ArgumentValueError(f"hidden_size and num_layers must be positive, got "
                             f"hidden_size={hidden_size}, num_layers={num_layers}")
        if proj_size < 0:
            raise ArgumentValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ArgumentValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ArgumentValueError("proj_size argument is only supported for LSTM, not RNN or "
                                     "GRU")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, \
            proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        kw = {"device": device, "dtype": dtype}
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_in = input_size if layer == 0 else real_hidden * directions
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_in)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    setattr(self, stem + sfx, Parameter(empty(shape, **kw)))
                    names.append(stem + sfx)
                self._flat_weights_names += names
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: every weight and bias from U(-1/sqrt(H), 1/sqrt(H))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    @property
    def all_weights(self) -> list:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op (PyTorch compacts weights for cuDNN; the cpu op reads them in place)."""

    def _state_size(self) -> tuple[int, int]:
        return (self.proj_size if self.proj_size > 0 else self.hidden_size), self.hidden_size

    def _check_input(self, x: Tensor) -> None:
        kind = type(self).__name__
        if x.ndim not in (2, 3):
            raise ShapeError(
                f"{kind}: input must be 3-D ({'[B, L, F]' if self.batch_first else '[L, B, F]'}"
                f") or 2-D unbatched [L, F], got {format_shape(x.shape)}", op=kind,
                operands=[("input", describe(x))])
        if dims_equal(x.shape[-1], self.input_size) is not True:
            hint = None
            if x.ndim == 3 and any(dims_equal(s, self.input_size) is True for s in x.shape[:2]):
                hint = ("the features are not the last dim: the layer expects "
                        f"{'[B, L, F]' if self.batch_first else '[L, B, F]'} "
                        f"(batch_first={self.batch_first})")
            raise ShapeError(
                f"{kind}: input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {x.shape[-1]}", op=kind,
                operands=[("input", describe(x))], hint=hint)

    def _check_state(self, t: Tensor, name: str, batch, size: int, unbatched: bool) -> None:
        kind = type(self).__name__
        n = self.num_layers * (2 if self.bidirectional else 1)
        want = (n, size) if unbatched else (n, batch, size)
        rule = "[num_layers*num_directions, H]" if unbatched else \
            "[num_layers*num_directions, B, H]"
        if len(t.shape) != len(want) or not all(
                dims_equal(a, b) is True for a, b in zip(t.shape, want)):
            raise ShapeError(
                f"{kind}: Expected hidden {name} size {format_shape(want)}, got "
                f"{format_shape(t.shape)} ({name} is {rule})", op=kind,
                operands=[(name, describe(t))],
                hint=f"num_layers={self.num_layers}, bidirectional={self.bidirectional}, "
                f"batch {batch}, H={size}")

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        lstm = self.mode == "LSTM"
        p, h = self._state_size()
        n_states = self.num_layers * (2 if self.bidirectional else 1)
        if packed:
            x, batch_sizes = input.data, [int(b) for b in input.batch_sizes.tolist()]
            batch, unbatched = batch_sizes[0], False
            self._check_input(x)
            if x.ndim != 2:
                raise ShapeError(f"{type(self).__name__}: packed data must be [N, F]",
                                 op=type(self).__name__, operands=[("data", describe(x))])
        else:
            self._check_input(input)
            unbatched = input.ndim == 2
            x = input.unsqueeze(1) if unbatched else (
                input.transpose(0, 1) if self.batch_first else input)
            batch, batch_sizes = x.shape[1], None
        if hx is None:
            h0 = zeros((n_states, batch, p), dtype=x.dtype, device=x.device)
            c0 = zeros((n_states, batch, h), dtype=x.dtype, device=x.device) if lstm else None
        else:
            if lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise ShapeError("LSTM: hx must be a tuple (h0, c0)", op="LSTM")
                h0, c0 = hx
            else:
                h0, c0 = hx, None
            self._check_state(h0, "h0", batch, p, unbatched)
            if lstm:
                self._check_state(c0, "c0", batch, h, unbatched)
            if unbatched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if lstm else None
            elif packed and input.sorted_indices is not None:
                h0 = index_select(h0, 1, input.sorted_indices)
                c0 = index_select(c0, 1, input.sorted_indices) if lstm else None
        out, h_n, c_n = self._layers(x, h0, c0, batch_sizes)
        if packed:
            out = PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                 input.unsorted_indices)
            if input.unsorted_indices is not None:
                h_n = index_select(h_n, 1, input.unsorted_indices)
                c_n = index_select(c_n, 1, input.unsorted_indices) if lstm else None
        elif unbatched:
            out, h_n = out.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if lstm else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return (out, (h_n, c_n)) if lstm else (out, h_n)

    def _layers(self, x, h0, c0, batch_sizes):
        lstm, directions = self.mode == "LSTM", 2 if self.bidirectional else 1
        p, _ = self._state_size()
        last_rows = None
        if batch_sizes is not None:  # the row of each sequence's last step, in packed data
            offsets = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]])
            lengths = [sum(1 for b in batch_sizes if b > j) for j in range(batch_sizes[0])]
            last_rows = tensor([int(offsets[n - 1]) + j for j, n in enumerate(lengths)])
        hs, cs = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                k = layer * directions + d
                weights = [getattr(self, n) for n in self._all_weights[k]]
                states = recurrence(_OPS[self.mode], layer_in, h0[k], c0[k] if lstm else None,
                                    weights, reverse=d == 1, batch_sizes=batch_sizes)
                y = states.narrow(-1, 0, p) if lstm else states
                outs.append(y)
                hs.append(self._last(y, d == 1, batch_sizes, last_rows))
                if lstm:
                    cs.append(self._last(states.narrow(-1, p, self.hidden_size), d == 1,
                                         batch_sizes, last_rows))
            layer_in = outs[0] if directions == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, training=True)
        return layer_in, stack(hs, 0), (stack(cs, 0) if lstm else None)

    @staticmethod
    def _last(y, reverse: bool, batch_sizes, last_rows):
        """The state each sequence ends in: the last step, or the first when reversed."""
        if batch_sizes is None:
            return y[0] if reverse else y[y.shape[0] - 1]
        if reverse:
            return y.narrow(0, 0, batch_sizes[0])
        return index_select(y, 0, last_rows)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                                     "or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory; forward returns (output, (h_n, c_n)). Gates i, f, g, o."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit; forward returns (output, h_n). Gates r, z, n."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)
