"""conv2d's three kernels (one group, float32/float64) as im2col + gemm over column blocks.

The columns of a block are whole images when an image's windows are small (ResNet's 4x4
maps: one gemm for many images) or a range of output rows of one image when they are large
(a 9x9 layer at 128x128 has 2592 x 16384 of them per image): each block fits in cache and
one buffer serves them all, so no pass writes or faults in a whole-batch im2col. A one-image
block's gemm reads and writes NCHW directly (strided operands, no transposes). The columns
and gemms are the kernel table's (`kern`: im2col, col2im, gemm_into).
"""

from __future__ import annotations

from ... import dtypes as _dt

DTYPES = (_dt.float32.np, _dt.float64.np)
# bytes of columns per block: big enough for an efficient gemm, small enough for L2/L3
BLOCK_BYTES = 1 << 21


def _geometry(kern, spec, x_shape, kh: int, kw: int) -> tuple:
    _, C, H, W = x_shape
    oh, ow = spec.out_hw(H, W, kh, kw)
    return kern.conv_geometry(C, H, W, spec.pads[0], spec.pads[2], ow, kh, kw, spec.stride,
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


def _cols(buf, K: int, ncols: int):
    return buf[:K * ncols].reshape(K, ncols)


def _g_block(xp, g3, n0: int, n1: int, r0: int, r1: int, ow: int):
    """g's columns of a block as [O, ncols]: a strided view for one image, else a copy."""
    if n1 - n0 == 1:
        return g3[n0][:, r0 * ow:r1 * ow]
    O = g3.shape[1]
    return xp.ascontiguousarray(g3[n0:n1].transpose(1, 0, 2)).reshape(O, -1)


def forward(kern, spec, x, w, b):
    """conv2d(x, w) + b: out [N, O, oh, ow]."""
    xp = kern.xp
    N = x.shape[0]
    O, C, kh, kw = w.shape
    geo, oh, ow = _geometry(kern, spec, x.shape, kh, kw)
    L, K = oh * ow, C * kh * kw
    x = xp.ascontiguousarray(x)
    w2 = xp.ascontiguousarray(w).reshape(O, K)
    out = xp.empty((N, O, oh, ow), x.dtype)
    o3 = out.reshape(N, O, L)
    blocks, most = _blocks(N, oh, ow, K, x.itemsize)
    buf = xp.empty(K * most, x.dtype)
    for n0, n1, r0, r1 in blocks:
        cols = _cols(buf, K, (n1 - n0) * (r1 - r0) * ow)
        kern.im2col(x[n0:n1], cols, geo, r0, r1)
        if n1 - n0 == 1:
            kern.gemm_into(w2, cols, o3[n0][:, r0 * ow:r1 * ow], 0.0)
        else:
            o3[n0:n1] = kern.matmul(w2, cols).reshape(O, n1 - n0, L).transpose(1, 0, 2)
    if b is not None:
        out += b.reshape(O, 1, 1)
    return out


def weight_grad(kern, spec, w_shape, x, g):
    """dw [O, C, kh, kw] = sum over blocks of g's columns @ im2col(x)^T."""
    xp = kern.xp
    N = x.shape[0]
    O, C, kh, kw = w_shape
    geo, oh, ow = _geometry(kern, spec, x.shape, kh, kw)
    K = C * kh * kw
    x = xp.ascontiguousarray(x)
    g3 = xp.ascontiguousarray(g).reshape(N, O, oh * ow)
    dw = xp.empty((O, K), x.dtype)
    blocks, most = _blocks(N, oh, ow, K, x.itemsize)
    buf = xp.empty(K * most, x.dtype)
    for i, (n0, n1, r0, r1) in enumerate(blocks):
        cols = _cols(buf, K, (n1 - n0) * (r1 - r0) * ow)
        kern.im2col(x[n0:n1], cols, geo, r0, r1)
        kern.gemm_into(_g_block(xp, g3, n0, n1, r0, r1, ow), cols.T, dw, 1.0 if i else 0.0)
    return dw.reshape(w_shape)


def input_grad(kern, spec, x_shape, g, w):
    """dx [N, C, H, W]: each block's columns w^T @ g, added back by col2im."""
    xp = kern.xp
    N = x_shape[0]
    O, C, kh, kw = w.shape
    geo, oh, ow = _geometry(kern, spec, x_shape, kh, kw)
    K = C * kh * kw
    g3 = xp.ascontiguousarray(g).reshape(N, O, oh * ow)
    wt = xp.ascontiguousarray(w).reshape(O, K).T
    dx = xp.zeros(x_shape, g.dtype)
    blocks, most = _blocks(N, oh, ow, K, g.itemsize)
    buf = xp.empty(K * most, g.dtype)
    for n0, n1, r0, r1 in blocks:
        cols = _cols(buf, K, (n1 - n0) * (r1 - r0) * ow)
        kern.gemm_into(wt, _g_block(xp, g3, n0, n1, r0, r1, ow), cols, 0.0)
        kern.col2im(cols, dx[n0:n1], geo, r0, r1)
    return dx
