"""The cpu device's kernel table: the whole MKL -> compiled C -> NumPy ladder, in one module.

Each kernel here tries the fastest path that applies (MKL's products, then the compiled C of
this folder, then NumPy through the portable kernels of `backend/reference/`) and counts
which one ran in `self.stats` ({(kernel, path): calls}), shown by `kernel_stats()` here,
`sf.backends.cpu.kernel_stats()` and `shapeflow --version --verbose`. Ops never choose a path:
they call `x.device.kernels.<kernel>(...)` and get a result, whichever path gave it.
"""

from __future__ import annotations

import numpy as np

from ..reference import ReferenceKernels
from ..reference import elementwise as _ew  # elementwise: gelu tables, out=
from ..reference.base import into as _into  # every kernel's out=
from ..reference.base import into_all as _into_all
from . import blas_sum as _blas_sum  # matmul: sums as products with ones
from . import conv_kernels as _ck  # conv: im2col, col2im, winograd
from . import gemm as _gemm  # conv, attention, rnn: their products
from . import kernels as _kernels  # optim: adam, axpy
from . import norm_act_kernels as _nak  # elementwise: silu
from . import rnn_cell_kernels as _rk  # rnn: nn.LSTMCell's step
from . import rnn_loops as _rnn_loops  # rnn: the compiled LSTM/GRU loops
from . import threads as _threads  # rnn: MKL's threads for the cell's products

_F32, _BF16 = np.dtype(np.float32), _kernels.BF16  # elementwise: compiled casts

_SUM_NUMPY = ("sum", "numpy")  # matmul: a hot key, built once


def _dense(g):
    """An upstream gradient made C-contiguous for a compiled backward: `y.sum().backward()`
    hands a broadcast one (zero strides), which the kernels decline; one copy is far cheaper
    than the NumPy path it would send the whole backward down."""
    return g if g.flags.c_contiguous else np.ascontiguousarray(g)


