"""The rnn family's portable kernels, written against `self.xp`: nn.LSTMCell's step forward
and backward. The recurrent layers' time loops are ops/nn/recurrent_steps.py's (the table's
products and this namespace); a table with compiled loops gives them by `rnn_cells`.
"""

from __future__ import annotations


class RnnKernels:
    """rnn kernels (a mixin of ReferenceKernels)."""

    def gru_input_and_weight_grads(self, dxw, dgh, x2, hp, w_ih, dh_c, need) -> tuple:
        """(dx, dh0, dw_ih, dw_hh, db_ih, db_hh) of a GRU from its gates' gradients at every
        step (dxw for the input projection, dgh for the hidden one; hp the previous states):
        the products after the step loop, whichever loop (compiled or NumPy) ran it."""
        need_x, need_wih, need_whh, need_b = need
        dx = self.matmul(dxw, w_ih) if need_x else None
        dw_ih = self.matmul(dxw.T, x2) if need_wih else None
        dw_hh = self.matmul(dgh.T, hp) if need_whh else None
        db_ih = self.col_sums(dxw) if need_b else None
        db_hh = self.col_sums(dgh) if need_b else None
        return dx, dh_c, dw_ih, dw_hh, db_ih, db_hh

    def rnn_cells(self, dtype):
        """The compiled LSTM/GRU time loops for `dtype` (ops/nn/recurrent_cells.py calls
        them), or None: the op runs recurrent_steps.py's loops."""
        return None

    def lstm_cell(self, x, h, c, w_ih, w_hh, b_ih, b_hh, gates, out):
        """One LSTM step: gates [B, 4H] <- the activated gates (i, f, g, o) and out [2, B, H]
        (or [2, H]) <- h' = o tanh(c'), c' = f c + i g, from x [B, F] (or [F]), h, c."""
        self.ran("lstm_cell", self.path)
        xp = self.xp
        batch, g4 = gates.shape
        hid = g4 // 4
        x2 = x.reshape(batch, x.shape[-1])
        self._lstm_pre_activations(x2, h.reshape(batch, hid), w_ih, w_hh, b_ih, b_hh, gates)
        i, f = self._sigmoid(gates[:, :hid]), self._sigmoid(gates[:, hid:2 * hid])
        u = xp.tanh(gates[:, 2 * hid:3 * hid], out=gates[:, 2 * hid:3 * hid])
        o = self._sigmoid(gates[:, 3 * hid:])
        out3 = out.reshape(2, batch, hid)
        cn = out3[1]
        xp.multiply(f, c.reshape(batch, hid), out=cn)
        cn += i * u
        xp.tanh(cn, out=out3[0])
        out3[0] *= o
        return out

    def _lstm_pre_activations(self, x2, h2, w_ih, w_hh, b_ih, b_hh, gates) -> None:
        """gates <- x W_ih^T + h W_hh^T (+ b_ih + b_hh)."""
        self.xp.matmul(x2, w_ih.T, out=gates)
        gates += h2 @ w_hh.T
        if b_ih is not None:
            gates += b_ih
            gates += b_hh

    def lstm_cell_backward(self, d, gates, c, cn, x, h, w_ih, w_hh, feat: int, dg, grads):
        """One LSTM step's gradients from d [2, B, H] (dh', dc'): dg [B, 4H] <- the
        pre-activation gradients, and each buffer of grads (dx, dh, dc, dw_ih, dw_hh, db_ih,
        db_hh; None: not wanted) filled. x, h (for the weights) and w_ih, w_hh (for x, h)
        may be None where their gradients are not wanted; cn is c'."""
        self.ran("lstm_cell_backward", self.path)
        batch, g4 = gates.shape
        hid = g4 // 4
        self._lstm_pointwise_backward(d.reshape(2, batch, hid), gates, c.reshape(batch, hid),
                                      cn.reshape(batch, hid), dg, grads[2])
        self._lstm_cell_products(dg, x, h, w_ih, w_hh, grads)
        return grads

    def _lstm_pointwise_backward(self, d3, gates, c2, cn, dg, dc) -> None:
        """dg <- the pre-activation gradients from d3 [2, B, H] (dh', dc'); dc <- the
        carry."""
        xp = self.xp
        hid = c2.shape[1]
        i, f = gates[:, :hid], gates[:, hid:2 * hid]
        u, o = gates[:, 2 * hid:3 * hid], gates[:, 3 * hid:]
        dh = d3[0]
        tc = xp.tanh(cn)
        dcv = dh * o * (1 - tc * tc) + d3[1]
        dg[:, :hid] = dcv * u * (i - i * i)
        dg[:, hid:2 * hid] = dcv * c2 * (f - f * f)
        dg[:, 2 * hid:3 * hid] = dcv * i * (1 - u * u)
        dg[:, 3 * hid:] = dh * tc * (o - o * o)
        if dc is not None:
            xp.multiply(dcv, f, out=dc)

    def _lstm_cell_products(self, dg, x2, h, w_ih, w_hh, grads) -> None:
        """The step's products from dg: dx, dh, dw_ih, dw_hh and the bias sums."""
        dx, dh, _, dw_ih, dw_hh, db_ih, db_hh = grads
        if dx is not None:
            dx[...] = self.matmul(dg, w_ih)
        if dh is not None:
            dh[...] = self.matmul(dg, w_hh)
        if dw_ih is not None:
            dw_ih[...] = self.matmul(dg.T, x2.reshape(dg.shape[0], dw_ih.shape[1]))
        if dw_hh is not None:
            dw_hh[...] = self.matmul(dg.T, h.reshape(dg.shape[0], dw_hh.shape[1]))
        if db_ih is not None:
            self.xp.sum(dg, axis=0, out=db_ih)
            if db_hh is not None:
                db_hh[...] = db_ih

    def _sigmoid(self, a):
        """In place: 0.5 tanh(a / 2) + 0.5 (no overflow, no cancellation for large |a|)."""
        a *= 0.5
        self.xp.tanh(a, out=a)
        a *= 0.5
        a += 0.5
        return a
