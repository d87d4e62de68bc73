"""conv1d, transposed convs, 1-D and adaptive pools, batch_norm: vs PyTorch, gradcheck, meta."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
from shapeflow.nn import functional as F
from tests.ops.harness import check_op


def normal(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- conv1d over the option grid --------------------------------------------------------
CONV1D = [  # stride, padding, dilation, groups, bias
    (1, 0, 1, 1, True), (2, 1, 1, 1, False), (1, 2, 2, 1, True), (3, 1, 2, 2, True),
    (1, "same", 2, 1, True), (1, "valid", 1, 2, False), (2, 0, 1, 4, True),
]


@pytest.mark.parametrize("stride,padding,dilation,groups,bias", CONV1D)
def test_conv1d_matches_torch(stride, padding, dilation, groups, bias):
    x, w = normal(2, 4, 9), normal(4, 4 // groups, 3, seed=1)
    extra = (normal(4, seed=2),) if bias else ()

    def fn(lib):
        return lambda x, w, *b: lib.conv1d(x, w, b[0] if b else None, stride, padding, dilation,
                                           groups)

    check_op(fn(F), fn(TF), x, w, *extra, rtol=1e-4, atol=1e-5)


def test_conv1d_unbatched():
    check_op(lambda x, w: F.conv1d(x, w, padding=1), lambda x, w: TF.conv1d(x, w, padding=1),
             normal(3, 7), normal(5, 3, 3, seed=1), rtol=1e-4, atol=1e-5)


def test_conv1d_channels_last_input_says_so():
    x, w = sf.randn(2, 20, 3), sf.randn(8, 3, 5)  # [B, L, C] but Conv1d wants [B, C, L]
    with pytest.raises(sf.ShapeError) as e:
        F.conv1d(x, w)
    assert "[N, L, C]" in str(e.value) and "[N, C, L]" in str(e.value)
    assert "transpose(1, -1)" in str(e.value)
    with pytest.raises(sf.ShapeError, match="Conv1d"):
        sf.nn.Conv1d(3, 8, 5)(x)


# ---- transposed convolutions ------------------------------------------------------------
TRANSPOSED = [  # stride, padding, output_padding, dilation, groups, bias
    (1, 0, 0, 1, 1, True), (2, 1, 1, 1, 1, False), (2, 0, 1, 2, 1, True),
    (3, 2, 2, 1, 2, True), (1, 1, 0, 2, 2, False), (2, 1, 0, 1, 4, True),
]


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups,bias", TRANSPOSED)
def test_conv_transpose2d_matches_torch(stride, padding, output_padding, dilation, groups, bias):
    x, w = normal(2, 4, 4, 5), normal(4, 6 // groups if 6 % groups == 0 else 2, 3, 2, seed=1)
    extra = (normal(w.shape[1] * groups, seed=2),) if bias else ()

    def fn(lib):
        return lambda x, w, *b: lib.conv_transpose2d(x, w, b[0] if b else None, stride, padding,
                                                     output_padding, groups, dilation)

    check_op(fn(F), fn(TF), x, w, *extra, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups,bias", TRANSPOSED)
def test_conv_transpose1d_matches_torch(stride, padding, output_padding, dilation, groups, bias):
    x, w = normal(2, 4, 6), normal(4, 2, 3, seed=1)
    extra = (normal(2 * groups, seed=2),) if bias else ()

    def fn(lib):
        return lambda x, w, *b: lib.conv_transpose1d(x, w, b[0] if b else None, stride, padding,
                                                     output_padding, groups, dilation)

    check_op(fn(F), fn(TF), x, w, *extra, rtol=1e-4, atol=1e-5)


def test_conv_transpose_rejects_large_output_padding():
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(sf.randn(1, 2, 3, 3), sf.randn(2, 2, 3, 3), stride=2,
                           output_padding=2)


def test_conv_transpose_module_output_size_matches_torch():
    sf.manual_seed(0)
    m = sf.nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1)
    t = torch.nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1)
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    x = normal(2, 3, 4, 4).astype(np.float32)
    out = m(sf.from_numpy(x), output_size=[8, 8])
    ref = t(torch.from_numpy(x), output_size=[8, 8])
    assert tuple(out.shape) == (2, 5, 8, 8)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert tuple(m.weight.shape) == tuple(t.weight.shape) == (3, 5, 3, 3)


# ---- pools ------------------------------------------------------------------------------
@pytest.mark.parametrize("k,s,p,d,ceil", [(2, None, 0, 1, False), (3, 2, 1, 1, True),
                                          (3, 1, 1, 2, False)])
def test_max_pool1d_matches_torch(k, s, p, d, ceil):
    check_op(lambda x: F.max_pool1d(x, k, s, p, d, ceil), lambda x: TF.max_pool1d(
        x, k, s, p, d, ceil), normal(2, 3, 11))
    out, idx = F.max_pool1d(sf.from_numpy(normal(2, 3, 11)), k, s, p, d, ceil,
                            return_indices=True)
    _, tidx = TF.max_pool1d(torch.from_numpy(normal(2, 3, 11)), k, s, p, d, ceil,
                            return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


@pytest.mark.parametrize("k,s,p,ceil,cip", [(2, None, 0, False, True), (3, 2, 1, True, False),
                                            (3, 1, 1, False, True)])
def test_avg_pool1d_matches_torch(k, s, p, ceil, cip):
    check_op(lambda x: F.avg_pool1d(x, k, s, p, ceil, cip),
             lambda x: TF.avg_pool1d(x, k, s, p, ceil, cip), normal(2, 3, 10))


@pytest.mark.parametrize("size", [1, (2, 3), (3, 4), (5, None), (7, 9)])
def test_adaptive_pools_2d_match_torch(size):
    x = normal(2, 3, 7, 9)
    check_op(lambda x: F.adaptive_avg_pool2d(x, size), lambda x: TF.adaptive_avg_pool2d(x, size),
             x)
    check_op(lambda x: F.adaptive_max_pool2d(x, size), lambda x: TF.adaptive_max_pool2d(x, size),
             x)
    _, idx = F.adaptive_max_pool2d(sf.from_numpy(x), size, return_indices=True)
    _, tidx = TF.adaptive_max_pool2d(torch.from_numpy(x), size, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


@pytest.mark.parametrize("size", [1, 3, 4])
def test_adaptive_avg_pool1d_matches_torch(size):
    check_op(lambda x: F.adaptive_avg_pool1d(x, size), lambda x: TF.adaptive_avg_pool1d(x, size),
             normal(2, 3, 10))


def test_adaptive_pool_to_one_is_symbolic_on_meta():
    out = F.adaptive_avg_pool2d(sf.empty("B", 8, "H", "W", device="meta"), 1)
    assert str(out.shape) == "[B, 8, 1, 1]" or tuple(out.shape)[1:] == (8, 1, 1)


# ---- batch_norm -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (3, 3, 4, 5), (2, 3, 2, 3, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_matches_torch(shape, affine):
    wb = (normal(3, seed=1) + 1.5, normal(3, seed=2)) if affine else ()

    def fn(lib):
        return lambda x, *wb: lib.batch_norm(x, None, None, *wb, training=True, eps=1e-3)

    check_op(fn(F), fn(TF), normal(*shape) * 2 + 1, *wb, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_bias_without_weight(training):
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)

    def fn(lib, wrap):
        return lambda x, b: lib.batch_norm(x, wrap(rm.copy()), wrap(rv.copy()), None, b,
                                           training=training)

    check_op(fn(F, sf.from_numpy), fn(TF, torch.from_numpy), normal(4, 3, 5) + 2,
             normal(3, seed=2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(5, 3), (3, 3, 4, 5)])
def test_batch_norm_eval_matches_torch(shape):
    rm, rv = normal(3, seed=3).astype(np.float32), (normal(3, seed=4) ** 2 + 0.5).astype(
        np.float32)

    def fn(lib, wrap):
        return lambda x, w, b: lib.batch_norm(x, wrap(rm), wrap(rv), w, b, training=False)

    check_op(fn(F, sf.from_numpy), fn(TF, torch.from_numpy), normal(*shape),
             normal(3, seed=1), normal(3, seed=2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("momentum", [0.1, 0.5])
def test_batch_norm_updates_running_stats_as_torch(momentum):
    x = normal(6, 4, 3, 3).astype(np.float32)
    rm, rv, trm, trv = sf.zeros(4), sf.ones(4), torch.zeros(4), torch.ones(4)
    for i in range(3):
        xi = x * (i + 1)
        F.batch_norm(sf.from_numpy(xi), rm, rv, training=True, momentum=momentum)
        TF.batch_norm(torch.from_numpy(xi), trm, trv, training=True, momentum=momentum)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)  # unbiased


def test_batch_norm_grad_of_grad_matches_torch():
    x = normal(4, 3, 5)
    w = normal(3, seed=1)
    xs, ws = sf.from_numpy(x).requires_grad_(), sf.from_numpy(w).requires_grad_()
    xt, wt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    ys = F.batch_norm(xs, None, None, ws, training=True)
    yt = TF.batch_norm(xt, None, None, wt, training=True)
    (gs,) = sf.autograd.grad((ys ** 3).sum(), xs, create_graph=True)
    (gt,) = torch.autograd.grad((yt ** 3).sum(), xt, create_graph=True)
    np.testing.assert_allclose(gs.detach().numpy(), gt.detach().numpy(), rtol=1e-8, atol=1e-10)
    (gws,) = sf.autograd.grad((gs * gs).sum(), ws)
    (gwt,) = torch.autograd.grad((gt * gt).sum(), wt)
    np.testing.assert_allclose(gws.numpy(), gwt.numpy(), rtol=1e-7, atol=1e-9)


def test_batch_norm_saves_input_and_channel_stats():
    x = sf.randn(4, 3, 5, 5, requires_grad=True)
    y = F.batch_norm(x, None, None, sf.ones(3, requires_grad=True), sf.zeros(3), training=True)
    kinds = [(e.kind, e.shape) for e in y.grad_fn._entries]
    assert kinds[0][0] == "layer inputs"
    assert kinds[1:3] == [("normalization stats", (3,)), ("normalization stats", (3,))]


def test_batch_norm_one_value_per_channel_is_an_error():
    with pytest.raises(sf.ShapeError, match="more than 1 value per channel"):
        F.batch_norm(sf.randn(1, 3), None, None, training=True)
