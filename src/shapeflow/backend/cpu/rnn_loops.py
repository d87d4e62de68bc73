"""The LSTM and GRU time loops with the compiled cell kernels (float32): per step one gemm
and one pass over the step's rows, forward and backward (the cpu table's `rnn_cells`).

The same layout, gemms and saved buffers as ops/nn/recurrent_steps.py's loops (which remain
the path for float64, and wherever the compiled library is not in use); only each step's
pointwise part, some twenty NumPy passes, becomes one kernel call. Buffers are checked once
(`kernels.rows`), then each step passes addresses of its row block. The products are the
table's (`tb`: matmul, matmul_bias, matmul_accumulate, col_sums).
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .gemm_packed import Packed

_F4 = 4  # bytes per float32


def rows(a: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(a with contiguous rows, its address, its row stride in elements)."""
    got = kernels.rows(a)
    if got is None:
        a = np.ascontiguousarray(a)
        got = kernels.rows(a)
    return (a,) + got


class _Prev:
    """Where step t's previous state (columns lo:hi of the step before, or the initial
    state) lies: an address and a row stride, without copying when the rows are in place."""

    def __init__(self, steps, states_ptr: int, ld: int, init: np.ndarray, lo: int,
                 hi: int) -> None:
        self.steps, self.base, self.ld, self.lo, self.hi = steps, states_ptr, ld, lo, hi
        self.init, self.init_ptr, self.init_ld = rows(init)
        self.last = len(steps.sizes) - 1

    def __call__(self, t: int, states: np.ndarray) -> tuple[int, int, np.ndarray | None]:
        """(address, row stride, the array to keep alive while the kernel reads it)."""
        s = self.steps
        bs = s.sizes[t]
        if not s.reverse:
            if t == 0:
                return self.init_ptr, self.init_ld, None
            return self.base + (s.offsets[t - 1] * self.ld + self.lo) * _F4, self.ld, None
        if t == self.last:
            return self.init_ptr, self.init_ld, None
        a, k = s.offsets[t + 1], s.sizes[t + 1]
        if k == bs:
            return self.base + (a * self.ld + self.lo) * _F4, self.ld, None
        part = np.concatenate([states[a:a + k, self.lo:self.hi], self.init[k:bs]])
        return part.ctypes.data, part.shape[1], part


def lstm_forward(x2, h0, c0, w_ih, w_hh, bias, w_hr, steps, cells: kernels.Cells, tb):
    """(states [N, P + H]: h then c per row; activated gates [N, 4H]: i, f, g, o)."""
    h = w_hh.shape[0] // 4
    p = h if w_hr is None else w_hr.shape[0]
    gates = tb.matmul_bias(x2, w_ih.T, bias)
    whh_t = w_hh.T
    states = np.empty((steps.n, p + h), np.float32)
    sp, ld = states.ctypes.data, p + h
    gp = gates.ctypes.data
    prev_c = _Prev(steps, sp, ld, c0, p, p + h)
    tmp = np.empty((steps.batch, h), np.float32) if w_hr is not None else None
    w_hr_t = None if w_hr is None else w_hr.T
    whh_p = Packed(whh_t, steps.batch)  # packed once for the L products
    for t in steps.order:
        a, bs = steps.offsets[t], steps.sizes[t]
        whh_p.acc(steps.prev(t, states, h0, 0, p), gates[a:a + bs])
        cp, ldcp, _keep = prev_c(t, states)
        row = sp + a * ld * _F4
        if tmp is None:
            cells.lstm(gp + a * 4 * h * _F4, cp, ldcp, row + p * _F4, ld, row, ld, bs, h)
        else:
            cells.lstm(gp + a * 4 * h * _F4, cp, ldcp, row + p * _F4, ld, tmp.ctypes.data, h,
                       bs, h)
            states[a:a + bs, :p] = tb.matmul(tmp[:bs], w_hr_t)
    return states, gates


