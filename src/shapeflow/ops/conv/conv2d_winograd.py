"""3x3 stride-1 conv2d (float32, one group) as Winograd F(2x2, 3x3): 16 products of 4x4
transformed tiles instead of 9 taps per output pixel, 2.25x fewer multiply-adds.

Forward: U = G w G^T per (o, c), V = B^T d B per input tile, M = U @ V at each of the 16
positions (one gemm each), output tiles A^T M A. The input gradient is itself a 3x3
stride-1 convolution (conv2d.py's full-convolution route), so it comes here too; the weight
gradient is dU = dM @ V^T with dM = A dY A^T, then dw = G^T dU G. The tile transforms are the
kernel table's (`kern.winograd_*`: backend/cpu/conv_kernels.c's); where a table has none,
conv2d takes im2col + gemm. Values agree with the direct sum to float32 rounding (the
transforms' entries are 0, +-1, 1/2).
"""

from __future__ import annotations

from ... import dtypes as _dt
from .conv2d_blocked import _blocks

_F32 = _dt.float32.np
_G_ROWS = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]
# bytes of transformed tiles (V and M) per block
BLOCK_BYTES = 1 << 22


def applies(kern, spec, w_shape, x_dtype, w_dtype) -> bool:
    """Whether this conv goes through Winograd: 3x3, stride 1, no dilation, one group,
    float32, the table's transforms available."""
    return (tuple(w_shape[2:]) == (3, 3) and spec.stride == (1, 1)
            and spec.dilation == (1, 1) and spec.groups == 1 and x_dtype == _F32
            and w_dtype == _F32 and kern.winograd_available())


def _tiles(spec, x_shape):
    _, _, H, W = x_shape
    oh, ow = spec.out_hw(H, W, 3, 3)
    return oh, ow, -(-oh // 2), -(-ow // 2)


def forward(kern, spec, x, w, b):
    """conv2d(x, w) + b through 16 gemms per block of tiles."""
    xp = kern.xp
    N, C = x.shape[:2]
    O = w.shape[0]
    oh, ow, th, tw = _tiles(spec, x.shape)
    x = xp.ascontiguousarray(x)
    U = _weights(xp, xp.ascontiguousarray(w))
    out = xp.empty((N, O, oh, ow), _F32)
    blocks, most = _blocks(N, th, tw, 16 * (C + O), 4, BLOCK_BYTES)
    vbuf, mbuf = xp.empty(16 * C * most, _F32), xp.empty(16 * O * most, _F32)
    for n0, n1, t0, t1 in blocks:
        T = (n1 - n0) * (t1 - t0) * tw
        V, M = vbuf[:16 * C * T].reshape(16, C, T), mbuf[:16 * O * T].reshape(16, O, T)
        kern.winograd_input(x[n0:n1], V, spec.pads[0], spec.pads[2], t0, t1, tw)
        for k in range(16):
            kern.gemm_into(U[k], V[k], M[k], 0.0)
        if t0 == 0 and t1 == th:
            kern.winograd_output(M, out[n0:n1], t0, t1, tw)
        else:  # a band of tile rows of one image: its output rows, as a whole image
            r0, r1 = 2 * t0, min(oh, 2 * t1)
            band = xp.empty((1, O, r1 - r0, ow), _F32)
            kern.winograd_output(M, band, 0, t1 - t0, tw)
            out[n0, :, r0:r1] = band[0]
    if b is not None:
        out += b.reshape(O, 1, 1)
    return out


def weight_grad(kern, spec, w_shape, x, g):
    """dw [O, C, 3, 3] = G^T (sum over blocks of dM @ V^T) G."""
    xp = kern.xp
    N, C = x.shape[:2]
    O = w_shape[0]
    oh, ow, th, tw = _tiles(spec, x.shape)
    x, g = xp.ascontiguousarray(x), xp.ascontiguousarray(g)
    dU = xp.empty((16, O, C), _F32)
    blocks, most = _blocks(N, th, tw, 16 * (C + O), 4, BLOCK_BYTES)
    vbuf, mbuf = xp.empty(16 * C * most, _F32), xp.empty(16 * O * most, _F32)
    for i, (n0, n1, t0, t1) in enumerate(blocks):
        T = (n1 - n0) * (t1 - t0) * tw
        V, dM = vbuf[:16 * C * T].reshape(16, C, T), mbuf[:16 * O * T].reshape(16, O, T)
        kern.winograd_input(x[n0:n1], V, spec.pads[0], spec.pads[2], t0, t1, tw)
        if t0 == 0 and t1 == th:
            kern.winograd_output_grad(g[n0:n1], dM, t0, t1, tw)
        else:  # the band's output rows as a whole image (tile rows from 0)
            band = xp.ascontiguousarray(g[n0:n1, :, 2 * t0:min(oh, 2 * t1)])
            kern.winograd_output_grad(band, dM, 0, t1 - t0, tw)
        for k in range(16):
            kern.gemm_into(dM[k], V[k].T, dU[k], 1.0 if i else 0.0)
    G = xp.asarray(_G_ROWS, _F32)
    t = (G.T @ dU.reshape(4, -1)).reshape(3, 4, O, C).transpose(0, 2, 3, 1)  # [i, O, C, b]
    return xp.ascontiguousarray((t @ G).transpose(1, 2, 0, 3))              # [O, C, i, j]


def _weights(xp, w):
    """U [16, O, C] = G w G^T per (o, c), as two small products (einsum's loop is slow)."""
    G = xp.asarray(_G_ROWS, _F32)
    O, C = w.shape[:2]
    t = (w.reshape(-1, 3) @ G.T).reshape(O * C, 3, 4)              # w G^T: [oc, i, b]
    u = G @ xp.ascontiguousarray(t.transpose(1, 0, 2)).reshape(3, -1)  # [a, (oc, b)]
    return xp.ascontiguousarray(u.reshape(4, O, C, 4).transpose(0, 3, 1, 2)).reshape(16, O, C)
