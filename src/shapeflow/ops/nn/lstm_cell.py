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

import numpy as np

from ... import dtypes as _dt
from ...backend.cpu import gemm, threads
from ...backend.cpu import rnn_cell_kernels as _rk
from ...backend.cpu.kernels import address
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
        dt = x.dtype
        hid = w_hh.shape[1]
        out = np.empty((2,) + h.shape, dt)
        x2, ldx = _rows(x)
        batch, feat = x2.shape
        gates = np.empty((batch, 4 * hid), dt)
        h, c = _contiguous(h), _contiguous(c)
        w_ih, w_hh = _contiguous(w_ih), _contiguous(w_hh)
        if b_ih is not None:
            b_ih, b_hh = _contiguous(b_ih), _contiguous(b_hh)
        k = _rk.step(dt)
        if k is None:
            _forward_numpy(x2, h.reshape(batch, hid), c.reshape(batch, hid), w_ih, w_hh, b_ih,
                           b_hh, gates, out.reshape(2, batch, hid))
        else:
            if k.gemm is None:  # NumPy's products, the kernel's pointwise part
                _pre_activations(x2, h.reshape(batch, hid), w_ih, w_hh, b_ih, b_hh, gates)
            else:  # MKL's thread count for products of this size, as gemm.py sets it
                threads.for_product(batch * 4 * hid * (feat + hid))
            k.forward(k.gemm, address(x2), ldx, feat, address(h), address(c), address(w_ih),
                      address(w_hh), None if b_ih is None else address(b_ih),
                      None if b_hh is None else address(b_hh), address(gates), address(out),
                      batch, hid)
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
        dg_t = Tensor._make(None if out._data is None else np.empty((batch, g4), dt.np),
                            (batch, g4), dt, dev)
        if out._data is None:  # meta: shapes only
            return tuple(Tensor._make(None, s, dt, dev) if n else None
                         for n, s in zip(need, shapes))
        gates, dg = saved["gates"]._data, dg_t._data
        hid = g4 // 4
        feat = shapes[3][1]
        npdt = dt.np
        d = np.ascontiguousarray(_dense(g)._data)
        c = np.ascontiguousarray(saved["c"]._data)
        cn = out._data[1]
        x2, ldx = _rows(saved["x"]._data) if "x" in saved else (None, 0)
        h = np.ascontiguousarray(saved["h"]._data) if "h" in saved else None
        w_ih = np.ascontiguousarray(saved["w_ih"]._data) if "w_ih" in saved else None
        w_hh = np.ascontiguousarray(saved["w_hh"]._data) if "w_hh" in saved else None
        need_b = len(need) > 5 and (need[5] or need[6])
        dx = np.empty((batch, feat), npdt) if need[0] else None
        dh = np.empty((batch, hid), npdt) if need[1] else None
        dc = np.empty((batch, hid), npdt) if need[2] else None
        dw_ih = np.empty((g4, feat), npdt) if need[3] else None
        dw_hh = np.empty((g4, hid), npdt) if need[4] else None
        db_ih = np.empty(g4, npdt) if need_b else None
        db_hh = np.empty(g4, npdt) if need_b and need[6] else None
        k = _rk.step(npdt)
        if k is not None and k.gemm is not None:
            threads.for_product(batch * g4 * (feat + hid))
        if k is None:
            _backward_pointwise_numpy(d.reshape(2, batch, hid), gates, c.reshape(batch, hid),
                                      cn.reshape(batch, hid), dg, dc)
        else:
            k.backward(k.gemm, address(d), address(gates), address(c), address(cn),
                       None if x2 is None else address(x2), ldx, feat,
                       None if h is None else address(h),
                       None if w_ih is None else address(w_ih),
                       None if w_hh is None else address(w_hh), address(dg),
                       None if dx is None else address(dx), None if dh is None else address(dh),
                       None if dc is None else address(dc),
                       None if dw_ih is None else address(dw_ih),
                       None if dw_hh is None else address(dw_hh),
                       None if db_ih is None else address(db_ih),
                       None if db_hh is None else address(db_hh), batch, hid)
        if k is None or k.gemm is None:  # the products (and the bias sum) in NumPy
            if dx is not None:
                dx[...] = gemm.matmul(dg, w_ih)
            if dh is not None:
                dh[...] = gemm.matmul(dg, w_hh)
            if dw_ih is not None:
                dw_ih[...] = gemm.matmul(dg.T, x2)
            if dw_hh is not None:
                dw_hh[...] = gemm.matmul(dg.T, h.reshape(batch, hid))
            if db_ih is not None:
                np.sum(dg, axis=0, out=db_ih)
                if db_hh is not None:
                    db_hh[...] = db_ih
        grads = (dx, dh, dc, dw_ih, dw_hh, db_ih, db_hh if db_hh is not None else db_ih)
        return tuple(None if a is None or not n else
                     Tensor._make(a.reshape(s) if a.shape != s else a, s, dt, dev)
                     for a, n, s in zip(grads, need, shapes))


