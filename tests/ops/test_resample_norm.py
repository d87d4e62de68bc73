"""conv3d, interpolate, pixel (un)shuffle, unfold / fold, group / instance norm, normalize:
values and grads vs PyTorch, float64 gradcheck and meta shapes (check_op), and the layers."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
from shapeflow import nn
from shapeflow.nn import functional as F
from tests.ops.harness import check_op, graph_nodes


def normal(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 2), ((1, 2, 1), (1, 0, 1), (2, 1, 1), 1), (1, "same", 1, 2)])
def test_conv3d_matches_torch(stride, padding, dilation, groups):
    x, w, b = normal(2, 4, 5, 4, 5), normal(4, 4 // groups, 3, 2, 3, seed=1), normal(4, seed=2)
    check_op(lambda x, w, b: F.conv3d(x, w, b, stride, padding, dilation, groups),
             lambda x, w, b: TF.conv3d(x, w, b, stride, padding, dilation, groups), x, w, b,
             rtol=1e-4, atol=1e-5)


INTERP = [("nearest", None, dict(size=(7, 3))), ("nearest", None, dict(scale_factor=2)),
          ("nearest-exact", None, dict(scale_factor=(1.5, 0.5))),
          ("bilinear", False, dict(size=(7, 9))), ("bilinear", True, dict(size=(7, 9))),
          ("bilinear", False, dict(scale_factor=1.7)), ("bilinear", True, dict(scale_factor=0.5)),
          ("area", None, dict(size=(2, 3)))]


@pytest.mark.parametrize("mode,align,kw", INTERP)
def test_interpolate_2d_matches_torch(mode, align, kw):
    check_op(lambda x: F.interpolate(x, mode=mode, align_corners=align, **kw),
             lambda x: TF.interpolate(x, mode=mode, align_corners=align, **kw),
             normal(2, 3, 4, 5), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,align", [("nearest", None), ("linear", False), ("linear", True)])
def test_interpolate_1d_and_upsample_match_torch(mode, align):
    check_op(lambda x: F.interpolate(x, scale_factor=2.5, mode=mode, align_corners=align),
             lambda x: TF.interpolate(x, scale_factor=2.5, mode=mode, align_corners=align),
             normal(2, 3, 6), rtol=1e-4, atol=1e-5)
    x = normal(1, 2, 3, 3).astype(np.float32)
    m, t = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), \
        torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    np.testing.assert_allclose(m(sf.from_numpy(x)).numpy(), t(torch.from_numpy(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_interpolate_wrong_rank_names_the_mode():
    with pytest.raises(sf.ShapeError, match="bilinear.*\\[N, C, H, W\\]"):
        F.interpolate(sf.randn(3, 4, 4), scale_factor=2, mode="bilinear")


@pytest.mark.parametrize("r", [1, 2, 3])
def test_pixel_shuffle_and_unshuffle_match_torch(r):
    check_op(lambda x: F.pixel_shuffle(x, r), lambda x: TF.pixel_shuffle(x, r),
             normal(2, 2 * r * r, 3, 4))
    check_op(lambda x: F.pixel_unshuffle(x, r), lambda x: TF.pixel_unshuffle(x, r),
             normal(2, 2, 3 * r, 2 * r))
    x = normal(1, 4 * r * r, 2, 2).astype(np.float32)
    np.testing.assert_array_equal(nn.PixelShuffle(r)(sf.from_numpy(x)).numpy(),
                                  torch.nn.PixelShuffle(r)(torch.from_numpy(x)).numpy())


def test_pixel_shuffle_channel_rule():
    with pytest.raises(sf.ShapeError, match="divisible by upscale_factor"):
        F.pixel_shuffle(sf.randn(1, 6, 2, 2), 2)


@pytest.mark.parametrize("k,d,p,s", [(2, 1, 0, 1), ((2, 3), 1, 1, 2), (3, (2, 1), (1, 2), 1)])
def test_unfold_and_fold_match_torch(k, d, p, s):
    x = normal(2, 3, 6, 7)
    check_op(lambda x: F.unfold(x, k, d, p, s), lambda x: TF.unfold(x, k, d, p, s), x)
    cols = TF.unfold(torch.from_numpy(x), k, d, p, s).numpy()
    check_op(lambda c: F.fold(c, (6, 7), k, d, p, s), lambda c: TF.fold(c, (6, 7), k, d, p, s),
             cols)
    m, t = nn.Fold((6, 7), k, d, p, s), torch.nn.Fold((6, 7), k, d, p, s)
    np.testing.assert_allclose(m(sf.from_numpy(cols)).numpy(), t(torch.from_numpy(cols))
                               .numpy(), rtol=1e-6)


def test_fold_names_the_block_count_rule():
    with pytest.raises(sf.ShapeError, match="blocks"):
        F.fold(sf.randn(1, 12, 5), (4, 4), 2)


@pytest.mark.parametrize("shape,groups", [((3, 6, 5), 3), ((2, 4, 3, 3), 2), ((2, 4, 3), 4),
                                          ((2, 6, 2, 2, 2), 1)])
def test_group_norm_matches_torch(shape, groups):
    C = shape[1]
    check_op(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-4),
             lambda x, w, b: TF.group_norm(x, groups, w, b, 1e-4), normal(*shape) * 3 + 1,
             normal(C, seed=1), normal(C, seed=2), rtol=1e-4, atol=1e-5)


def test_group_norm_saves_input_and_group_stats():
    x = sf.randn(2, 4, 3, 3, requires_grad=True)
    (node,) = [n for n in graph_nodes(F.group_norm(x, 2)) if n.name == "layer_norm"]
    assert [(e.kind, e.shape) for e in node._entries] == [
        ("layer inputs", None), ("normalization stats", (2, 2, 1)),
        ("normalization stats", (2, 2, 1))]


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 4)])
def test_instance_norm_matches_torch(shape):
    check_op(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
             lambda x, w, b: TF.instance_norm(x, weight=w, bias=b), normal(*shape) * 2 + 1,
             normal(3, seed=1), normal(3, seed=2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls,tcls,shape", [(nn.InstanceNorm1d, torch.nn.InstanceNorm1d, (2, 3, 6)),
                                            (nn.InstanceNorm2d, torch.nn.InstanceNorm2d, (3, 4, 4)),
                                            (nn.InstanceNorm2d, torch.nn.InstanceNorm2d,
                                             (2, 3, 4, 4))])
def test_instance_norm_layers_track_stats_as_torch(cls, tcls, shape):
    C = shape[-3] if len(shape) == 4 or cls is nn.InstanceNorm2d and len(shape) == 3 else \
        shape[-2]
    m, t = cls(C, affine=True, track_running_stats=True), tcls(C, affine=True,
                                                               track_running_stats=True)
    assert list(m.state_dict()) == list(t.state_dict())
    for i in range(2):
        x = (normal(*shape, seed=i) * (i + 2)).astype(np.float32)
        np.testing.assert_allclose(m(sf.from_numpy(x)).detach().numpy(),
                                   t(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
    m.eval()
    t.eval()
    x = normal(*shape, seed=5).astype(np.float32)
    np.testing.assert_allclose(m(sf.from_numpy(x)).detach().numpy(),
                               t(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_group_norm_layer_matches_torch():
    m, t = nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)
    assert list(m.state_dict()) == list(t.state_dict()) and repr(m) == repr(t)
    x = normal(2, 4, 3).astype(np.float32)
    np.testing.assert_allclose(m(sf.from_numpy(x)).detach().numpy(),
                               t(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(sf.ShapeError, match="num_groups"):
        F.group_norm(sf.randn(2, 5, 3), 2)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize_matches_torch(p, dim):
    check_op(lambda x: F.normalize(x, p, dim), lambda x: TF.normalize(x, p, dim),
             normal(3, 4, 5), rtol=1e-4, atol=1e-5)
