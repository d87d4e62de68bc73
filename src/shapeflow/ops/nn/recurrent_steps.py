"""The time loops of the recurrent op in NumPy: one layer, one direction, forward and backward.

Rows are in the packed layout [N, features]: step t owns rows offsets[t] .. offsets[t] +
sizes[t], the first sizes[t] sequences of a batch sorted by decreasing length (a padded
batch is the case where every size is B). The input projection of all steps is one gemm
before the loop and its gradients one gemm each after it; only h @ W_hh runs per step.
Arrays are the device's (`kern.xp`), products its kernel table's (`kern`: matmul,
matmul_bias, matmul_accumulate, col_sums).
"""

from __future__ import annotations


class Steps:
    """Where each time step's rows lie in the packed layout, and the order they run in."""

    def __init__(self, sizes, reverse: bool, xp) -> None:
        self.xp = xp  # the device's namespace (prev joins rows with it)
        self.sizes = [int(s) for s in sizes]
        self.offsets = [0] * len(self.sizes)
        for t in range(1, len(self.sizes)):
            self.offsets[t] = self.offsets[t - 1] + self.sizes[t - 1]
        self.n = sum(self.sizes)
        self.batch = self.sizes[0] if self.sizes else 0
        self.reverse = reverse
        order = range(len(self.sizes))
        self.order = order[::-1] if reverse else order

    def prev(self, t: int, states, init, lo: int, hi: int):
        """The state step t starts from (columns lo:hi of the previous step's rows, or the
        initial state for sequences that start here)."""
        bs = self.sizes[t]
        last = len(self.sizes) - 1
        if not self.reverse:
            if t == 0:
                return init[:bs]
            a = self.offsets[t - 1]
            return states[a:a + bs, lo:hi]
        if t == last:
            return init[:bs]
        a, k = self.offsets[t + 1], self.sizes[t + 1]
        part = states[a:a + k, lo:hi]
        return part if k == bs else self.xp.concatenate([part, init[k:bs]])


def _gate_scale(xp, h: int, dtype) -> tuple:
    """sigmoid(x) = 0.5 * tanh(x / 2) + 0.5: the LSTM's i, f, o pre-activations are halved
    (through the weights) so one tanh pass covers all four gates; then * scale + shift."""
    scale = xp.full(4 * h, 0.5, dtype)
    scale[2 * h:3 * h] = 1.0
    shift = xp.full(4 * h, 0.5, dtype)
    shift[2 * h:3 * h] = 0.0
    return scale, shift


def lstm_forward(kern, x2, h0, c0, w_ih, w_hh, bias, w_hr, steps: Steps):
    """(states [N, P + H]: h then c per row; activated gates [N, 4H]: i, f, g, o)."""
    xp = kern.xp
    h = w_hh.shape[0] // 4
    p = h if w_hr is None else w_hr.shape[0]
    scale, shift = _gate_scale(xp, h, x2.dtype)
    gates = kern.matmul_bias(x2, (w_ih * scale[:, None]).T,
                             None if bias is None else bias * scale)
    whh_t = (w_hh * scale[:, None]).T
    states = xp.empty((steps.n, p + h), x2.dtype)
    tmp = xp.empty((steps.batch, h), x2.dtype)
    for t in steps.order:
        a, bs = steps.offsets[t], steps.sizes[t]
        g = gates[a:a + bs]
        kern.matmul_accumulate(steps.prev(t, states, h0, 0, p), whh_t, g)
        xp.tanh(g, out=g)
        g *= scale
        g += shift
        i, f, gg, o = g[:, :h], g[:, h:2 * h], g[:, 2 * h:3 * h], g[:, 3 * h:]
        c = states[a:a + bs, p:]
        xp.multiply(f, steps.prev(t, states, c0, p, p + h), out=c)
        tb = tmp[:bs]
        xp.multiply(i, gg, out=tb)
        c += tb
        xp.tanh(c, out=tb)
        if w_hr is None:
            xp.multiply(o, tb, out=states[a:a + bs, :p])
        else:
            tb *= o
            states[a:a + bs, :p] = tb @ w_hr.T
    return states, gates


def scratch_shapes(mode: str, n, h: int, p: int, feat: int = 0) -> list:
    """The [N, *] buffers a backward fills (declared so a memory report's meta run sees
    them): gate gradients and every step's h_{t-1} (after `feat` columns of x when the
    loop computes both weight gradients in one gemm), and what each mode adds."""
    if mode == "lstm":
        return [(n, 4 * h), (n, feat + p)] + ([(n, p), (n, h)] if p != h else [])
    if mode == "gru":
        return [(n, 3 * h), (n, 3 * h), (n, h)]
    return [(n, h), (n, h)]


