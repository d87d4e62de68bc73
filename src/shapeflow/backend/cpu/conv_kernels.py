"""Convolution-family kernels from backend/cpu/conv_kernels.c through ctypes, each with NumPy's
version of the same steps: im2col/col2im over a block of output rows (NCHW, Caffe's order),
instance norm forward and backward, and a gemm that writes into a strided output; and the
Winograd F(2x2, 3x3) tile transforms (float32; without them conv2d takes im2col).

The library is used only when it loaded, was built from the conv_kernels.c beside this file,
for instructions this CPU has, and neither SHAPEFLOW_KERNELS nor SHAPEFLOW_CONV_KERNELS is
"0"; `set_enabled(False)` turns it off (tests compare both paths). float32 and float64 only.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from ..reference import ReferenceKernels
from ..reference.conv import ConvGeometry
from . import gemm, native
from .kernels import address

_P, _N, _D = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_double
_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_SIGNATURES = {
    "im2col": [_P, _P] + [_N] * 16,
    "col2im": [_P, _P] + [_N] * 16,
    "instance_norm": [_P] * 6 + [_N, _N, _N, _D],
    "instance_norm_backward": [_P] * 8 + [_N, _N, _N],
}
_F32_ONLY = {"winograd_input": [_P, _P] + [_N] * 10, "winograd_output": [_P, _P] + [_N] * 8,
             "winograd_output_grad": [_P, _P] + [_N] * 8}
_FILE = os.path.join(os.path.dirname(__file__), "conv_kernels.c")
_state: dict = {"lib": None, "loaded": False, "enabled": True, "refused": None}


def _load():
    _state["loaded"] = True
    signatures = {f"{name}_{sfx}": args for name, args in _SIGNATURES.items()
                  for sfx in ("f32", "f64")}
    signatures.update({f"{name}_f32": args for name, args in _F32_ONLY.items()})
    _state["lib"] = native.load("_conv_kernels", _FILE, "conv", signatures, _state,
                                switches=("SHAPEFLOW_KERNELS", "SHAPEFLOW_CONV_KERNELS"))
    return _state["lib"]


def _fn(name: str, *arrays):
    """The C function for these arrays' dtype, or None (NumPy must do it)."""
    if not _state["enabled"]:
        return None
    lib = _state["lib"] if _state["loaded"] else _load()
    sfx = _TYPES.get(arrays[0].dtype)
    if name in _F32_ONLY and sfx != "f32":
        return None
    if lib is None or sfx is None or any(a.dtype != arrays[0].dtype for a in arrays):
        return None
    return getattr(lib, f"{name}_{sfx}")


def available() -> bool:
    """Whether the compiled conv kernels are in use."""
    return _fn("im2col", np.empty(0, np.float32)) is not None


def set_enabled(flag: bool) -> bool:
    """Turn the compiled kernels on or off; returns the old flag."""
    old = _state["enabled"]
    _state["enabled"] = bool(flag)
    return old


Geometry = ConvGeometry  # one conv's window geometry (backend/reference/conv.py)
# the NumPy steps each compiled loop below falls back to (its own counts: the cpu table
# counts these calls itself)
_portable = ReferenceKernels(np, "numpy")


def im2col(x: np.ndarray, cols: np.ndarray, geo: Geometry, oy0: int, oy1: int) -> bool:
    """cols [C*kh*kw, nimg*(oy1-oy0)*ow] <- the windows of output rows [oy0, oy1) of the
    images x [nimg, C, H, W] (C-contiguous); zeros where a window reads padding. True when
    the compiled loop ran (False: NumPy's)."""
    nimg = x.shape[0]
    geo.check(x, cols, oy0, oy1)
    fn = _fn("im2col", x, cols)
    if fn is not None and x.flags.c_contiguous and cols.strides[1] == cols.itemsize:
        fn(address(x), address(cols), cols.strides[0] // cols.itemsize, nimg,
           *geo.args(oy0, oy1))
        return True
    _portable.im2col(x, cols, geo, oy0, oy1)
    return False


def col2im(cols: np.ndarray, dx: np.ndarray, geo: Geometry, oy0: int, oy1: int) -> bool:
    """The adjoint of im2col: dx [nimg, C, H, W] += each column entry at its input position
    (entries that read padding are dropped). True when the compiled loop ran."""
    nimg = dx.shape[0]
    geo.check(dx, cols, oy0, oy1)
    fn = _fn("col2im", cols, dx)
    if fn is not None and dx.flags.c_contiguous and cols.strides[1] == cols.itemsize:
        fn(address(cols), address(dx), cols.strides[0] // cols.itemsize, nimg,
           *geo.args(oy0, oy1))
        return True
    _portable.col2im(cols, dx, geo, oy0, oy1)
    return False