def _contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _rows(x: np.ndarray) -> tuple[np.ndarray, int]:
    """(x as [B, F] rows, their stride in elements): a strided batch of rows (a column of a
    sequence split by time) is passed as it is; anything else is copied first."""
    if x.ndim == 1:
        x = _contiguous(x)
        return x.reshape(1, x.shape[0]), x.shape[0]
    item = x.itemsize
    s0, s1 = x.strides
    rows, feat = x.shape
    if (s1 == item or feat <= 1) and s0 % item == 0 and s0 >= item * max(feat, 1):
        return x, s0 // item
    x = np.ascontiguousarray(x)
    return x, max(feat, 1)


def _pre_activations(x2, h2, w_ih, w_hh, b_ih, b_hh, gates) -> None:
    """gates <- x W_ih^T + h W_hh^T (+ b_ih + b_hh) with NumPy's BLAS."""
    np.matmul(x2, w_ih.T, out=gates)
    gates += h2 @ w_hh.T
    if b_ih is not None:
        gates += b_ih
        gates += b_hh


def _sigmoid(a: np.ndarray) -> np.ndarray:
    """In place: 0.5 tanh(a / 2) + 0.5 (no overflow, no cancellation for large |a|)."""
    a *= 0.5
    np.tanh(a, out=a)
    a *= 0.5
    a += 0.5
    return a


def _forward_numpy(x2, h2, c2, w_ih, w_hh, b_ih, b_hh, gates, out3) -> None:
    """The step without the compiled library: gates (activated), out3 [2, B, H]."""
    _pre_activations(x2, h2, w_ih, w_hh, b_ih, b_hh, gates)
    hid = h2.shape[1]
    i, f = _sigmoid(gates[:, :hid]), _sigmoid(gates[:, hid:2 * hid])
    u = np.tanh(gates[:, 2 * hid:3 * hid], out=gates[:, 2 * hid:3 * hid])
    o = _sigmoid(gates[:, 3 * hid:])
    cn = out3[1]
    np.multiply(f, c2, out=cn)
    cn += i * u
    np.tanh(cn, out=out3[0])
    out3[0] *= o


def _backward_pointwise_numpy(d3, gates, c2, cn, dg, dc) -> None:
    """dg <- the pre-activation gradients from d3 [2, B, H] (dh', dc'); dc <- the carry."""
    hid = c2.shape[1]
    i, f = gates[:, :hid], gates[:, hid:2 * hid]
    u, o = gates[:, 2 * hid:3 * hid], gates[:, 3 * hid:]
    dh = d3[0]
    tc = np.tanh(cn)
    dcv = dh * o * (1 - tc * tc) + d3[1]
    dg[:, :hid] = dcv * u * (i - i * i)
    dg[:, hid:2 * hid] = dcv * c2 * (f - f * f)
    dg[:, 2 * hid:3 * hid] = dcv * i * (1 - u * u)
    dg[:, 3 * hid:] = dh * tc * (o - o * o)
    if dc is not None:
        np.multiply(dcv, f, out=dc)


def lstm_cell(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One LSTM step: [2, *batch, H] holding h' and c' (gates i, f, g, o as PyTorch's)."""
    if (b_ih is None) != (b_hh is None):
        raise ShapeError("lstm_cell: pass both biases or neither", op="lstm_cell")
    if b_ih is None:
        return apply(LSTMCellStep(), x, h, c, w_ih, w_hh)
    return apply(LSTMCellStep(), x, h, c, w_ih, w_hh, b_ih, b_hh)
