"""conv2d's three kernels (one group, float32/float64) as im2col + gemm over column blocks.

The columns of a block are whole images when an image's windows are small (ResNet's 4x4
maps: one gemm for many images) or a range of output rows of one image when they are large
(a 9x9 layer at 128x128 has 2592 x 16384 of them per image): each block fits in cache and
one buffer serves them all, so no pass writes or faults in a whole-batch im2col. A one-image
block's gemm reads and writes NCHW directly (strided operands, no transposes).
"""

from __future__ import annotations

import numpy as np

from ...backend.cpu import conv_kernels as ck
from ...backend.cpu import gemm

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# bytes of columns per block: big enough for an efficient gemm, small enough for L2/L3
BLOCK_BYTES = 1 << 21


def _geometry(spec, x_shape, kh: int, kw: int) -> tuple[ck.Geometry, int, int]:
    _, C, H, W = x_shape
    oh, ow = spec.out_hw(H, W, kh, kw)
    return ck.Geometry(C, H, W, spec.pads[0], spec.pads[2], ow, kh, kw, spec.stride,
                       spec.dilation), oh, ow


def _blocks(N: int, oh: int, ow: int, K: int, itemsize: int, budget: int | None = None):
    """(n0, n1, r0, r1) blocks covering images [0, N) x output rows [0, oh), and the largest
    block's column count (K values of `itemsize` bytes per column, `budget` bytes a block)."""
    L = oh * ow
    most = max(ow, (budget or BLOCK_BYTES) // max(K * itemsize, 1))
    if most >= L:  # whole images per block
        nb = max(1, min(N, most // max(L, 1)))
        nblk = -(-N // nb)
        nb = -(-N // nblk)  # even blocks
        return [(n, min(N, n + nb), 0, oh) for n in range(0, N, nb)], nb * L
    rows = max(1, most // ow)
    nchunks = -(-oh // rows)
    rows = -(-oh // nchunks)
    return [(n, n + 1, r, min(oh, r + rows)) for n in range(N) for r in range(0, oh, rows)], \
        rows * ow


def _cols(buf: np.ndarray, K: int, ncols: int) -> np.ndarray:
    return buf[:K * ncols].reshape(K, ncols)


def _g_block(g3: np.ndarray, n0: int, n1: int, r0: int, r1: int, ow: int) -> np.ndarray:
    """g's columns of a block as [O, ncols]: a strided view for one image, else a copy."""
    if n1 - n0 == 1:
        return g3[n0][:, r0 * ow:r1 * ow]
    O = g3.shape[1]
    return np.ascontiguousarray(g3[n0:n1].transpose(1, 0, 2)).reshape(O, -1)


def forward(spec, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """conv2d(x, w) + b: out [N, O, oh, ow]."""
    N = x.shape[0]
    O, C, kh, kw = w.shape
    geo, oh, ow = _geometry(spec, x.shape, kh, kw)
    L, K = oh * ow, C * kh * kw
    x = np.ascontiguousarray(x)
    w2 = np.ascontiguousarray(w).reshape(O, K)
    out = np.empty((N, O, oh, ow), x.dtype)
    o3 = out.reshape(N, O, L)
    blocks, most = _blocks(N, oh, ow, K, x.itemsize)
    buf = np.empty(K * most, x.dtype)
    for n0, n1, r0, r1 in blocks:
        cols = _cols(buf, K, (n1 - n0) * (r1 - r0) * ow)
        ck.im2col(x[n0:n1], cols, geo, r0, r1)
        if n1 - n0 == 1:
            ck.gemm_into(w2, cols, o3[n0][:, r0 * ow:r1 * ow], 0.0)
        else:
            o3[n0:n1] = gemm.matmul(w2, cols).reshape(O, n1 - n0, L).transpose(1, 0, 2)
    if b is not None:
        out += b.reshape(O, 1, 1)
    return out


def weight_grad(spec, w_shape, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """dw [O, C, kh, kw] = sum over blocks of g's columns @ im2col(x)^T."""
    N = x.shape[0]
    O, C, kh, kw = w_shape
    geo, oh, ow = _geometry(spec, x.shape, kh, kw)
    K = C * kh * kw
    x = np.ascontiguousarray(x)
    g3 = np.ascontiguousarray(g).reshape(N, O, oh * ow)
    dw = np.empty((O, K), x.dtype)
    blocks, most = _blocks(N, oh, ow, K, x.itemsize)
    buf = np.empty(K * most, x.dtype)
    for i, (n0, n1, r0, r1) in enumerate(blocks):
        cols = _cols(buf, K, (n1 - n0) * (r1 - r0) * ow)
        ck.im2col(x[n0:n1], cols, geo, r0, r1)
        ck.gemm_into(_g_block(g3, n0, n1, r0, r1, ow), cols.T, dw, 1.0 if i else 0.0)
    return dw.reshape(w_shape)


def input_grad(spec, x_shape, g: np.ndarray, w: np.ndarray) -> np.ndarray:
    """dx [N, C, H, W]: each block's columns w^T @ g, added back by col2im."""
    N = x_shape[0]
    O, C, kh, kw = w.shape
    geo, oh, ow = _geometry(spec, x_shape, kh, kw)
    K = C * kh * kw
    g3 = np.ascontiguousarray(g).reshape(N, O, oh * ow)
    wt = np.ascontiguousarray(w).reshape(O, K).T
    dx = np.zeros(x_shape, g.dtype)
    blocks, most = _blocks(N, oh, ow, K, g.itemsize)
    buf = np.empty(K * most, g.dtype)
    for n0, n1, r0, r1 in blocks:
        cols = _cols(buf, K, (n1 - n0) * (r1 - r0) * ow)
        ck.gemm_into(wt, _g_block(g3, n0, n1, r0, r1, ow), cols, 0.0)
        ck.col2im(cols, dx[n0:n1], geo, r0, r1)
    return dx