def lstm_backward(kern, ds, x2, h0, c0, w_ih, w_hh, w_hr, states, gates, steps: Steps, need,
                  scratch):
    """Gradients (x, h0, c0, w_ih, w_hh, bias, w_hr) from ds [N, P + H]."""
    xp = kern.xp
    h = w_hh.shape[0] // 4
    p = h if w_hr is None else w_hr.shape[0]
    dt = states.dtype
    dg, hp = scratch[:2]
    dh_all, r_all = scratch[2:] if w_hr is not None else (None, None)
    dh_c, dc_c = xp.zeros((steps.batch, p), dt), xp.zeros((steps.batch, h), dt)
    tc_buf, dc_buf, u_buf = (xp.empty((steps.batch, h), dt) for _ in range(3))
    loc_buf = xp.empty((steps.batch, 4 * h), dt)
    for t in reversed(steps.order):
        a, bs = steps.offsets[t], steps.sizes[t]
        g = gates[a:a + bs]
        i, f, gg, o = g[:, :h], g[:, h:2 * h], g[:, 2 * h:3 * h], g[:, 3 * h:]
        hp[a:a + bs] = steps.prev(t, states, h0, 0, p)
        c_prev = steps.prev(t, states, c0, p, p + h)
        dh = ds[a:a + bs, :p] + dh_c[:bs]
        if w_hr is not None:
            dh_all[a:a + bs] = dh
            dh = dh @ w_hr
        tc, dc, u = tc_buf[:bs], dc_buf[:bs], u_buf[:bs]
        xp.tanh(states[a:a + bs, p:], out=tc)
        if r_all is not None:
            xp.multiply(o, tc, out=r_all[a:a + bs])
        d = dg[a:a + bs]
        # each gate's local derivative in one [bs, 4H] pass pair: s - s^2 for i, f, o, and
        # g - g^2 + 1 - g = 1 - g^2 for the tanh gate
        loc = loc_buf[:bs]
        xp.multiply(g, g, out=loc)
        xp.subtract(g, loc, out=loc)
        lg = loc[:, 2 * h:3 * h]
        lg += 1.0
        lg -= gg
        # dc = ds_c + carry + dh * o * (1 - tanh(c)^2)
        xp.multiply(tc, tc, out=u)
        xp.subtract(1.0, u, out=u)
        u *= o
        u *= dh
        xp.add(ds[a:a + bs, p:], dc_c[:bs], out=dc)
        dc += u
        # what flows into each gate: dc * g (i), dc * c_prev (f), dc * i (g), dh * tanh(c) (o)
        xp.multiply(dc, gg, out=d[:, :h])
        xp.multiply(dc, c_prev, out=d[:, h:2 * h])
        xp.multiply(dc, i, out=d[:, 2 * h:3 * h])
        xp.multiply(dh, tc, out=d[:, 3 * h:])
        d *= loc
        xp.multiply(dc, f, out=dc_c[:bs])
        dh_c[:bs] = kern.matmul(d, w_hh)
    need_x, need_wih, need_whh, need_b, need_whr = need
    dx = kern.matmul(dg, w_ih) if need_x else None
    dw_ih = kern.matmul(dg.T, x2) if need_wih else None
    dw_hh = kern.matmul(dg.T, hp) if need_whh else None
    db = kern.col_sums(dg) if need_b else None
    dw_hr = kern.matmul(dh_all.T, r_all) if need_whr and w_hr is not None else None
    return dx, dh_c, dc_c, dw_ih, dw_hh, db, dw_hr


def gru_forward(kern, x2, h0, w_ih, w_hh, b_ih, b_hh, steps: Steps):
    """(states [N, H]; gates [N, 4H]: r, z, n and W_hn h + b_hn, what backward needs)."""
    xp = kern.xp
    h = w_hh.shape[0] // 3
    xw = kern.matmul_bias(x2, w_ih.T, b_ih)
    whh_t = w_hh.T
    states = xp.empty((steps.n, h), x2.dtype)
    gates = xp.empty((steps.n, 4 * h), x2.dtype)
    for t in steps.order:
        a, bs = steps.offsets[t], steps.sizes[t]
        h_prev = steps.prev(t, states, h0, 0, h)
        gh = kern.matmul_bias(h_prev, whh_t, b_hh)
        g = gates[a:a + bs]
        rz = g[:, :2 * h]
        xp.add(xw[a:a + bs, :2 * h], gh[:, :2 * h], out=rz)
        rz *= 0.5
        xp.tanh(rz, out=rz)
        rz *= 0.5
        rz += 0.5
        ghn, n = g[:, 3 * h:], g[:, 2 * h:3 * h]
        ghn[...] = gh[:, 2 * h:]
        xp.multiply(g[:, :h], ghn, out=n)
        n += xw[a:a + bs, 2 * h:]
        xp.tanh(n, out=n)
        out = states[a:a + bs]
        xp.subtract(h_prev, n, out=out)
        out *= g[:, h:2 * h]
        out += n
    return states, gates