def lstm_backward(ds, x2, h0, c0, w_ih, w_hh, w_hr, states, gates, steps, need,
                  scratch, cells: kernels.Cells, tb):
    """Gradients (x, h0, c0, w_ih, w_hh, bias, w_hr) from ds [N, P + H]."""
    h = w_hh.shape[0] // 4
    p = h if w_hr is None else w_hr.shape[0]
    dg, xh = scratch[:2]
    feat = xh.shape[1] - p  # > 0: x beside h_{t-1}, both weight gradients in one gemm
    if feat:
        xh[:, :feat] = x2
    hp = xh[:, feat:]
    dh_all, r_all = scratch[2:] if w_hr is not None else (None, None)
    ds, dsp, ldd = rows(ds)
    states, sp, ld = rows(states)
    gates, gp, _ = rows(gates)
    dh_c, dc_c = np.zeros((steps.batch, p), np.float32), np.zeros((steps.batch, h), np.float32)
    dhp, dcp, dgp = dh_c.ctypes.data, dc_c.ctypes.data, dg.ctypes.data
    rp = None if r_all is None else r_all.ctypes.data
    prev_c = _Prev(steps, sp, ld, c0, p, p + h)
    whh_p = Packed(w_hh, steps.batch)
    for t in reversed(steps.order):
        a, bs = steps.offsets[t], steps.sizes[t]
        hp[a:a + bs] = steps.prev(t, states, h0, 0, p)
        cp, ldcp, _keep = prev_c(t, states)
        row, drow, grow = sp + a * ld * _F4, dsp + a * ldd * _F4, gp + a * 4 * h * _F4
        if w_hr is None:
            cells.lstm_backward(grow, row + p * _F4, ld, cp, ldcp, drow, ldd, dhp,
                                drow + p * _F4, ldd, dcp, dgp + a * 4 * h * _F4, None, bs, h)
            whh_p.acc(dg[a:a + bs], dh_c[:bs])  # the kernel zeroed these rows
        else:
            dh = ds[a:a + bs, :p] + dh_c[:bs]
            dh_all[a:a + bs] = dh
            dh = np.ascontiguousarray(tb.matmul(dh, w_hr))
            cells.lstm_backward(grow, row + p * _F4, ld, cp, ldcp, dh.ctypes.data, h, None,
                                drow + p * _F4, ldd, dcp, dgp + a * 4 * h * _F4,
                                rp + a * h * _F4, bs, h)
            dh_c[:bs] = tb.matmul(dg[a:a + bs], w_hh)
    need_x, need_wih, need_whh, need_b, need_whr = need
    dx = tb.matmul(dg, w_ih) if need_x else None
    if feat:
        dw = tb.matmul(dg.T, xh)
        dw_ih, dw_hh = dw[:, :feat], dw[:, feat:]
    else:
        dw_ih = tb.matmul(dg.T, x2) if need_wih else None
        dw_hh = tb.matmul(dg.T, hp) if need_whh else None
    db = tb.col_sums(dg) if need_b else None
    dw_hr = tb.matmul(dh_all.T, r_all) if need_whr and w_hr is not None else None
    return dx, dh_c, dc_c, dw_ih, dw_hh, db, dw_hr


def gru_forward(x2, h0, w_ih, w_hh, b_ih, b_hh, steps, cells: kernels.Cells, tb):
    """(states [N, H]; gates [N, 4H]: r, z, n and W_hn h + b_hn, what backward needs)."""
    h = w_hh.shape[0] // 3
    xw = tb.matmul_bias(x2, w_ih.T, b_ih)
    whh_t = w_hh.T
    states = np.empty((steps.n, h), np.float32)
    gates = np.empty((steps.n, 4 * h), np.float32)
    sp, gp, xp = states.ctypes.data, gates.ctypes.data, xw.ctypes.data
    prev_h = _Prev(steps, sp, h, h0, 0, h)
    for t in steps.order:
        a, bs = steps.offsets[t], steps.sizes[t]
        gh = np.ascontiguousarray(tb.matmul_bias(steps.prev(t, states, h0, 0, h), whh_t, b_hh))
        hpp, ldhp, _keep = prev_h(t, states)
        cells.gru(xp + a * 3 * h * _F4, 3 * h, gh.ctypes.data, hpp, ldhp,
                  gp + a * 4 * h * _F4, sp + a * h * _F4, h, bs, h)
    return states, gates


