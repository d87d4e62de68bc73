"""nn.LSTMCell's step as one op: both gate products, the activations, c' and h' in one call.

A cell stepped from Python (PyTorch's time-sequence example: two cells and a Linear per
step, in LBFGS closures) pays per op, not per flop: on CPU PyTorch runs the cell as about a
dozen ops, this is one, and its backward one kernel call (backend/cpu/rnn_cell_kernels.c, with
MKL's products inside; NumPy where the library is absent).

Inputs: x [B, F] (or [F]), h and c [B, H] (or [H]), weight_ih [4H, F], weight_hh [4H, H],
bias_ih and bias_hh [4H] when the cell has them. Output [2, B, H] (or [2, H]): h' then c',
each contiguous; the module returns the two views. Saved: the activated gates [B, 4H] (new),
c and the output (c' for tanh(c')), x and h where a weight needs its gradient, the weights
where x or h needs one.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, GraphError, ShapeError, ShapeflowError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from ..base import ACTIVATION_INPUT, LAYER_INPUT, Op, Saved, apply
from ._common import _create_graph, _dense, _recording
from .recurrent import RECURRENT_GATES  # the memory report's kind for every step's gates

_NAMES = ("x", "h", "c", "w_ih", "w_hh", "b_ih", "b_hh")
_X, _H = Saved.input(0, LAYER_INPUT), Saved.input(1, LAYER_INPUT)
_C, _OUT = Saved.input(2, ACTIVATION_INPUT), Saved.output(ACTIVATION_INPUT)
_W_IH, _W_HH = Saved.input(3), Saved.input(4)
_FLOATS = (_dt.float32, _dt.float64)


class LSTMCellStep(Op):
    """One LSTM step: out [2, *batch, H] holds h' = o tanh(c') and c' = f c + i g."""

    name = "lstm_cell"

    def infer(self, x, h, c, w_ih, w_hh, *bias):
        dt = x.dtype
        if not (dt in _FLOATS and h.dtype is dt and c.dtype is dt and w_ih.dtype is dt
                and w_hh.dtype is dt and all(b.dtype is dt for b in bias)):
            got = ", ".join(f"{n} {t.dtype}" for n, t in zip(_NAMES, (x, h, c, w_ih, w_hh) + bias))
            raise DTypeError(
                f"lstm_cell: every operand must share one dtype, float32 or float64; got {got}",
                op="lstm_cell", operands=self._operands(x, h, c, w_ih, w_hh, *bias),
                hint="cast the input (x.float()) or the module (.double())")
        if not self._shapes_fit(x, h, c, w_ih, w_hh, bias):
            self._check_shapes(x, h, c, w_ih, w_hh, bias)
        self.need = _recording(x, h, c, w_ih, w_hh, *bias)
        return (2,) + tuple(h.shape), dt

    @staticmethod
    def _shapes_fit(x, h, c, w_ih, w_hh, bias) -> bool:
        """The common case, decided by tuple equality; False sends it to _check_shapes."""
        xs, ws = x.shape, w_hh.shape
        if len(xs) not in (1, 2) or len(ws) != 2:
            return False
        try:
            gh, hid = ws
            want = tuple(xs[:-1]) + (hid,)
            return (tuple(h.shape) == want and tuple(c.shape) == want and gh == 4 * hid
                    and tuple(w_ih.shape) == (gh, xs[-1])
                    and all(tuple(b.shape) == (gh,) for b in bias)) is True
        except ShapeflowError:  # symbols that == cannot decide
            return False

    def _operands(self, *inputs) -> list:
        return [(n, describe(t)) for n, t in zip(_NAMES, inputs)]

    def _check_shapes(self, x, h, c, w_ih, w_hh, bias) -> None:
        """The exact checks (symbolic dims included), raising the rule that broke."""
        ops = self._operands(x, h, c, w_ih, w_hh, *bias)

        def fail(msg):
            raise ShapeError(f"lstm_cell: {msg}", op="lstm_cell", operands=ops)

        if x.ndim not in (1, 2):
            fail(f"x must be [B, F] or [F], got {format_shape(x.shape)}")
        if w_hh.ndim != 2 or w_ih.ndim != 2:
            fail(f"weight_ih and weight_hh must be 2-D, got {format_shape(w_ih.shape)} and "
                 f"{format_shape(w_hh.shape)}")
        hid = w_hh.shape[1]
        rules = {"w_hh": (w_hh, (4 * hid, hid)), "w_ih": (w_ih, (4 * hid, x.shape[-1])),
                 "h": (h, tuple(x.shape[:-1]) + (hid,)), "c": (c, tuple(x.shape[:-1]) + (hid,))}
        rules.update({n: (b, (4 * hid,)) for n, b in zip(("b_ih", "b_hh"), bias)})
        for name, (t, want) in rules.items():
            if len(t.shape) != len(want) or not all(
                    dims_equal(a, b) is True for a, b in zip(t.shape, want)):
                fail(f"{name} must be {format_shape(want)}, got {format_shape(t.shape)}")

    def saved(self, x, h, c, w_ih, w_hh, *bias, out):
        if not self.need:
            self.kept = ()
            return ()
        kept, entries = ["c", "out"], [_C, _OUT]
        for name, entry, wanted in (("x", _X, w_ih.requires_grad), ("h", _H, w_hh.requires_grad),
                                    ("w_ih", _W_IH, x.requires_grad),
                                    ("w_hh", _W_HH, h.requires_grad)):
            if wanted:
                kept.append(name)
                entries.append(entry)
        batch = tuple(x.shape[:-1]) or (1,)
        kept.append("gates")
        entries.append(Saved.new("gates", batch + (4 * w_hh.shape[1],), out.dtype,
                                 RECURRENT_GATES))
        self.kept = tuple(kept)
        return tuple(entries)

    def forward(self, x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
        kern = self.device.kernels
        xp = kern.xp
        dt = x.dtype
        hid = w_hh.shape[1]
        out = xp.empty((2,) + h.shape, dt)
        gates = xp.empty((1 if x.ndim == 1 else x.shape[0], 4 * hid), dt)
        kern.lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, gates, out)
        if self.need:
            self.gates = gates
        return out

    def backward(self, g):
        if _create_graph():
            raise GraphError(
                "lstm_cell: the fused LSTM cell has no double backward (create_graph=True)",
                op="lstm_cell", hint="write the cell's math with Tensor ops where a gradient "
                "of a gradient is needed")
        saved = dict(zip(self.kept, self.saved_tensors))
        nxt = self.next
        need = [nxt[3 * i] is not None for i in range(len(nxt) // 3)]
        shapes = nxt[1::3]
        out = saved["out"]
        dt, dev = out.dtype, out.device
        batch, g4 = saved["gates"].shape
        # the gate gradients, made as a Tensor so that a meta run's tracker sees them
        kern = dev.kernels
        dg_t = Tensor._make(kern.empty((batch, g4), dt.np), (batch, g4), dt, dev)
        if out._data is None:  # meta: shapes only
            return tuple(Tensor._make(None, s, dt, dev) if n else None
                         for n, s in zip(need, shapes))
        xp = kern.xp
        hid = g4 // 4
        feat = shapes[3][1]
        npdt = dt.np
        need_b = len(need) > 5 and (need[5] or need[6])
        dx = xp.empty((batch, feat), npdt) if need[0] else None
        dh = xp.empty((batch, hid), npdt) if need[1] else None
        dc = xp.empty((batch, hid), npdt) if need[2] else None
        dw_ih = xp.empty((g4, feat), npdt) if need[3] else None
        dw_hh = xp.empty((g4, hid), npdt) if need[4] else None
        db_ih = xp.empty(g4, npdt) if need_b else None
        db_hh = xp.empty(g4, npdt) if need_b and need[6] else None
        kern.lstm_cell_backward(
            _dense(g)._data, saved["gates"]._data, saved["c"]._data, out._data[1],
            saved["x"]._data if "x" in saved else None,
            saved["h"]._data if "h" in saved else None,
            saved["w_ih"]._data if "w_ih" in saved else None,
            saved["w_hh"]._data if "w_hh" in saved else None, feat, dg_t._data,
            (dx, dh, dc, dw_ih, dw_hh, db_ih, db_hh))
        grads = (dx, dh, dc, dw_ih, dw_hh, db_ih, db_hh if db_hh is not None else db_ih)
        return tuple(None if a is None or not n else
                     Tensor._make(a.reshape(s) if a.shape != s else a, s, dt, dev)
                     for a, n, s in zip(grads, need, shapes))


def lstm_cell(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One LSTM step: [2, *batch, H] holding h' and c' (gates i, f, g, o as PyTorch's)."""
    if (b_ih is None) != (b_hh is None):
        raise ShapeError("lstm_cell: pass both biases or neither", op="lstm_cell")
    if b_ih is None:
        return apply(LSTMCellStep(), x, h, c, w_ih, w_hh)
    return apply(LSTMCellStep(), x, h, c, w_ih, w_hh, b_ih, b_hh)