def gru_backward(kern, ds, x2, h0, w_ih, w_hh, states, gates, steps: Steps, need, scratch):
    """Gradients (x, h0, w_ih, w_hh, b_ih, b_hh) from ds [N, H]."""
    xp = kern.xp
    h = w_hh.shape[0] // 3
    dt = states.dtype
    dxw, dgh, hp = scratch
    dh_c = xp.zeros((steps.batch, h), dt)
    u_buf = xp.empty((steps.batch, h), dt)
    for t in reversed(steps.order):
        a, bs = steps.offsets[t], steps.sizes[t]
        g = gates[a:a + bs]
        r, z, n, ghn = g[:, :h], g[:, h:2 * h], g[:, 2 * h:3 * h], g[:, 3 * h:]
        h_prev = hp[a:a + bs]
        h_prev[...] = steps.prev(t, states, h0, 0, h)
        dh = ds[a:a + bs] + dh_c[:bs]
        dx_r, dx_z, dx_n = dxw[a:a + bs, :h], dxw[a:a + bs, h:2 * h], dxw[a:a + bs, 2 * h:]
        u = u_buf[:bs]
        # dZ = dh * (h_prev - n) * z * (1 - z)
        xp.subtract(h_prev, n, out=dx_z)
        dx_z *= dh
        xp.subtract(1.0, z, out=u)
        u *= z
        dx_z *= u
        # dN = dh * (1 - z) * (1 - n^2)
        xp.subtract(1.0, z, out=dx_n)
        dx_n *= dh
        xp.multiply(n, n, out=u)
        xp.subtract(1.0, u, out=u)
        dx_n *= u
        # dR = dN * ghn * r * (1 - r);  d(ghn) = dN * r
        xp.multiply(dx_n, ghn, out=dx_r)
        xp.subtract(1.0, r, out=u)
        u *= r
        dx_r *= u
        d = dgh[a:a + bs]
        d[:, :2 * h] = dxw[a:a + bs, :2 * h]
        xp.multiply(dx_n, r, out=d[:, 2 * h:])
        dh *= z
        dh += kern.matmul(d, w_hh)
        dh_c[:bs] = dh
    return kern.gru_input_and_weight_grads(dxw, dgh, x2, hp, w_ih, dh_c, need)



def rnn_forward(kern, x2, h0, w_ih, w_hh, bias, relu: bool, steps: Steps):
    """states [N, H]: h_t = act(x W_ih^T + h_{t-1} W_hh^T + b) per step."""
    xp = kern.xp
    h = w_hh.shape[0]
    states = kern.matmul_bias(x2, w_ih.T, bias)
    whh_t = w_hh.T
    for t in steps.order:
        a, bs = steps.offsets[t], steps.sizes[t]
        s = states[a:a + bs]
        kern.matmul_accumulate(steps.prev(t, states, h0, 0, h), whh_t, s)
        if relu:
            xp.maximum(s, 0, out=s)
        else:
            xp.tanh(s, out=s)
    return states


def rnn_backward(kern, ds, x2, h0, w_ih, w_hh, states, relu: bool, steps: Steps, need, scratch):
    """Gradients (x, h0, w_ih, w_hh, bias) from ds [N, H]."""
    xp = kern.xp
    h = w_hh.shape[0]
    dt = states.dtype
    dpre, hp = scratch
    dh_c = xp.zeros((steps.batch, h), dt)
    for t in reversed(steps.order):
        a, bs = steps.offsets[t], steps.sizes[t]
        hp[a:a + bs] = steps.prev(t, states, h0, 0, h)
        d = dpre[a:a + bs]
        xp.add(ds[a:a + bs], dh_c[:bs], out=d)
        y = states[a:a + bs]
        if relu:
            d *= y > 0
        else:
            d *= 1.0 - y * y
        dh_c[:bs] = kern.matmul(d, w_hh)
    need_x, need_wih, need_whh, need_b = need
    dx = kern.matmul(dpre, w_ih) if need_x else None
    dw_ih = kern.matmul(dpre.T, x2) if need_wih else None
    dw_hh = kern.matmul(dpre.T, hp) if need_whh else None
    db = kern.col_sums(dpre) if need_b else None
    return dx, dh_c, dw_ih, dw_hh, db