def gemm_into(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float) -> bool:
    """out <- a @ b + beta * out, for 2-D float operands that may be transposed or strided
    views (MKL's ld arguments: no copies); np.matmul where MKL is absent. True when MKL ran."""
    if not gemm._state["loaded"]:
        gemm._load()
    fn = gemm._GEMM.get(a.dtype) if _state.get("mkl", True) else None
    (m, k), n = a.shape, b.shape[1]
    if fn is not None and b.dtype == a.dtype == out.dtype and m * n * k:
        oa, ob, oo = gemm._operand(a), gemm._operand(b), gemm._operand(out)
        if oa is not None and ob is not None and oo is not None and oo[0] == gemm._NO_TRANS:
            gemm.threads.for_product(m * n * k)
            fn(gemm._ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, address(a), oa[1], address(b),
               ob[1], beta, address(out), oo[1])
            return True
    _portable.gemm_into(a, b, out, beta)
    return False


def instance_norm(x2: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, C: int,
                  eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out, mean, rstd) of the planes x2 [N*C, L] (plane r is channel r % C), the affine
    w, b [C] (or None) applied; mean and rstd are [N*C]."""
    rows, L = x2.shape
    out, mean, rstd = np.empty_like(x2), np.empty(rows, x2.dtype), np.empty(rows, x2.dtype)
    extra = [a for a in (w, b) if a is not None]
    fn = _fn("instance_norm", x2, *extra)
    if fn is not None and L and all(a.flags.c_contiguous for a in (x2, *extra)):
        fn(address(x2), None if w is None else address(w), None if b is None else address(b),
           address(out), address(mean), address(rstd), rows, C, L, eps)
        return out, mean, rstd
    return _portable.instance_norm(x2, w, b, C, eps)


def instance_norm_backward(g2: np.ndarray, x2: np.ndarray, mean: np.ndarray,
                           rstd: np.ndarray, w: np.ndarray | None, C: int, need_x: bool,
                           need_wb: bool):
    """(dx [N*C, L] or None, dw [C] or None, db [C] or None) of instance_norm; dw and db come
    out of the same pass over the planes, summed over the batch (float64 sums)."""
    rows, L = x2.shape
    dx = np.empty_like(x2) if need_x else None
    dw = np.zeros(C, np.float64) if need_wb else None
    db = np.zeros(C, np.float64) if need_wb else None
    arrays = [g2, x2, mean, rstd] + ([w] if w is not None else [])
    fn = _fn("instance_norm_backward", *arrays)
    if fn is not None and L and all(a.flags.c_contiguous for a in arrays):
        fn(address(g2), address(x2), address(mean), address(rstd),
           None if w is None else address(w), None if dx is None else address(dx),
           None if dw is None else address(dw), None if db is None else address(db), rows,
           C, L)
        return dx, dw, db
    return _portable.instance_norm_backward(g2, x2, mean, rstd, w, C, need_x, need_wb)


def _winograd(name: str, src: np.ndarray, dst: np.ndarray, ld: int, *args) -> bool:
    fn = _fn(name, src, dst)
    if fn is None or src.dtype != np.float32 or not src.flags.c_contiguous or \
            not dst.flags.c_contiguous:
        return False
    fn(address(src), address(dst), ld, *args)
    return True


def winograd_available() -> bool:
    """Whether the compiled Winograd transforms (float32) are in use."""
    return _fn("winograd_input", np.empty(0, np.float32)) is not None


def winograd_input(x: np.ndarray, V: np.ndarray, pt: int, pl: int, ty0: int, ty1: int,
                   tw: int) -> bool:
    """V [16, C, tiles] <- B^T d B of the 4x4 input tiles of images x [nimg, C, H, W]."""
    nimg, C, H, W = x.shape
    if V.shape != (16, C, nimg * (ty1 - ty0) * tw) or not 0 <= ty0 <= ty1:
        raise ValueError(f"winograd_input: V {V.shape} does not fit images {x.shape}")
    return _winograd("winograd_input", x, V, V.shape[-1], nimg, C, H, W, pt, pl, ty0, ty1,
                     tw)


def winograd_output(M: np.ndarray, out: np.ndarray, ty0: int, ty1: int, tw: int) -> bool:
    """out [nimg, O, oh, ow] tiles <- A^T M A (cropped), M [16, O, tiles]."""
    nimg, O, oh, ow = out.shape
    if M.shape != (16, O, nimg * (ty1 - ty0) * tw) or 2 * (ty1 - ty0) < oh - 2 * ty0 \
            or 2 * tw < ow:
        raise ValueError(f"winograd_output: M {M.shape} does not fit the output {out.shape}")
    return _winograd("winograd_output", M, out, M.shape[-1], nimg, O, oh, ow, ty0, ty1, tw)


def winograd_output_grad(g: np.ndarray, dM: np.ndarray, ty0: int, ty1: int, tw: int) -> bool:
    """dM [16, O, tiles] <- A dY A^T of the 2x2 gradient tiles of g [nimg, O, oh, ow]."""
    nimg, O, oh, ow = g.shape
    if dM.shape != (16, O, nimg * (ty1 - ty0) * tw) or not 0 <= ty0 <= ty1:
        raise ValueError(f"winograd_output_grad: dM {dM.shape} does not fit g {g.shape}")
    return _winograd("winograd_output_grad", g, dM, dM.shape[-1], nimg, O, oh, ow, ty0, ty1,
                     tw)
