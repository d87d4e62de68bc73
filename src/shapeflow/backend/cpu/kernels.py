"""Fused float32 kernels from backend/cpu/kernels.c, called through ctypes; None means "use NumPy".

The library is built with the package for the CPU that compiles it (setup.py: `pip install
-e .`, or `python setup.py build_ext --inplace` after editing kernels.c). It is used only when
it loaded, this CPU has every instruction set it was built for, it was built from the
kernels.c beside this file (where that file is present: a stale build is refused, not run),
and SHAPEFLOW_KERNELS is not "0". Each wrapper takes C-contiguous float32 arrays and returns
None for anything else, so every caller keeps its NumPy path.
"""

from __future__ import annotations

import ctypes
import os
from importlib.util import find_spec

import ml_dtypes
import numpy as np

F32 = _F32 = np.dtype(np.float32)
_P, _N, _F, _I = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_float, ctypes.c_int
_SIGNATURES = {
    "interp_times_f32": [_P] * 4 + [_N, _F, _F],
    "layer_norm_f32": [_P] * 6 + [_N, _N, _F, _I],
    "layer_norm_backward_f32": [_P] * 7 + [_N, _N],
    "adam_f32": [_P] * 5 + [_N] + [_F] * 6,
    "axpy_f32": [_P, _P, _N, _F],
    "softmax_rows_f32": [_P, _N, _N, _F, _N, _I],
    "softmax_backward_f32": [_P, _P, _P, _N, _N, _F],
    "cross_entropy_f32": [_P, _P, _P, _N, _N, ctypes.c_int64, _P, _P],
    "cross_entropy_backward_f32": [_P, _P, _P, _P, _N, _N, ctypes.c_int64, _F],
    # bfloat16 (the section at the end of this file)
    "bf16_simd": [_I],
    "f32_to_bf16": [_P, _P, _N],
    "bf16_to_f32": [_P, _P, _N],
    "interp_times_bf16": [_P] * 4 + [_N, _F, _F],
    "softmax_rows_bf16": [_P, _P, _N, _N, _I],
    "layer_norm_bf16": [_P] * 6 + [_N, _N, _F, _I],
    "col_sums_bf16": [_P, _P, _N, _N],
    "lstm_cell_f32": [_P, _P, _N, _P, _N, _P, _N, _N, _N],
    "lstm_cell_backward_f32": [_P, _P, _N, _P, _N, _P, _N, _P, _P, _N, _P, _P, _P, _N, _N],
    "gru_cell_f32": [_P, _N, _P, _P, _N, _P, _P, _N, _N, _N],
    "gru_cell_backward_f32": [_P, _P, _P, _N, _P, _P, _P, _N, _N],
    "batch_norm_f32": [_P] * 7 + [_N, _N, _N, _F],
    "batch_norm_backward_f32": [_P] * 8 + [_N, _N, _N, _I],
    "im2col_f32": [_P] * 3 + [_N] * 16,
    "col2im_f32": [_P] * 3 + [_N] * 16,
    "flash_softmax_lse_f32": [_P, _P, _N, _N, _F, _N, _N],
    "flash_online_f32": [_P] * 4 + [_N, _N, _F, _N, _N, _I],
    "flash_grad_f32": [_P] * 4 + [_N, _N, _F, _F, _N, _N],
}
_RESTYPES = {"cross_entropy_f32": _N, "cross_entropy_backward_f32": _N, "bf16_simd": _I,
             "softmax_rows_bf16": _N, "layer_norm_bf16": _I}
_state: dict = {"lib": None, "loaded": False, "enabled": True, "refused": None}
_SOURCE_FILE = os.path.join(os.path.dirname(__file__), "kernels.c")


def source_digest() -> str | None:
    """SHA-256 of the kernels.c beside this file and its family files (kernels_*.c, *.h),
    or None where it was not installed."""
    from .native import source_digest as digest  # here: native imports this module

    return digest(_SOURCE_FILE)


def address(a: np.ndarray) -> int:
    """The address of a's first element. ctypes.c_char.from_buffer takes ~0.26 us against
    ~0.77 for `a.ctypes.data`; it needs a writable C-ordered buffer, else the slow way."""
    try:
        if a.flags.c_contiguous:
            return ctypes.addressof(ctypes.c_char.from_buffer(a))
        if a.flags.f_contiguous:
            return ctypes.addressof(ctypes.c_char.from_buffer(a.T))
    except (TypeError, ValueError):  # read-only, or empty
        pass
    return a.ctypes.data


