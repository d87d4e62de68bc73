"""The recurrent primitive: one RNN / LSTM / GRU layer in one direction over a whole sequence.

One op per layer and direction, its time loop inside (as cuDNN runs a layer): the graph gets
one node for L steps, so backward through time never recurses in Python and a 2,000-step
sequence costs one node. Its `saved` set is the per-step memory of training: the activated
gates of every step ([L, B, 4H] for an LSTM, the "recurrent gates" of a memory report) and
the h (and c) of every step (the op's output), which is why an RNN's training memory grows
linearly with L. nn.RNNCell and nn.GRUCell are this op over one step (nn.LSTMCell: lstm_cell.py).

Inputs: x [L, B, F] (or packed rows [N, F] with `batch_sizes`), h0 [B, P], c0 [B, H] (LSTM),
weight_ih, weight_hh, bias_ih and bias_hh (when bias), weight_hr (LSTM with proj_size).
Output: the states of every step, [L, B, W] (or [N, W]): W = P + H for an LSTM (h, then c),
H otherwise. The modules take views of it (output, h_n, c_n).
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, GraphError, ShapeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from ..base import LAYER_INPUT, Op, Saved, apply
from . import recurrent_cells as steps_c
from . import recurrent_steps as steps_np
from ._common import _create_graph, _dense, _recording

RECURRENT_GATES = "recurrent gates"  # a memory-report kind: per-step gate activations

_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
_STATE_IN = Saved.input(1, LAYER_INPUT)  # h0: the first step's h_{t-1}
_STATES_OUT = Saved.output(LAYER_INPUT)  # every step's h (and c): inputs of W_hh's product


class Recurrence(Op):
    """mode in lstm, gru, rnn_tanh, rnn_relu; the loop runs backwards in time if reverse."""

    def __init__(self, mode: str, reverse: bool = False, batch_sizes=None,
                 has_bias: bool = True, has_proj: bool = False) -> None:
        self.name, self.reverse, self.batch_sizes = mode, reverse, batch_sizes
        self.has_bias, self.has_proj = has_bias, has_proj

    def _unpack(self, inputs) -> dict:
        it = iter(inputs)
        d = {"x": next(it), "h0": next(it)}
        if self.name == "lstm":
            d["c0"] = next(it)
        d["w_ih"], d["w_hh"] = next(it), next(it)
        if self.has_bias:
            d["b_ih"], d["b_hh"] = next(it), next(it)
        if self.has_proj:
            d["w_hr"] = next(it)
        return d

    def infer(self, *inputs):
        d = self._unpack(inputs)
        x, w_hh = d["x"], d["w_hh"]
        op, gates = self.name, _GATES[self.name]
        ops = [(k, describe(t)) for k, t in d.items()]
        for k, t in d.items():
            if t.dtype is not x.dtype or x.dtype not in (_dt.float32, _dt.float64):
                raise DTypeError(f"{op}: {k} is {t.dtype} and x is {x.dtype}; the recurrent op "
                                 "needs float32 or float64 throughout", op=op, operands=ops,
                                 hint="cast the input (x.float()) or the module (.double())")
        h = w_hh.shape[0] // gates
        p = d["w_hr"].shape[0] if self.has_proj else h
        feat = d["w_ih"].shape[1]

        def fail(msg, hint=None):
            raise ShapeError(f"{op}: {msg}", op=op, operands=ops, hint=hint)

        if self.batch_sizes is None:
            if x.ndim != 3:
                fail(f"x must be [L, B, F], got {format_shape(x.shape)}")
            lead, batch = tuple(x.shape[:2]), x.shape[1]
        else:
            if x.ndim != 2:
                fail(f"packed x must be [N, F], got {format_shape(x.shape)}")
            lead, batch = (x.shape[0],), self.batch_sizes[0] if self.batch_sizes else 0
        if dims_equal(x.shape[-1], feat) is not True:
            fail(f"x's last dim ({x.shape[-1]}) != input_size of weight_ih "
                 f"{format_shape(d['w_ih'].shape)} ({feat})")
        shapes = {"w_ih": (gates * h, feat), "w_hh": (gates * h, p), "b_ih": (gates * h,),
                  "b_hh": (gates * h,), "w_hr": (p, h), "h0": (batch, p), "c0": (batch, h)}
        for k, t in d.items():
            want = shapes.get(k)
            if want is not None and (len(t.shape) != len(want) or not all(
                    dims_equal(a, b) is True for a, b in zip(t.shape, want))):
                fail(f"{k} must be {format_shape(want)}, got {format_shape(t.shape)}")
        self.hidden, self.proj = h, p
        self.need = _recording(*inputs)
        width = p + h if op == "lstm" else h
        return lead + (width,), x.dtype

    def saved(self, *inputs, out):
        if not self.need:
            self.kept = ()
            return ()
        d = self._unpack(inputs)
        names = list(d)
        idx = {k: i for i, k in enumerate(names)}
        kept, entries = [], []

        def keep(name, entry):
            kept.append(name)
            entries.append(entry)

        if d["w_ih"].requires_grad:
            keep("x", Saved.input(0, LAYER_INPUT))
        keep("h0", _STATE_IN)
        if "c0" in d:
            keep("c0", Saved.input(2))
        if d["x"].requires_grad:
            keep("w_ih", Saved.input(idx["w_ih"]))
        keep("w_hh", Saved.input(idx["w_hh"]))
        if self.has_proj:
            keep("w_hr", Saved.input(idx["w_hr"]))
        keep("states", _STATES_OUT)
        if self.name in ("lstm", "gru"):
            n = tuple(out.shape[:-1])
            keep("gates", Saved.new("gates", n + (4 * self.hidden,), out.dtype,
                                    RECURRENT_GATES))
        self.kept = tuple(kept)
        return tuple(entries)

    def forward(self, *arrays):
        kern = self.device.kernels
        d = self._unpack(arrays)
        x = d["x"]
        steps = self._steps_from(x.shape, kern.xp)
        x2 = x.reshape(steps.n, x.shape[-1])
        b_ih, b_hh = d.get("b_ih"), d.get("b_hh")
        cells = kern.rnn_cells(x.dtype)  # compiled loops (float32 on the cpu), or None
        if self.name == "lstm":
            bias = None if b_ih is None else b_ih + b_hh
            args = (x2, d["h0"], d["c0"], d["w_ih"], d["w_hh"], bias, d.get("w_hr"), steps)
            states, gates = (steps_np.lstm_forward(kern, *args) if cells is None
                             else steps_c.lstm_forward(*args, cells))
        elif self.name == "gru":
            args = (x2, d["h0"], d["w_ih"], d["w_hh"], b_ih, b_hh, steps)
            states, gates = (steps_np.gru_forward(kern, *args) if cells is None
                             else steps_c.gru_forward(*args, cells))
        else:
            bias = None if b_ih is None else b_ih + b_hh
            states = steps_np.rnn_forward(kern, x2, d["h0"], d["w_ih"], d["w_hh"], bias,
                                          self.name == "rnn_relu", steps)
            gates = None
        if self.need and gates is not None:
            self.gates = gates.reshape(x.shape[:-1] + (gates.shape[-1],))
        return states.reshape(x.shape[:-1] + (states.shape[-1],))

    def backward(self, g):
        if _create_graph():
            raise GraphError(
                f"{self.name}: the fused recurrent op has no double backward "
                "(create_graph=True)", op=self.name,
                hint="as with PyTorch's cuDNN RNNs; write the loop with the cells' math "
                "(Tensor ops) where a gradient of a gradient is needed")
        saved = dict(zip(self.kept, self.saved_tensors))
        names = ["x", "h0"] + (["c0"] if self.name == "lstm" else []) + ["w_ih", "w_hh"]
        names += (["b_ih", "b_hh"] if self.has_bias else []) + (["w_hr"] if self.has_proj
                                                                  else [])
        need = {k: self.needs_grad(i) for i, k in enumerate(names)}
        shapes = {k: self.next[3 * i + 1] for i, k in enumerate(names)}
        states = saved["states"]
        dt, dev = states.dtype, states.device
        xs = shapes["x"]
        n = xs[0] if self.batch_sizes is not None else xs[0] * xs[1]
        # the kernel's big buffers, made as Tensors so that a meta run's tracker sees them
        kern = dev.kernels
        cells = kern.rnn_cells(dt.np)
        # the compiled LSTM loop keeps x beside every step's h_{t-1}: one gemm for both dWs
        feat = xs[-1] if (cells is not None and self.name == "lstm" and need["w_ih"]
                          and need["w_hh"]) else 0
        scratch = [Tensor._make(kern.empty(s, dt.np), s, dt, dev)
                   for s in steps_np.scratch_shapes(self.name, n, self.hidden, self.proj,
                                                    feat)]
        if states._data is None:  # meta: shapes only
            return tuple(Tensor._make(None, shapes[k], dt, dev) if need[k] else None
                         for k in names)
        bufs = [t._data for t in scratch]
        g = _dense(g)._data
        x = saved.get("x")
        x_arr = None if x is None else x._data
        w_ih = saved.get("w_ih")
        w_ih = None if w_ih is None else w_ih._data
        steps = self._steps_from(shapes["x"], kern.xp)
        ds = g.reshape(steps.n, g.shape[-1])
        x2 = None if x_arr is None else x_arr.reshape(steps.n, x_arr.shape[-1])
        h0, w_hh, s2 = saved["h0"]._data, saved["w_hh"]._data, states._data.reshape(steps.n, -1)
        gates = saved["gates"]._data.reshape(steps.n, -1) if "gates" in saved else None
        need_b = need.get("b_ih", False) or need.get("b_hh", False)
        if self.name == "lstm":
            w_hr = saved["w_hr"]._data if self.has_proj else None
            args = (ds, x2, h0, saved["c0"]._data, w_ih, w_hh, w_hr, s2, gates, steps,
                    (need["x"], need["w_ih"], need["w_hh"], need_b, need.get("w_hr", False)),
                    bufs)
            dx, dh0, dc0, dw_ih, dw_hh, db, dw_hr = (
                steps_np.lstm_backward(kern, *args) if cells is None
                else steps_c.lstm_backward(*args, cells))
            grads = {"x": dx, "h0": dh0, "c0": dc0, "w_ih": dw_ih, "w_hh": dw_hh,
                     "b_ih": db, "b_hh": db, "w_hr": dw_hr}
        elif self.name == "gru":
            args = (ds, x2, h0, w_ih, w_hh, s2, gates, steps,
                    (need["x"], need["w_ih"], need["w_hh"], need_b), bufs)
            dx, dh0, dw_ih, dw_hh, db_ih, db_hh = (
                steps_np.gru_backward(kern, *args) if cells is None
                else steps_c.gru_backward(*args, cells))
            grads = {"x": dx, "h0": dh0, "w_ih": dw_ih, "w_hh": dw_hh, "b_ih": db_ih,
                     "b_hh": db_hh}
        else:
            dx, dh0, dw_ih, dw_hh, db = steps_np.rnn_backward(
                kern, ds, x2, h0, w_ih, w_hh, s2, self.name == "rnn_relu", steps,
                (need["x"], need["w_ih"], need["w_hh"], need_b), bufs)
            grads = {"x": dx, "h0": dh0, "w_ih": dw_ih, "w_hh": dw_hh, "b_ih": db, "b_hh": db}
        out = []
        for k in names:
            a = grads.get(k)
            if not need[k] or a is None:
                out.append(None)
                continue
            if k == "b_hh" and a is grads.get("b_ih"):
                a = a.copy()  # two gradients, two buffers: the engine may add into either
            shape = tuple(shapes[k])
            out.append(Tensor._make(kern.xp.ascontiguousarray(a.reshape(shape)), shape, dt,
                                    dev))
        return tuple(out)

    def _steps_from(self, x_shape, xp) -> steps_np.Steps:
        if self.batch_sizes is not None:
            return steps_np.Steps(self.batch_sizes, self.reverse, xp)
        return steps_np.Steps([x_shape[1]] * x_shape[0], self.reverse, xp)


def recurrence(mode: str, x: Tensor, h0: Tensor, c0: Tensor | None, weights, reverse=False,
               batch_sizes=None) -> Tensor:
    """Run one layer in one direction; weights = (w_ih, w_hh[, b_ih, b_hh][, w_hr]) as
    PyTorch orders them, with has_bias/has_proj read from their count."""
    weights = list(weights)
    has_bias = len(weights) in (4, 5)
    has_proj = len(weights) in (3, 5)
    if has_proj and mode != "lstm":
        raise ShapeError(f"{mode}: only an LSTM has a projection (weight_hr)", op=mode)
    inputs = [x, h0] + ([c0] if mode == "lstm" else []) + weights
    return apply(Recurrence(mode, reverse, batch_sizes, has_bias, has_proj), *inputs)