def gru_backward(ds, x2, h0, w_ih, w_hh, states, gates, steps, need, scratch,
                 cells: kernels.Cells, tb):
    """Gradients (x, h0, w_ih, w_hh, b_ih, b_hh) from ds [N, H]."""
    h = w_hh.shape[0] // 3
    dxw, dgh, hp = scratch
    ds, dsp, ldd = rows(ds)
    gates, gp, _ = rows(gates)
    dh_c = np.zeros((steps.batch, h), np.float32)
    dhp, xp, ghp, hpp = dh_c.ctypes.data, dxw.ctypes.data, dgh.ctypes.data, hp.ctypes.data
    for t in reversed(steps.order):
        a, bs = steps.offsets[t], steps.sizes[t]
        hp[a:a + bs] = steps.prev(t, states, h0, 0, h)
        cells.gru_backward(gp + a * 4 * h * _F4, hpp + a * h * _F4, dsp + a * ldd * _F4, ldd,
                           dhp, xp + a * 3 * h * _F4, ghp + a * 3 * h * _F4, bs, h)
        tb.matmul_accumulate(dgh[a:a + bs], w_hh, dh_c[:bs])
    return tb.gru_input_and_weight_grads(dxw, dgh, x2, hp, w_ih, dh_c, need)



class CompiledLoops:
    """The four loops bound to a table's products and the compiled cells (what the cpu
    table's `rnn_cells(float32)` returns); each call is counted on the table."""

    def __init__(self, tb, cells: kernels.Cells) -> None:
        self.tb, self.cells = tb, cells

    def lstm_forward(self, x2, h0, c0, w_ih, w_hh, bias, w_hr, steps):
        self.tb.ran("lstm_forward", "compiled")
        return lstm_forward(x2, h0, c0, w_ih, w_hh, bias, w_hr, steps, self.cells, self.tb)

    def lstm_backward(self, ds, x2, h0, c0, w_ih, w_hh, w_hr, states, gates, steps, need,
                      scratch):
        self.tb.ran("lstm_backward", "compiled")
        return lstm_backward(ds, x2, h0, c0, w_ih, w_hh, w_hr, states, gates, steps, need,
                             scratch, self.cells, self.tb)

    def gru_forward(self, x2, h0, w_ih, w_hh, b_ih, b_hh, steps):
        self.tb.ran("gru_forward", "compiled")
        return gru_forward(x2, h0, w_ih, w_hh, b_ih, b_hh, steps, self.cells, self.tb)

    def gru_backward(self, ds, x2, h0, w_ih, w_hh, states, gates, steps, need, scratch):
        self.tb.ran("gru_backward", "compiled")
        return gru_backward(ds, x2, h0, w_ih, w_hh, states, gates, steps, need, scratch,
                            self.cells, self.tb)


def cell_rows(x: np.ndarray) -> tuple[np.ndarray, int]:
    """(x as [B, F] rows, their stride in elements): a strided batch of rows (a column of a
    sequence split by time) is passed as it is; anything else is copied first (nn.LSTMCell's
    step kernel takes an address and a row stride)."""
    if x.ndim == 1:
        x = np.ascontiguousarray(x)
        return x.reshape(1, x.shape[0]), x.shape[0]
    item = x.itemsize
    s0, s1 = x.strides
    n, feat = x.shape
    if (s1 == item or feat <= 1) and s0 % item == 0 and s0 >= item * max(feat, 1):
        return x, s0 // item
    x = np.ascontiguousarray(x)
    return x, max(feat, 1)