def _cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def _load():
    _state["loaded"] = True
    if os.environ.get("SHAPEFLOW_KERNELS", "") == "0":
        return None
    spec = find_spec("shapeflow.backend.cpu._kernels")  # found, not imported: it is plain C
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError:
        return None
    try:
        # read as data (no code of the library runs): what the compiler was allowed to use
        isa = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "shapeflow_isa")))
        built = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "shapeflow_source")))
        fns = [(getattr(lib, name), args, name) for name, args in _SIGNATURES.items()]
    except (ValueError, AttributeError):  # a library from an older kernels.c: rebuild it
        _state["refused"] = "built from an older kernels.c"
        return None
    digest = source_digest()
    if digest is not None and built.decode() != digest:  # same names, other semantics
        _state["refused"] = ("built from another kernels.c: rebuild it "
                             "(python setup.py build_ext --inplace)")
        return None
    flags = _cpu_flags()
    if flags is not None and not set(isa.decode().split()) <= flags:
        _state["refused"] = "built for instructions this CPU lacks"
        return None
    for fn, args, name in fns:
        fn.argtypes, fn.restype = args, _RESTYPES.get(name)
    _state["lib"] = lib
    return lib


def _lib():
    if not _state["enabled"]:
        return None
    return _state["lib"] if _state["loaded"] else _load()


def available() -> bool:
    """Whether the compiled kernels are in use."""
    return _lib() is not None


def set_enabled(flag: bool) -> bool:
    """Turn the compiled kernels on or off (tests compare both paths); returns the old flag."""
    old = _state["enabled"]
    _state["enabled"] = bool(flag)
    return old


def _ok(*arrays) -> bool:
    return all(a.dtype == _F32 and a.flags.c_contiguous for a in arrays)


def interp_times(x: np.ndarray, times: np.ndarray | None, pairs: np.ndarray, steps: float,
                 offset: float) -> np.ndarray | None:
    """(values[k] + slopes[k] * frac) * times at every element; pairs holds gelu_kernels'
    tables interleaved, (values[k], slopes[k]) for each k."""
    lib = _lib()
    if lib is None or not _ok(x, pairs) or (times is not None and (
            times.shape != x.shape or not _ok(times))):
        return None
    out = np.empty(x.shape, _F32)
    lib.interp_times_f32(address(x), None if times is None else address(times),
                         address(pairs), address(out), x.size, steps, offset)
    return out


def layer_norm(x2: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float,
               rms: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray] | None:
    """(out, mean [rows, 1] or None for rms, rstd [rows, 1]) of rows x2 [rows, n]."""
    lib = _lib()
    if lib is None or x2.ndim != 2 or not _ok(x2, *(a for a in (w, b) if a is not None)):
        return None
    rows, n = x2.shape
    if n == 0:
        return None
    out = np.empty((rows, n), _F32)
    mean = None if rms else np.empty((rows, 1), _F32)
    rstd = np.empty((rows, 1), _F32)
    lib.layer_norm_f32(address(x2), None if w is None else address(w),
                       None if b is None else address(b), address(out),
                       None if mean is None else address(mean), address(rstd),
                       rows, n, eps, int(rms))
    return out, mean, rstd