class CpuKernels(ReferenceKernels):
    """The host's kernels on NumPy arrays, each trying MKL, then compiled C, then NumPy."""

    path = "numpy"  # the portable kernels, run on NumPy, are this table's last rung

    def __init__(self) -> None:
        super().__init__(np, "cpu")

    # ---- elementwise: casts, bf16 arithmetic, gelu, interpolation ----------------------
    # The compiled C (kernels.c, norm_act_kernels.c) takes C-contiguous float32 (and
    # bfloat16 for casts and tables); anything else runs the portable kernels on NumPy.
    def cast(self, x, dtype, out=None):
        """x as `dtype`: float32 <-> bfloat16 in one compiled pass (ml_dtypes' bits; its
        cast is ~4x slower), else NumPy's astype."""
        if out is None:
            if dtype == _BF16 and x.dtype == _F32:
                r = _kernels.f32_to_bf16(x)
            elif dtype == _F32 and x.dtype == _BF16:
                r = _kernels.bf16_to_f32(x)
            else:
                r = None
            if r is not None:
                self.ran("cast", "compiled")
                return r
        return super().cast(x, dtype, out)

    def bf16_binary(self, name: str, a, b, out=None):
        """a `name` b for bfloat16 operands of one shape in float32 blocks through the
        compiled casts (the same bits as ml_dtypes' elementwise loop, ~3x faster)."""
        dst = np.empty(a.shape, a.dtype) if out is None else out
        if _kernels.bf16_binary(getattr(np, name), a, b, dst):
            self.ran("bf16_binary", "compiled")
            return dst
        return super().bf16_binary(name, a, b, out)

    def silu(self, x, out=None):
        """x * sigmoid(x) in one compiled pass for float32."""
        r = _nak.silu(x) if x.dtype == _F32 else None
        if r is None:
            return super().silu(x, out)
        self.ran("silu", "compiled")
        return _into(r, out)

    def silu_backward(self, g, x, out=None):
        """g * d silu(x) / dx in one compiled pass for float32."""
        r = _nak.silu_backward(g, x)
        if r is None:
            return super().silu_backward(g, x, out)
        self.ran("silu_backward", "compiled")
        return _into(r, out)

    def gelu_table(self, x, name: str, times=None, out=None):
        """GELU's table at x (times `times`) in one compiled pass, float32 or bfloat16."""
        pairs, steps, offset = self.gelu_pairs(name), float(_ew.STEPS), float(_ew.OFFSET)
        r = _kernels.interp_times(x, times, pairs, steps, offset)
        if r is None and x.dtype == _BF16:  # the float32 steps on widened values, rounded once
            r = _kernels.interp_times_bf16(x, times, pairs, steps, offset)
        if r is None:
            return super().gelu_table(x, name, times, out)
        self.ran("gelu_table", "compiled")
        return _into(r, out)

    # ---- matmul: products, batched and accumulating ------------------------------------
    # Which product runs: MKL's gemm through ctypes (gemm.py) for 2-D float32/float64
    # products of gemm.MIN_MACS multiply-adds or more, padded and in column blocks for a few
    # rows times a big weight ('mkl'); bf16gemm.c ('compiled') or MKL's 16-bit gemm ('mkl')
    # for bfloat16/float16, accumulating in float32; else NumPy ('numpy'). Sums run as
    # products with a ones vector (NumPy's BLAS gemv, 'blas') where that beats its reduction.
    MIN_MACS = _gemm.MIN_MACS  # below it no product goes to MKL (read by ops/linalg/matmul.py)

    def matmul(self, a, b, out=None):
        """a @ b, any rank >= 1 (batch dims broadcast). The matmul op runs its small 2-D
        float products (under MIN_MACS) as the array's .dot() without calling here."""
        return self._product("matmul", a, b, None, out)

    def matmul_bias(self, a, b, bias, out=None):
        """a @ b + bias (broadcast over rows; None: none): MKL starts from the bias (beta =
        1), as PyTorch's addmm; 16-bit floats add it in float32 and round once."""
        return self._product("matmul_bias", a, b, bias, out)

    def bmm(self, a, b, out=None):
        """a @ b batched (any rank, batch dims broadcast): np.matmul, 16-bit operands through
        the half path (no product reaches NumPy's 16-bit loops)."""
        if a.dtype in _gemm._HALF_GEMM and b.dtype == a.dtype:
            r, path = _gemm.half_product(a, b)
            self.stats["bmm", path] += 1
            return _into(r, out)
        self.stats["bmm", "numpy"] += 1
        return np.matmul(a, b, out=out)

    def _product(self, kernel: str, a, b, bias, out):
        """The product ladder of matmul and matmul_bias, counted under `kernel`."""
        found = _gemm.mkl_operands(a, b, bias)
        if found is None:
            dtype = a.dtype
            if dtype in _gemm._HALF_GEMM and b.dtype == dtype and (
                    bias is None or bias.dtype == dtype):
                r, path = _gemm.half_product(a, b, bias)
                self.stats[kernel, path] += 1
                return _into(r, out)
            self.stats[kernel, "numpy"] += 1
            return _gemm.numpy_matmul(a, b, bias, out)
        fn, oa, ob = found
        self.stats[kernel, "mkl"] += 1
        if _gemm.is_few_rows(a, b):
            return _into(_gemm.few_rows(fn, a, oa, ob, b, bias), out)
        if out is not None and not (out.flags.c_contiguous and out.dtype == a.dtype
                                    and out.shape == (a.shape[0], b.shape[1])):
            return _into(_gemm.mkl_matmul(fn, a, oa, b, ob, bias), out)
        return _gemm.mkl_matmul(fn, a, oa, b, ob, bias, out)

    def matmul_accumulate(self, a, b, out):
        """out += a @ b in place (2-D; out may be a row block of a bigger array): MKL's gemm
        with beta = 1 (no temporary), 16-bit floats summed in float32 and rounded once."""
        if _gemm.mkl_accumulate(a, b, out):
            self.stats["matmul_accumulate", "mkl"] += 1
        elif a.dtype in _gemm._HALF_GEMM and b.dtype == a.dtype:
            self.stats["matmul_accumulate", _gemm.half_accumulate(a, b, out)] += 1
        else:
            self.stats["matmul_accumulate", "numpy"] += 1
            out += a @ b
        return out

    def sum(self, x, axes: tuple, keepdims: bool = False, dtype=None, out=None):
        """x summed over `axes` (sorted) in `dtype` (None: x's): BLAS where some leading or
        trailing dims of a C-contiguous float array are summed, else NumPy."""
        if out is None and 0 < len(axes) < x.ndim and (dtype is None or x.dtype == dtype):
            r = _blas_sum.sum_over(x, axes, keepdims)
            if r is not None:
                self.stats["sum", "blas"] += 1
                return r
        self.stats[_SUM_NUMPY] += 1
        dt = x.dtype if dtype is None else dtype
        if dt.itemsize == 2 and dt.kind not in "biu":  # bfloat16/float16: a float32 sum
            r = np.asarray(np.sum(x, axis=axes, keepdims=keepdims, dtype=np.float32))
            return _into(r.astype(dt), out)
        return np.sum(x, axis=axes, keepdims=keepdims, dtype=dt, out=out)

    def row_sums(self, x2, out=None):
        """Sums of the rows of a 2-D float array [rows]: BLAS gemv, else NumPy."""
        ones = _blas_sum.ones_for(x2, 1)
        if ones is None:
            self.stats["row_sums", "numpy"] += 1
            return x2.sum(axis=1, out=out)
        self.stats["row_sums", "blas"] += 1
        return np.matmul(x2, ones, out=out)

    def col_sums(self, x2, out=None):
        """Sums of the columns of a 2-D float array [cols]: BLAS gemv, else NumPy."""
        ones = _blas_sum.ones_for(x2, 0)
        if ones is None:
            self.stats["col_sums", "numpy"] += 1
            return x2.sum(axis=0, out=out)
        self.stats["col_sums", "blas"] += 1
        return np.matmul(ones, x2, out=out)



    # ---- norm: layer, batch, instance, group, rms ----------------------------------------
    def layer_norm(self, x2, w, b, eps: float, rms: bool = False, out=None):
        """Layer (rms) norm of rows: one compiled pass per row (float32, or bfloat16 computed
        in float32 and rounded once), else NumPy's blocked rows."""
        fused = _kernels.layer_norm(x2, w, b, eps, rms)
        if fused is None and x2.dtype == _kernels.BF16:
            fused = _kernels.layer_norm_bf16(x2, w, b, eps, rms)
        if fused is None:
            return super().layer_norm(x2, w, b, eps, rms, out)
        self.ran("rms_norm" if rms else "layer_norm", "compiled")
        return _into_all(fused, out)

    def layer_norm_backward(self, g2, x2, mean, rstd, w, with_dw: bool = False, out=None):
        """dx (and dw) of layer norm: two compiled passes per row (float32), else NumPy's."""
        fused = _kernels.layer_norm_backward(_dense(g2), x2, mean, rstd, w, with_dw)
        if fused is None:
            return super().layer_norm_backward(g2, x2, mean, rstd, w, with_dw, out)
        self.ran("layer_norm_backward", "compiled")
        dx, dw = fused  # dw summed in float64
        return _into_all((dx, None if dw is None else dw.astype(x2.dtype)), out)

    def batch_norm(self, x3, w, b, eps: float, running=None, out=None):
        """Batch norm with the batch's statistics in three compiled passes (float32), else
        (and with running statistics) NumPy's."""
        fused = None if running is not None else _kernels.batch_norm(x3, w, b, eps)
        if fused is None:
            return super().batch_norm(x3, w, b, eps, running, out)
        self.ran("batch_norm", "compiled")
        return _into_all(fused, out)

    def batch_norm_backward(self, g3, x3, mean, invstd, w, training: bool, out=None):
        """dx, dw, db of batch norm: sums, then dx, in two compiled passes (float32)."""
        fused = _kernels.batch_norm_backward(_dense(g3), x3, mean, invstd, w, training)
        if fused is None:
            return super().batch_norm_backward(g3, x3, mean, invstd, w, training, out)
        self.ran("batch_norm_backward", "compiled")
        return _into_all(fused, out)

    def instance_norm(self, x2, w, b, C: int, eps: float, out=None):
        """Instance norm of planes with the affine in one compiled pass (conv_kernels.c)."""
        extra = [a for a in (w, b) if a is not None]
        if not (x2.shape[1] and _ck._fn("instance_norm", x2, *extra) is not None
                and all(a.flags.c_contiguous for a in (x2, *extra))):
            return super().instance_norm(x2, w, b, C, eps, out)
        self.ran("instance_norm", "compiled")
        return _into_all(_ck.instance_norm(x2, w, b, C, eps), out)

    def instance_norm_backward(self, g2, x2, mean, rstd, w, C: int, need_x: bool,
                               need_wb: bool, out=None):
        """dx, dw, db of instance norm in one compiled pass over the planes."""
        arrays = [g2, x2, mean, rstd] + ([w] if w is not None else [])
        if not (x2.shape[1] and _ck._fn("instance_norm_backward", *arrays) is not None
                and all(a.flags.c_contiguous for a in arrays)):
            return super().instance_norm_backward(g2, x2, mean, rstd, w, C, need_x, need_wb,
                                                  out)
        self.ran("instance_norm_backward", "compiled")
        return _into_all(_ck.instance_norm_backward(g2, x2, mean, rstd, w, C, need_x,
                                                    need_wb), out)

    # ---- softmax -------------------------------------------------------------------------
    def softmax(self, x, axis: int, log: bool = False, out=None):
        """softmax (log_softmax): bfloat16 rows in one compiled pass (float32 inside, one
        rounding, as PyTorch), else NumPy's blocked rows."""
        x1, ax = (x.reshape(1), 0) if x.ndim == 0 else (x, axis)
        if (x1.dtype == _kernels.BF16 and ax == x1.ndim - 1 and x1.size
                and x1.flags.c_contiguous):
            y = _kernels.softmax_rows_bf16(x1.reshape(-1, x1.shape[-1]), log)
            if y is not None:
                self.ran("log_softmax" if log else "softmax", "compiled")
                return _into(y.reshape(x.shape), out)
        return super().softmax(x, axis, log, out)

    def softmax_rows(self, x2, scale: float = 1.0, causal_period: int = 0,
                     zero_empty: bool = False):
        """In place: scale, causal mask and softmax of float32 rows in one compiled pass."""
        if x2.size and _kernels.softmax_rows(x2, scale, causal_period, zero_empty):
            self.ran("softmax_rows", "compiled")
            return x2
        return super().softmax_rows(x2, scale, causal_period, zero_empty)

    def softmax_backward(self, p, g, axis: int, scale: float = 1.0, mask=None, out=None):
        """softmax's backward over the last axis without a mask: one compiled pass per row,
        twice (float32)."""
        n = p.shape[axis] if p.ndim else 0
        if mask is None and axis == p.ndim - 1 and n:
            dx = _kernels.softmax_backward(p.reshape(-1, n), g.reshape(-1, n), scale)
            if dx is not None:
                self.ran("softmax_backward", "compiled")
                return _into(dx.reshape(p.shape), out)
        return super().softmax_backward(p, g, axis, scale, mask, out)

    # ---- loss: cross entropy and friends -------------------------------------------------
    def cross_entropy(self, x, t, w, ignore_index: int, reduction: str,
                      label_smoothing: float = 0.0, prob: bool = False, with_lse: bool = True,
                      out=None):
        """Cross entropy of float32 logits [N, C] with int64 class indices, reduced, in one
        compiled pass (it declines a target out of range or a row with inf or NaN)."""
        if (w is None and not prob and not label_smoothing and x.ndim == 2
                and reduction != "none"):
            done = _kernels.cross_entropy(x, t, ignore_index)
            if done is not None:
                self.ran("cross_entropy", "compiled")
                total, count, lse = done
                if reduction == "mean":
                    total = total / count if count else float("nan")
                return _into(np.asarray(total, x.dtype), out), lse
        return super().cross_entropy(x, t, w, ignore_index, reduction, label_smoothing, prob,
                                     with_lse, out)

    def cross_entropy_backward(self, x, t, lse, g, w, ignore_index: int, reduction: str,
                               label_smoothing: float = 0.0, prob: bool = False, out=None):
        """The compiled pass for the forward's compiled case (a scalar upstream gradient)."""
        if (w is None and not prob and not label_smoothing and x.ndim == 2
                and reduction != "none" and g.size == 1):
            scale = float(g.reshape(()))
            if reduction == "mean":
                scale /= max(1, int(np.count_nonzero(t != ignore_index)))
            dx = _kernels.cross_entropy_backward(x, t, lse, ignore_index, scale)
            if dx is not None:
                self.ran("cross_entropy_backward", "compiled")
                return _into(dx, out)
        return super().cross_entropy_backward(x, t, lse, g, w, ignore_index, reduction,
                                              label_smoothing, prob, out)

    def bias_grad(self, g2, out=None):
        """Column sums: bfloat16 in one compiled float32 pass (rows in order), rounded once."""
        if g2.dtype == _kernels.BF16:
            sums = _kernels.col_sums_bf16(g2)
            if sums is not None:
                self.ran("bias_grad", "compiled")
                return _into(_kernels.narrow(sums, g2.dtype), out)
        return super().bias_grad(g2, out)

    def embedding_backward(self, flat, rows, num: int, out=None):
        """NumPy's rung: np.add.at, or (indices repeating) a stable sort and one reduceat
        per run, ~5x faster than add.at there."""
        self.ran("embedding_backward", "numpy")
        dw = np.zeros((num, rows.shape[1]), rows.dtype)
        if len(flat) <= num:
            np.add.at(dw, flat, rows)
            return _into(dw, out)
        order = np.argsort(flat, kind="stable")  # stable: each run sums in the original order
        sorted_idx = flat[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
        dw[sorted_idx[starts]] = np.add.reduceat(rows[order], starts, axis=0)
        return _into(dw, out)

    # ---- conv: im2col, col2im, winograd, pools -------------------------------------------
    def conv2d_input_grad_col2im(self, g, w, x_shape, stride, pads, dilation, groups: int,
                                 out=None):
        """dx of a strided conv2d: one gemm to channels-last columns and the compiled col2im
        (float32, one group: the strided scatter-adds are the slow part at small images),
        else NumPy's col2im (the reference). conv2d_im2col and conv2d_weight_grad_im2col
        are the reference's: NumPy's window copies, the table's products."""
        if groups == 1 and g.dtype == w.dtype == np.float32 and _kernels.available():
            O, Cg, kh, kw = w.shape
            N, _, oh, ow = g.shape
            g2 = np.ascontiguousarray(g.reshape(N, O, oh * ow).transpose(0, 2, 1))
            w2 = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(O, kh * kw * Cg)
            dx = _kernels.col2im(self.matmul(g2.reshape(N * oh * ow, O), w2), x_shape, pads,
                                 (oh, ow), (kh, kw), stride, dilation)
            if dx is not None:
                self.ran("conv2d_input_grad_col2im", "compiled")
                return _into(dx, out)
        return super().conv2d_input_grad_col2im(g, w, x_shape, stride, pads, dilation, groups,
                                                out)

    def im2col(self, x, cols, geo, oy0: int, oy1: int):
        """A block's columns: conv_kernels.c's loop, else NumPy's slices (the same steps)."""
        self.ran("im2col", "compiled" if _ck.im2col(x, cols, geo, oy0, oy1) else "numpy")
        return cols

    def col2im(self, cols, dx, geo, oy0: int, oy1: int):
        """A block's columns added back into dx: conv_kernels.c's loop, else NumPy's."""
        self.ran("col2im", "compiled" if _ck.col2im(cols, dx, geo, oy0, oy1) else "numpy")
        return dx

    def gemm_into(self, a, b, out, beta: float):
        """out <- a @ b + beta * out: MKL with strided operands (no copies), else NumPy."""
        self.ran("gemm_into", "mkl" if _ck.gemm_into(a, b, out, beta) else "numpy")
        return out

    def strided_view(self, x, shape, strides):
        """NumPy's array constructor over x's buffer: ~20x cheaper a call than as_strided,
        which a small convolution's im2col pays once per call."""
        return np.ndarray(shape, x.dtype, x, 0, strides)

    def winograd_available(self) -> bool:
        return _ck.winograd_available()

    def winograd_input(self, x, V, pt: int, pl: int, ty0: int, ty1: int, tw: int):
        _winograd("winograd_input", _ck.winograd_input(x, V, pt, pl, ty0, ty1, tw))
        self.ran("winograd_input", "compiled")
        return V

    def winograd_output(self, M, out, ty0: int, ty1: int, tw: int):
        _winograd("winograd_output", _ck.winograd_output(M, out, ty0, ty1, tw))
        self.ran("winograd_output", "compiled")
        return out

    def winograd_output_grad(self, g, dM, ty0: int, ty1: int, tw: int):
        _winograd("winograd_output_grad", _ck.winograd_output_grad(g, dM, ty0, ty1, tw))
        self.ran("winograd_output_grad", "compiled")
        return dM


    # ---- attention: flash blocks ---------------------------------------------------------
    # The compiled passes (kernels.c) take float32 blocks with contiguous rows; a query row
    # r of a causal block is query r % period (period: the block's rows).
    def flash_softmax_lse(self, s, scale: float, causal: int | None, out=None):
        """The only key panel of a block: softmax and its row logsumexp (into `out` when
        given) in one compiled pass, else NumPy's passes."""
        n = s.shape[-1]
        lse = np.empty(s.shape[:-1], np.float64 if s.dtype == np.float64 else np.float32) \
            if out is None else out
        if _kernels.flash_softmax_lse(s.reshape(-1, n), lse, scale, *_period(s, causal)):
            self.ran("flash_softmax_lse", "compiled")
            return lse
        return super().flash_softmax_lse(s, scale, causal, out)

    def flash_online(self, s, m, l, scale: float, causal: int | None, first: bool,
                     out=None):
        """One key panel of an online softmax: one compiled pass, else NumPy's; the fade
        factor into `out` when given."""
        n = s.shape[-1]
        fade = np.empty(m.shape, m.dtype) if out is None else out
        if _kernels.flash_online(s.reshape(-1, n), m, l, fade, scale, *_period(s, causal),
                                 first):
            self.ran("flash_online", "compiled")
            return fade
        return super().flash_online(s, m, l, scale, causal, first, out)

    def flash_grad(self, s, dp, lse, delta, scale: float, ds_scale: float,
                   causal: int | None):
        """A block's probabilities and dS in one compiled pass, else NumPy's; lse and delta
        are made contiguous here (a broadcast gradient gives strided ones)."""
        n = s.shape[-1]
        lse, delta = np.ascontiguousarray(lse), np.ascontiguousarray(delta)
        if _kernels.flash_grad(s.reshape(-1, n), dp.reshape(-1, n), lse, delta, scale,
                               ds_scale, *_period(s, causal)):
            self.ran("flash_grad", "compiled")
            return s, dp
        return super().flash_grad(s, dp, lse, delta, scale, ds_scale, causal)

    def attention_widen(self, x, work, out=None):
        """bfloat16 widened in one compiled pass (NumPy's cast goes through ml_dtypes one
        element at a time), else NumPy's cast."""
        if x.dtype == _kernels.BF16:
            r = _kernels.bf16_to_f32(np.ascontiguousarray(x))
            if r is not None:
                self.ran("attention_widen", "compiled")
                return _into(r, out)
        self.ran("attention_widen", "numpy")
        return super().attention_widen(x, work, out)

    def attention_narrow(self, x32, dtype, out=None):
        """float32 -> bfloat16 rounded in one compiled pass, else NumPy's cast."""
        if dtype == _kernels.BF16:
            r = _kernels.f32_to_bf16(x32)
            if r is not None:
                self.ran("attention_narrow", "compiled")
                return _into(r, out)
        self.ran("attention_narrow", "numpy")
        return super().attention_narrow(x32, dtype, out)


    # ---- rnn: cells -----------------------------------------------------------------------
    def rnn_cells(self, dtype):
        """The compiled LSTM/GRU loops (rnn_loops.py) for float32 where kernels.c is in
        use, else None (the op's NumPy loops)."""
        if dtype != np.float32:
            return None
        cells = _kernels.cells()
        return None if cells is None else _rnn_loops.CompiledLoops(self, cells)

    def lstm_cell(self, x, h, c, w_ih, w_hh, b_ih, b_hh, gates, out):
        """nn.LSTMCell's step in one rnn_cell_kernels.c call (its products by MKL's gemm
        inside, or NumPy's before it), else NumPy's passes."""
        x2, ldx = _rnn_loops.cell_rows(x)
        batch, feat = x2.shape
        hid = w_hh.shape[1]
        h, c = np.ascontiguousarray(h), np.ascontiguousarray(c)
        w_ih, w_hh = np.ascontiguousarray(w_ih), np.ascontiguousarray(w_hh)
        if b_ih is not None:
            b_ih, b_hh = np.ascontiguousarray(b_ih), np.ascontiguousarray(b_hh)
        k = _rk.step(x.dtype)
        if k is None:
            return super().lstm_cell(x2, h, c, w_ih, w_hh, b_ih, b_hh, gates, out)
        if k.gemm is None:  # NumPy's products, the kernel's pointwise part
            self._lstm_pre_activations(x2, h.reshape(batch, hid), w_ih, w_hh, b_ih, b_hh,
                                       gates)
        else:  # MKL's thread count for products of this size, as gemm.py sets it
            _threads.for_product(batch * 4 * hid * (feat + hid))
        a = _kernels.address
        k.forward(k.gemm, a(x2), ldx, feat, a(h), a(c), a(w_ih), a(w_hh),
                  None if b_ih is None else a(b_ih), None if b_hh is None else a(b_hh),
                  a(gates), a(out), batch, hid)
        self.ran("lstm_cell", "compiled")
        return out

    def lstm_cell_backward(self, d, gates, c, cn, x, h, w_ih, w_hh, feat: int, dg, grads):
        """nn.LSTMCell's step backward in one rnn_cell_kernels.c call (products inside with
        MKL, or NumPy's after it), else NumPy's passes."""
        batch, g4 = gates.shape
        hid = g4 // 4
        d, c = np.ascontiguousarray(d), np.ascontiguousarray(c)
        x2, ldx = _rnn_loops.cell_rows(x) if x is not None else (None, 0)
        h = None if h is None else np.ascontiguousarray(h)
        w_ih = None if w_ih is None else np.ascontiguousarray(w_ih)
        w_hh = None if w_hh is None else np.ascontiguousarray(w_hh)
        k = _rk.step(gates.dtype)
        if k is None:
            return super().lstm_cell_backward(d, gates, c, cn, x2, h, w_ih, w_hh, feat, dg,
                                              grads)
        if k.gemm is not None:
            _threads.for_product(batch * g4 * (feat + hid))
        a = _kernels.address

        def addr(t):
            return None if t is None else a(t)

        dx, dh, dc, dw_ih, dw_hh, db_ih, db_hh = grads
        k.backward(k.gemm, a(d), a(gates), a(c), a(cn), addr(x2), ldx, feat, addr(h),
                   addr(w_ih), addr(w_hh), a(dg), addr(dx), addr(dh), addr(dc), addr(dw_ih),
                   addr(dw_hh), addr(db_ih), addr(db_hh), batch, hid)
        self.ran("lstm_cell_backward", "compiled")
        if k.gemm is None:  # the products (and the bias sum) in NumPy
            self._lstm_cell_products(dg, x2, h, w_ih, w_hh, grads)
        return grads


    # ---- optim: updates, in-place accumulation -------------------------------------------
    def axpy(self, y, x, alpha: float) -> None:
        """y += alpha * x in place: the compiled float32 pass, else NumPy in chunks."""
        if _kernels.axpy(y, x, alpha):
            self.ran("axpy", "compiled")
            return
        self.ran("axpy", "numpy")
        super().axpy(y, x, alpha)

    def adam(self, param, grad, m, v, vmax, scalars: tuple) -> None:
        """One Adam update in place: one compiled float32 pass, else NumPy in chunks."""
        if _kernels.adam(param, grad, m, v, vmax, scalars):
            self.ran("adam", "compiled")
            return
        self.ran("adam", "numpy")
        super().adam(param, grad, m, v, vmax, scalars)

    def iadd(self, dst, src):
        """dst += src in place: bfloat16 pairs in float32 blocks (the same bits as ml_dtypes'
        element-by-element sums, ~3x faster), else NumPy's +=."""
        if dst.dtype == _kernels.BF16 and _kernels.bf16_binary(np.add, dst, src, dst):
            self.ran("iadd", "compiled")
            return dst
        self.stats["iadd", "numpy"] += 1  # `ran` inlined, and the reference rung below:
        dst += src  # this runs per leaf in every backward
        return dst



def _period(s, causal: int | None) -> tuple[int, int]:
    """(period, offset) of the compiled flash passes: row r is query r % period of the
    block (attention)."""
    return (0, 0) if causal is None else (s.shape[-2], causal)


def _winograd(name: str, ran: bool) -> None:
    """Winograd's transforms run only where winograd_available() said they would."""
    if not ran:
        raise RuntimeError(f"{name}: the compiled Winograd transforms did not run")


table = CpuKernels()


def kernel_stats() -> dict[tuple[str, str], int]:
    """{(kernel, path): calls} since the start or the last reset, path one of 'mkl',
    'compiled', 'numpy'."""
    return dict(table.stats)


def reset_kernel_stats() -> None:
    table.stats.clear()

__all__ = ["CpuKernels", "kernel_stats", "reset_kernel_stats", "table"]
