"""backend/cpu/conv_kernels.c against NumPy's version of the same steps: im2col/col2im over row
and image blocks, instance norm forward/backward, and the Winograd tile transforms."""

import numpy as np
import pytest

from shapeflow.backend.cpu import conv_kernels as ck

needs_c = pytest.mark.skipif(not ck.available(), reason="conv_kernels.c not built")

# C, H, W, pt, pl, pb, pr, kh, kw, stride, dilation
GEOMS = [(3, 7, 9, 1, 1, 1, 1, 3, 3, (1, 1), (1, 1)),
         (2, 8, 8, 0, 0, 0, 0, 3, 3, (2, 2), (1, 1)),
         (4, 9, 7, 2, 1, 2, 1, 3, 2, (2, 3), (2, 1)),
         (2, 5, 6, 4, 4, 4, 4, 9, 9, (1, 1), (1, 1)),
         (1, 3, 3, 0, 0, 0, 0, 1, 1, (1, 1), (1, 1))]


def both(fn):
    """fn() with the compiled kernels, then with NumPy alone."""
    fused = fn()
    old = ck.set_enabled(False)
    try:
        return fused, fn()
    finally:
        ck.set_enabled(old)


def _geo(C, H, W, pt, pl, pb, pr, kh, kw, stride, dil):
    oh = (H + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (W + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    return ck.Geometry(C, H, W, pt, pl, ow, kh, kw, stride, dil), oh, ow


def _reference_cols(x, pads, kh, kw, stride, dil, oh, ow):
    """[C*kh*kw, N*oh*ow] by definition: cols[(c, i, j), (n, oy, ox)] = xpad[n, c, ...]."""
    N, C = x.shape[:2]
    pt, pl, pb, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out = np.empty((C, kh, kw, N, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            r, c = i * dil[0], j * dil[1]
            out[:, i, j] = xp[:, :, r:r + stride[0] * (oh - 1) + 1:stride[0],
                              c:c + stride[1] * (ow - 1) + 1:stride[1]].transpose(1, 0, 2, 3)
    return out.reshape(C * kh * kw, N * oh * ow)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("g", GEOMS)
def test_im2col_blocks_match_definition_on_both_paths(g, dtype, rng):
    C, H, W, pt, pl, pb, pr, kh, kw, stride, dil = g
    geo, oh, ow = _geo(*g)
    x = rng.standard_normal((3, C, H, W)).astype(dtype)
    want = _reference_cols(x, (pt, pl, pb, pr), kh, kw, stride, dil, oh, ow)
    K = C * kh * kw

    def blocks():
        whole = np.full((K, 3 * oh * ow), np.nan, dtype)
        ck.im2col(x, whole, geo, 0, oh)  # three images in one block
        band = np.full((K, (oh - oh // 2) * ow), np.nan, dtype)  # image 1's last output rows
        ck.im2col(x[1:2], band, geo, oh // 2, oh)
        return whole, band

    for whole, band in both(blocks):
        np.testing.assert_array_equal(whole, want)
        six = want.reshape(K, 3, oh, ow)[:, 1, oh // 2:].reshape(K, -1)
        np.testing.assert_array_equal(band, six)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("g", GEOMS)
def test_col2im_is_the_adjoint_of_im2col_on_both_paths(g, dtype, rng):
    C, H, W = g[:3]
    geo, oh, ow = _geo(*g)
    K = C * g[7] * g[8]
    x = rng.standard_normal((2, C, H, W)).astype(dtype)
    cols = rng.standard_normal((K, 2 * oh * ow)).astype(dtype)

    def run():
        dx = np.zeros((2, C, H, W), dtype)
        ck.col2im(cols, dx, geo, 0, oh)
        mine = np.empty((K, 2 * oh * ow), dtype)
        ck.im2col(x, mine, geo, 0, oh)
        return dx, mine

    (dx, mine), (dx_np, _) = both(run)
    np.testing.assert_allclose(dx, dx_np, rtol=1e-12 if dtype == np.float64 else 1e-5,
                               atol=1e-5)
    # <im2col(x), cols> == <x, col2im(cols)>
    np.testing.assert_allclose((mine * cols).sum(), (x * dx).sum(), rtol=1e-4)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm_kernels_match_numpy(dtype, affine, rng):
    N, C, L = 3, 4, 50
    x = (rng.standard_normal((N * C, L)) * 3 + 2).astype(dtype)
    g = rng.standard_normal((N * C, L)).astype(dtype)
    w = rng.standard_normal(C).astype(dtype) if affine else None
    b = rng.standard_normal(C).astype(dtype) if affine else None
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)

    def run():
        out, mean, rstd = ck.instance_norm(x, w, b, C, 1e-5)
        return (out, mean, rstd) + ck.instance_norm_backward(g, x, mean, rstd, w, C, True,
                                                             True)

    fused, ref = both(run)
    for a, r in zip(fused, ref):
        assert a.dtype == r.dtype
        np.testing.assert_allclose(a, r, **tol)
    xd = x.astype(np.float64)  # the definition, in float64
    want = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5)
    if affine:
        want = want * np.tile(w, N)[:, None] + np.tile(b, N)[:, None]
    np.testing.assert_allclose(fused[0], want, **tol)


_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


@needs_c
@pytest.mark.parametrize("H,W,pt,pl", [(6, 6, 1, 1), (7, 5, 0, 2), (2, 3, 1, 1)])
def test_winograd_transforms_match_their_definition(H, W, pt, pl, rng):
    N, C = 2, 3
    oh, ow = H + 2 * pt - 2, W + 2 * pl - 2
    th, tw = -(-oh // 2), -(-ow // 2)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    xp = np.zeros((N, C, 2 * th + 2, 2 * tw + 2))
    xp[:, :, pt:pt + H, pl:pl + W] = x[:, :, :2 * th + 2 - pt, :2 * tw + 2 - pl]
    d = np.stack([np.stack([xp[:, :, 2 * a:2 * a + 4, 2 * b:2 * b + 4] for b in range(tw)], 2)
                  for a in range(th)], 2)                     # [N, C, th, tw, 4, 4]
    want = np.einsum("ar,nctwrs,bs->abcntw", _BT, d, _BT).reshape(16, C, -1)
    V = np.empty((16, C, N * th * tw), np.float32)
    assert ck.winograd_input(x, V, pt, pl, 0, th, tw)
    np.testing.assert_allclose(V, want, rtol=1e-6, atol=1e-6)
    M = rng.standard_normal((16, C, N * th * tw)).astype(np.float32)
    out = np.empty((N, C, oh, ow), np.float32)
    assert ck.winograd_output(M, out, 0, th, tw)
    y = np.einsum("ar,rscntw,bs->cntawb", _AT, M.reshape(4, 4, C, N, th, tw).astype(float),
                  _AT).reshape(C, N, 2 * th, 2 * tw)[:, :, :oh, :ow].transpose(1, 0, 2, 3)
    np.testing.assert_allclose(out, y, rtol=1e-5, atol=1e-5)
    # the output gradient transform is the adjoint of the output transform
    dM = np.empty_like(M)
    assert ck.winograd_output_grad(out, dM, 0, th, tw)
    np.testing.assert_allclose((dM.astype(float) * M).sum(), (out.astype(float) ** 2).sum(),
                               rtol=1e-4)


def test_wrappers_refuse_buffers_that_do_not_fit(rng):
    geo, oh, ow = _geo(*GEOMS[0])
    x = rng.standard_normal((2,) + GEOMS[0][:3]).astype(np.float32)
    with pytest.raises(ValueError):
        ck.im2col(x, np.empty((27, oh * ow), np.float32), geo, 0, oh)  # room for one image
    with pytest.raises(ValueError):
        ck.col2im(np.empty((27, 2 * oh * ow), np.float32), x[:, :2], geo, 0, oh)
    with pytest.raises(ValueError):
        ck.winograd_input(x, np.empty((16, 3, 4), np.float32), 1, 1, 0, 4, 5)