def layer_norm_backward(g2: np.ndarray, x2: np.ndarray, mean: np.ndarray | None,
                        rstd: np.ndarray, w: np.ndarray | None, with_dw: bool
                        ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(dx [rows, n], dw [n] in float64 or None) of layer norm over rows."""
    lib = _lib()
    arrays = [a for a in (g2, x2, mean, rstd, w) if a is not None]
    if lib is None or x2.ndim != 2 or g2.shape != x2.shape or not _ok(*arrays):
        return None
    rows, n = x2.shape
    if n == 0 or rstd.size != rows or (mean is not None and mean.size != rows):
        return None
    dx = np.empty((rows, n), _F32)
    dw = np.zeros(n, np.float64) if with_dw else None
    lib.layer_norm_backward_f32(address(g2), address(x2),
                                None if mean is None else address(mean), address(rstd),
                                None if w is None else address(w), address(dx),
                                None if dw is None else address(dw), rows, n)
    return dx, dw


def adam(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray,
         vmax: np.ndarray | None, scalars: tuple) -> bool:
    """One Adam update in place (optim/adam.py's scalars); False where NumPy must do it."""
    lib = _lib()
    arrays = (param, grad, m, v) if vmax is None else (param, grad, m, v, vmax)
    if lib is None or not _ok(*arrays) or any(a.shape != param.shape for a in arrays):
        return False
    lib.adam_f32(address(param), address(grad), address(m), address(v),
                 None if vmax is None else address(vmax), param.size, *scalars)
    return True


def axpy(y: np.ndarray, x: np.ndarray, alpha: float) -> bool:
    """y += x * alpha in place; False where NumPy must do it."""
    lib = _lib()
    if lib is None or x.shape != y.shape or not _ok(y, x):
        return False
    lib.axpy_f32(address(y), address(x), y.size, alpha)
    return True


def softmax_rows(x2: np.ndarray, scale: float, causal_period: int, zero_empty: bool) -> bool:
    """In place: rows of x2 <- softmax(x2 * scale), causal (j <= r % period) when period > 0."""
    lib = _lib()
    if lib is None or x2.ndim != 2 or x2.shape[1] == 0 or not _ok(x2):
        return False
    lib.softmax_rows_f32(address(x2), x2.shape[0], x2.shape[1], scale, causal_period,
                         int(zero_empty))
    return True


def softmax_backward(p2: np.ndarray, g2: np.ndarray, scale: float) -> np.ndarray | None:
    """scale * p * (g - rowsum(p * g)) over rows of [rows, n] arrays."""
    lib = _lib()
    if lib is None or p2.ndim != 2 or g2.shape != p2.shape or not _ok(p2, g2):
        return None
    dx = np.empty(p2.shape, _F32)
    lib.softmax_backward_f32(address(p2), address(g2), address(dx), p2.shape[0],
                             p2.shape[1], scale)
    return dx


_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)


def cross_entropy(x2: np.ndarray, t: np.ndarray, ignore_index: int
                  ) -> tuple[float, int, np.ndarray] | None:
    """(sum of per-row losses, rows not ignored, lse [rows] in float64) for class-index
    targets; ignored rows are not read (their lse is 0).

    None when not float32 [rows, C] with int64 targets, or when a target is out of range
    or a row not ignored holds inf or NaN: the NumPy path raises or handles those."""
    lib = _lib()
    if (lib is None or x2.ndim != 2 or t.shape != x2.shape[:1] or t.dtype != _I64
            or not t.flags.c_contiguous or not _ok(x2) or x2.shape[1] == 0):
        return None
    lse = np.empty(x2.shape[0], _F64)
    loss, count = ctypes.c_double(), ctypes.c_ssize_t()
    bad = lib.cross_entropy_f32(address(x2), address(t), address(lse), x2.shape[0],
                                x2.shape[1], ignore_index, ctypes.byref(loss),
                                ctypes.byref(count))
    return None if bad >= 0 else (loss.value, count.value, lse)


def cross_entropy_backward(x2: np.ndarray, t: np.ndarray, lse: np.ndarray, ignore_index: int,
                           scale: float) -> np.ndarray | None:
    """(softmax(x) - onehot(t)) * scale per row from lse (float64), zero rows where
    t == ignore_index; None where a row's lse is not finite (NumPy's path gives the NaN)."""
    lib = _lib()
    if (lib is None or x2.ndim != 2 or t.shape != x2.shape[:1] or t.dtype != _I64
            or not t.flags.c_contiguous or not _ok(x2) or lse.dtype != _F64
            or not lse.flags.c_contiguous or lse.size != x2.shape[0] or x2.shape[1] == 0):
        return None
    dx = np.empty(x2.shape, _F32)
    bad = lib.cross_entropy_backward_f32(address(x2), address(t), address(lse), address(dx),
                                         x2.shape[0], x2.shape[1], ignore_index, scale)
    return None if bad >= 0 else dx


# ---- bfloat16: C-contiguous ml_dtypes.bfloat16 arrays, computed in float32, rounded once --
BF16 = _BF16 = np.dtype(ml_dtypes.bfloat16)


def _ok16(*arrays) -> bool:
    return all(a.dtype == _BF16 and a.flags.c_contiguous for a in arrays)


def bf16_simd(enable: bool | None = None) -> bool:
    """Whether float32 -> bfloat16 rounding uses AVX512-BF16 (where the CPU has it); False
    turns it off (tests compare both paths), True back on, None only asks."""
    lib = _lib()
    if lib is None:
        return False
    return bool(lib.bf16_simd(-1 if enable is None else int(enable)))


def f32_to_bf16(x: np.ndarray) -> np.ndarray | None:
    """x (float32) rounded to bfloat16, nearest even, NaN kept (ml_dtypes' bits)."""
    lib = _lib()
    if lib is None or not _ok(x):
        return None
    out = np.empty(x.shape, _BF16)
    lib.f32_to_bf16(address(x), address(out), x.size)
    return out


def bf16_to_f32(x: np.ndarray) -> np.ndarray | None:
    """x (bfloat16) widened to float32 (exact)."""
    lib = _lib()
    if lib is None or not _ok16(x):
        return None
    out = np.empty(x.shape, _F32)
    lib.bf16_to_f32(address(x), address(out), x.size)
    return out


def col_sums_bf16(x: np.ndarray) -> np.ndarray | None:
    """The column sums of a 2-D bfloat16 array in float32 (accumulated in row order)."""
    lib = _lib()
    if lib is None or x.ndim != 2 or not _ok16(x):
        return None
    out = np.empty(x.shape[1], _F32)
    lib.col_sums_bf16(address(x), address(out), x.shape[0], x.shape[1])
    return out


_BINARY_BLOCK = 1 << 15  # elements per float32 block of bf16_binary: scratch stays in L2


def bf16_binary(fn, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """out[...] = fn(a, b) for bfloat16 a, b and out of one shape, computed in float32 and
    rounded once (ml_dtypes' bits), block by block: no whole float32 copy is made. out may
    be a view of a or b. False (nothing written) where the shapes or dtypes differ."""
    if not a.shape == b.shape == out.shape or out.ndim == 0 or not (
            a.dtype == b.dtype == out.dtype == _BF16):
        return False
    if a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous:
        a, b, out = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    step = max(1, _BINARY_BLOCK // max(out.size // max(out.shape[0], 1), 1))
    for i in range(0, out.shape[0], step):
        wa = widen(np.ascontiguousarray(a[i:i + step]))
        wb = widen(np.ascontiguousarray(b[i:i + step]))
        out[i:i + step] = narrow(np.asarray(fn(wa, wb, out=wa)), _BF16)
    return True


def iadd(dst: np.ndarray, src: np.ndarray) -> None:
    """dst += src in place; bfloat16 pairs of one shape in float32 blocks (ml_dtypes' += goes
    element by element: the same bits, ~3x slower)."""
    if not (dst.dtype == _BF16 and bf16_binary(np.add, dst, src, dst)):
        dst += src


def narrow(x32: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 -> bfloat16 or float16 (or any dtype), rounded to nearest even: the compiled
    kernel for bfloat16 where it is built, else NumPy's cast."""
    if dtype == _BF16:
        out = f32_to_bf16(x32)
        if out is not None:
            return out
    return x32.astype(dtype)


def widen(x: np.ndarray) -> np.ndarray:
    """A 16-bit float array as float32 (exact)."""
    if x.dtype == _BF16:
        out = bf16_to_f32(x)
        if out is not None:
            return out
    return x.astype(_F32)


def interp_times_bf16(x: np.ndarray, times: np.ndarray | None, pairs: np.ndarray,
                      steps: float, offset: float) -> np.ndarray | None:
    """interp_times for bfloat16 x (and times): the float32 kernel's values, rounded."""
    lib = _lib()
    if lib is None or not _ok16(x) or not _ok(pairs) or (times is not None and (
            times.shape != x.shape or not _ok16(times))):
        return None
    out = np.empty(x.shape, _BF16)
    lib.interp_times_bf16(address(x), None if times is None else address(times),
                          address(pairs), address(out), x.size, steps, offset)
    return out


def softmax_rows_bf16(x2: np.ndarray, log: bool) -> np.ndarray | None:
    """softmax (or log_softmax) of each row of bfloat16 x2 [rows, n], computed in float32;
    None where NumPy must do it (log_softmax of a row with inf or NaN)."""
    lib = _lib()
    if lib is None or x2.ndim != 2 or x2.shape[1] == 0 or not _ok16(x2):
        return None
    out = np.empty(x2.shape, _BF16)
    bad = lib.softmax_rows_bf16(address(x2), address(out), x2.shape[0], x2.shape[1],
                                int(log))
    return out if bad == -1 else None


def layer_norm_bf16(x2: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float,
                    rms: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray] | None:
    """layer_norm for bfloat16 rows x2 [rows, n] with float32 w, b: (out in bfloat16,
    mean [rows, 1] or None, rstd [rows, 1] in float32)."""
    lib = _lib()
    if lib is None or x2.ndim != 2 or x2.shape[1] == 0 or not _ok16(x2) \
            or not _ok(*(a for a in (w, b) if a is not None)):
        return None
    rows, n = x2.shape
    out = np.empty((rows, n), _BF16)
    mean = None if rms else np.empty((rows, 1), _F32)
    rstd = np.empty((rows, 1), _F32)
    if lib.layer_norm_bf16(address(x2), None if w is None else address(w),
                           None if b is None else address(b), address(out),
                           None if mean is None else address(mean), address(rstd), rows, n,
                           eps, int(rms)):
        return None
    return out, mean, rstd
class Cells:
    """The recurrent-cell kernels (kernels.c, "recurrent cells") as raw ctypes functions.

    They take addresses and row strides in elements, no arrays: the recurrent op's loop
    (backend/cpu/rnn_loops.py) checks its buffers once with `rows` and then calls these per
    step with offsets into them, which keeps each step's call to a few microseconds.
    """

    def __init__(self, lib) -> None:
        self.lstm = lib.lstm_cell_f32
        self.lstm_backward = lib.lstm_cell_backward_f32
        self.gru = lib.gru_cell_f32
        self.gru_backward = lib.gru_cell_backward_f32


def cells() -> Cells | None:
    """The recurrent-cell kernels, or None where the compiled library is not in use."""
    lib = _lib()
    return None if lib is None else Cells(lib)


def rows(a: np.ndarray) -> tuple[int, int] | None:
    """(address, row stride in elements) of a 2-D float32 array whose rows are contiguous
    and do not overlap; None for anything else."""
    if a.dtype != _F32 or a.ndim != 2:
        return None
    s0, s1 = a.strides
    n, m = a.shape
    if (s1 != 4 and m > 1) or s0 % 4 or (n > 1 and s0 < 4 * m):
        return None
    return a.ctypes.data, s0 // 4


def batch_norm(x3: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(out [N, C, L], mean [C], invstd [C], sum of squared deviations [C]) of batch norm
    with the batch's statistics over x3 [N, C, L]; None where NumPy must do it."""
    lib = _lib()
    if lib is None or x3.ndim != 3 or not _ok(x3, *(a for a in (w, b) if a is not None)):
        return None
    N, C, L = x3.shape
    if N * L == 0:
        return None
    out = np.empty(x3.shape, _F32)
    mean, invstd, sq = (np.empty(C, _F32) for _ in range(3))
    lib.batch_norm_f32(address(x3), None if w is None else address(w),
                       None if b is None else address(b), address(out), address(mean),
                       address(invstd), address(sq), N, C, L, eps)
    return out, mean, invstd, sq


def batch_norm_backward(g3: np.ndarray, x3: np.ndarray, mean: np.ndarray, invstd: np.ndarray,
                        w: np.ndarray | None, training: bool
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(dx [N, C, L], dw [C], db [C]) of batch norm; None where NumPy must do it."""
    lib = _lib()
    arrays = [a for a in (g3, x3, mean, invstd, w) if a is not None]
    if lib is None or x3.ndim != 3 or g3.shape != x3.shape or not _ok(*arrays):
        return None
    N, C, L = x3.shape
    if N * L == 0 or mean.size != C or invstd.size != C:
        return None
    dx = np.empty(x3.shape, _F32)
    dw, db = np.empty(C, _F32), np.empty(C, _F32)
    lib.batch_norm_backward_f32(address(g3), address(x3), address(mean), address(invstd),
                                None if w is None else address(w), address(dx), address(dw),
                                address(db), N, C, L, int(training))
    return dx, dw, db


def im2col(x: np.ndarray, pads, out_hw, kernel, stride, dilation) -> np.ndarray | None:
    """cols [N * oh * ow, kh * kw * C] (taps in (ki, kj, c) order) of x [N, C, H, W], zeros
    where a window reads padding; None where NumPy must do it."""
    lib = _lib()
    if lib is None or x.ndim != 4 or not _ok(x):
        return None
    N, C, H, W = x.shape
    (oh, ow), (kh, kw) = out_hw, kernel
    pt, pb, pl, pr = pads
    cols = np.empty((N * oh * ow, kh * kw * C), _F32)
    scratch = np.empty((H + pt + pb) * (W + pl + pr) * C, _F32)
    lib.im2col_f32(address(x), address(cols), address(scratch), N, C, H, W, pt, pb, pl, pr,
                   oh, ow, kh, kw, *stride, *dilation)
    return cols


def col2im(cols: np.ndarray, x_shape, pads, out_hw, kernel, stride, dilation
           ) -> np.ndarray | None:
    """The adjoint of im2col: dx [N, C, H, W] from cols [N * oh * ow, kh * kw * C]."""
    lib = _lib()
    N, C, H, W = x_shape
    (oh, ow), (kh, kw) = out_hw, kernel
    if lib is None or not _ok(cols) or cols.shape != (N * oh * ow, kh * kw * C):
        return None
    pt, pb, pl, pr = pads
    dx = np.empty((N, C, H, W), _F32)
    scratch = np.empty((H + pt + pb) * (W + pl + pr) * C, _F32)
    lib.col2im_f32(address(cols), address(dx), address(scratch), N, C, H, W, pt, pb, pl, pr,
                   oh, ow, kh, kw, *stride, *dilation)
    return dx
# ---- blockwise attention (the ladder's flash_* kernels): x, s, dp are [rows, n] blocks of scores;
# rows are query r % period of their block, causal when period > 0 (kernels.c says how)
def flash_softmax_lse(x2: np.ndarray, lse: np.ndarray, scale: float, period: int,
                      offset: int) -> bool:
    """In place: rows of x2 <- softmax(x2 * scale) (causal per period/offset), lse filled.
    Only for scale > 0: the kernel scales the row max instead of every entry first."""
    lib = _lib()
    if lib is None or not scale > 0 or x2.ndim != 2 or lse.size != x2.shape[0] or not _ok(x2, lse):
        return False
    lib.flash_softmax_lse_f32(address(x2), address(lse), x2.shape[0], x2.shape[1], scale,
                              period, offset)
    return True


def flash_online(x2: np.ndarray, m: np.ndarray, l: np.ndarray, fade: np.ndarray,
                 scale: float, period: int, offset: int, first: bool) -> bool:
    """One key panel of an online softmax, in place: x2 <- exp(x2 * scale - new max)
    (scale > 0, as flash_softmax_lse)."""
    lib = _lib()
    rows = x2.shape[0] if x2.ndim == 2 else -1
    if (lib is None or not scale > 0 or any(a.size != rows for a in (m, l, fade))
            or not _ok(x2, m, l, fade)):
        return False
    lib.flash_online_f32(address(x2), address(m), address(l), address(fade), rows,
                         x2.shape[1], scale, period, offset, int(first))
    return True


def flash_grad(s2: np.ndarray, dp2: np.ndarray, lse: np.ndarray, delta: np.ndarray,
               scale: float, ds_scale: float, period: int, offset: int) -> bool:
    """In place: s2 <- p = exp(s2 * scale - lse), dp2 <- p * (dp2 - delta) * ds_scale."""
    lib = _lib()
    rows = s2.shape[0] if s2.ndim == 2 else -1
    if (lib is None or dp2.shape != s2.shape or lse.size != rows or delta.size != rows
            or not _ok(s2, dp2, lse, delta)):
        return False
    lib.flash_grad_f32(address(s2), address(dp2), address(lse), address(delta), rows,
                       s2.shape[1], scale, ds_scale, period, offset)
    return True
