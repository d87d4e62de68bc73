"""The LSTM and GRU time loops with compiled cell kernels: per step one gemm and one pass
over the step's rows, forward and backward.

`cells` is what the device's kernel table gives for the dtype (`kernels.rnn_cells(dtype)`:
on the cpu backend/cpu/rnn_loops.py's loops for float32, with the same layout, gemms and
saved buffers as recurrent_steps.py's; None where a table has none, and the op runs
recurrent_steps.py's loops). The recurrent op calls them through this module.
"""

from __future__ import annotations


def lstm_forward(x2, h0, c0, w_ih, w_hh, bias, w_hr, steps, cells):
    """(states [N, P + H]: h then c per row; activated gates [N, 4H]: i, f, g, o)."""
    return cells.lstm_forward(x2, h0, c0, w_ih, w_hh, bias, w_hr, steps)


def lstm_backward(ds, x2, h0, c0, w_ih, w_hh, w_hr, states, gates, steps, need, scratch,
                  cells):
    """Gradients (x, h0, c0, w_ih, w_hh, bias, w_hr) from ds [N, P + H]."""
    return cells.lstm_backward(ds, x2, h0, c0, w_ih, w_hh, w_hr, states, gates, steps, need,
                               scratch)


def gru_forward(x2, h0, w_ih, w_hh, b_ih, b_hh, steps, cells):
    """(states [N, H]; gates [N, 4H]: r, z, n and W_hn h + b_hn, what backward needs)."""
    return cells.gru_forward(x2, h0, w_ih, w_hh, b_ih, b_hh, steps)


def gru_backward(ds, x2, h0, w_ih, w_hh, states, gates, steps, need, scratch, cells):
    """Gradients (x, h0, w_ih, w_hh, b_ih, b_hh) from ds [N, H]."""
    return cells.gru_backward(ds, x2, h0, w_ih, w_hh, states, gates, steps, need, scratch)
