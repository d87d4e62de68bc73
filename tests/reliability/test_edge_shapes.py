"""Edge shapes against PyTorch: 0-d tensors through dim ops, zero-size products, transposed
convolutions whose output_padding reaches the stride. A tensor's data always has its shape."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.nn import functional as F
from tests.ops.harness import TORCH_DTYPES, assert_data_matches

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _long(m, shape):
    return m.zeros(shape, dtype=m.int64)


def _nn(m):
    return F if m is sf else TF


# (name, fn(lib, x, dim)): each op given a dim, on a 0-d tensor
_DIM_OPS = [
    ("sum", lambda m, x, d: m.sum(x, d)),
    ("mean", lambda m, x, d: m.mean(x, d)),
    ("amax", lambda m, x, d: m.amax(x, d)),
    ("max", lambda m, x, d: tuple(m.max(x, d))),
    ("argmax", lambda m, x, d: m.argmax(x, d)),
    ("softmax", lambda m, x, d: m.softmax(x, d)),
    ("log_softmax", lambda m, x, d: _nn(m).log_softmax(x, d)),
    ("cumsum", lambda m, x, d: m.cumsum(x, d)),
    ("sort", lambda m, x, d: tuple(m.sort(x, d))),
    ("topk", lambda m, x, d: tuple(m.topk(x, 1, d))),
    ("flip", lambda m, x, d: m.flip(x, (d,))),
    ("roll", lambda m, x, d: m.roll(x, 1, d)),
    ("squeeze", lambda m, x, d: m.squeeze(x, d)),
    ("unsqueeze", lambda m, x, d: m.unsqueeze(x, d)),
    ("narrow", lambda m, x, d: m.narrow(x, d, 0, 1)),
    ("select", lambda m, x, d: m.select(x, d, 0)),
    ("split", lambda m, x, d: tuple(m.split(x, 1, d))),
    ("chunk", lambda m, x, d: tuple(m.chunk(x, 1, d))),
    ("unbind", lambda m, x, d: tuple(m.unbind(x, d))),
    ("flatten", lambda m, x, d: m.flatten(x, d)),
    ("unflatten", lambda m, x, d: m.unflatten(x, d, (1,))),
    ("movedim", lambda m, x, d: m.movedim(x, d, 0)),
    ("transpose", lambda m, x, d: m.transpose(x, d, 0)),
    ("unfold", lambda m, x, d: x.unfold(d, 1, 1)),
    ("size", lambda m, x, d: x.size(d)),
    ("repeat_interleave", lambda m, x, d: m.repeat_interleave(x, 2, d)),
    ("gather", lambda m, x, d: m.gather(x, d, _long(m, ()))),
    ("gather[2]", lambda m, x, d: m.gather(x, d, _long(m, (2,)))),
    ("take_along_dim", lambda m, x, d: m.take_along_dim(x, _long(m, ()), d)),
    ("index_select", lambda m, x, d: m.index_select(x, d, _long(m, (1,)))),
    ("index_select[2]", lambda m, x, d: m.index_select(x, d, _long(m, (2,)))),
    ("index_add", lambda m, x, d: m.index_add(x, d, _long(m, (1,)), x * 2)),
    ("index_copy", lambda m, x, d: m.index_copy(x, d, _long(m, (1,)), x * 3)),
    ("scatter_add[2]", lambda m, x, d: m.scatter_add(x, d, _long(m, (2,)),
                                                    m.stack([x, x * 2]))),
]


def _run(m, fn, d):
    x = m.tensor(1.5, requires_grad=True)
    try:
        return x, fn(m, x, d), None
    except Exception as e:  # noqa: BLE001 - compared with the other library's outcome
        return x, None, e


@pytest.mark.parametrize("d", [0, -1, 1, -2])
@pytest.mark.parametrize("name,fn", _DIM_OPS, ids=[c[0] for c in _DIM_OPS])
def test_dim_ops_on_a_0d_tensor_match_pytorch(name, fn, d):
    tx, tout, terr = _run(torch, fn, d)
    sx, sout, serr = _run(sf, fn, d)
    if terr is not None:
        assert isinstance(serr, sf.ShapeflowError), (terr, serr, sout)
        return
    assert serr is None, f"PyTorch gives {tout}, shapeflow raises {serr!r}"
    if isinstance(tout, int):
        assert sout == tout
        return
    touts = tout if isinstance(tout, tuple) else (tout,)
    souts = sout if isinstance(sout, tuple) else (sout,)
    assert len(souts) == len(touts)
    for s, t in zip(souts, touts):
        assert_data_matches(s)
        assert tuple(s.shape) == tuple(t.shape) and TORCH_DTYPES[s.dtype] == t.dtype
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy())
    diff = [(s, t) for s, t in zip(souts, touts) if t.requires_grad]
    if diff:
        sum(((t * (i + 2)).sum() for i, (_, t) in enumerate(diff)), torch.tensor(0.0)).backward()
        sum(((s * (i + 2)).sum() for i, (s, _) in enumerate(diff)), sf.tensor(0.0)).backward()
        assert_data_matches(sx.grad, "grad")
        np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy())


# ---- transposed convolutions: output_padding up to the dilation, groups ------------------

# (stride, padding, dilation, output_padding, groups)
_TRANSPOSE_GEOMETRIES = [
    (1, 0, 2, 1, 1),  # output_padding >= stride (allowed: < dilation)
    (1, 1, 3, 2, 1),
    (2, 0, 3, 2, 1),
    (2, 1, 4, 3, 1),
    (1, 0, 2, 1, 2),  # the same with groups
    (2, 0, 3, 2, 2),
    (2, 1, 1, 1, 2),  # output_padding < stride
    (3, 1, 2, 1, 1),
]


def _compare_conv(sf_fn, t_fn, x, w, b):
    sx, sw, sb = (sf.from_numpy(a.copy()).requires_grad_(True) for a in (x, w, b))
    tx, tw, tb = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, w, b))
    y, ty = sf_fn(sx, sw, sb), t_fn(tx, tw, tb)
    assert_data_matches(y)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = np.random.default_rng(1).standard_normal(tuple(ty.shape)).astype(np.float32)
    (y * sf.from_numpy(g)).sum().backward()
    (ty * torch.from_numpy(g)).sum().backward()
    for s, t in ((sx, tx), (sw, tw), (sb, tb)):
        assert_data_matches(s.grad, "grad")
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("s,p,d,o,g", _TRANSPOSE_GEOMETRIES)
def test_conv_transpose2d_geometries_match_pytorch(s, p, d, o, g):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    b = rng.standard_normal(3 * g).astype(np.float32)
    _compare_conv(
        lambda x, w, b: F.conv_transpose2d(x, w, b, s, p, (o, 0), g, (d, 1)),
        lambda x, w, b: TF.conv_transpose2d(x, w, b, s, p, (o, 0), g, (d, 1)), x, w, b)
    _compare_conv(  # both spatial dims at once
        lambda x, w, b: F.conv_transpose2d(x, w, b, s, p, o, g, d),
        lambda x, w, b: TF.conv_transpose2d(x, w, b, s, p, o, g, d), x, w, b)


@pytest.mark.parametrize("s,p,d,o,g", _TRANSPOSE_GEOMETRIES)
def test_conv_transpose1d_geometries_match_pytorch(s, p, d, o, g):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3)).astype(np.float32)
    b = rng.standard_normal(2 * g).astype(np.float32)
    _compare_conv(lambda x, w, b: F.conv_transpose1d(x, w, b, s, p, o, g, d),
                  lambda x, w, b: TF.conv_transpose1d(x, w, b, s, p, o, g, d), x, w, b)


def test_conv_transpose2d_output_padding_past_the_stride_on_meta():
    x = sf.zeros(1, 2, 4, 4, device="meta")
    w = sf.zeros(2, 1, 3, 3, device="meta")
    want = TF.conv_transpose2d(torch.zeros(1, 2, 4, 4), torch.zeros(2, 1, 3, 3), stride=1,
                               output_padding=1, groups=2, dilation=2).shape
    assert tuple(F.conv_transpose2d(x, w, None, 1, 0, 1, 2, 2).shape) == tuple(want)


# ---- zero-size products, backward included ----------------------------------------------

@pytest.mark.parametrize("op,sa,sb", [
    ("matmul", (2, 0, 0), (0, 4)),
    ("matmul", (2, 3, 0), (0, 0)),
    ("matmul", (2, 3, 0), (0, 4)),
    ("linear", (2, 0), (3, 0)),
    ("linear", (2, 5, 3), (0, 3)),
    ("tensordot", (2, 0), (0, 4)),
])
def test_zero_size_products_backward_match_pytorch(op, sa, sb):
    fns = {"matmul": lambda m, a, b: a @ b,
           "linear": lambda m, a, b: _nn(m).linear(a, b),
           "tensordot": lambda m, a, b: m.tensordot(a, b, 1)}
    res = []
    for m in (torch, sf):
        a, b = m.ones(sa, requires_grad=True), m.ones(sb, requires_grad=True)
        y = fns[op](m, a, b)
        (y + 1).sum().backward()
        res.append((y, a.grad, b.grad))
    for t, s in zip(*res):
        assert_data_matches(s.detach())
        assert tuple(s.shape) == tuple(t.shape)
        np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())


# ---- gather / scatter on 0-d inputs, backward included ------------------------------------

@pytest.mark.parametrize("k", [0, 1, 3])
def test_gather_and_scatter_add_on_a_0d_input_match_pytorch(k):
    res = []
    for m in (torch, sf):
        x = m.tensor(1.5, requires_grad=True)
        src = m.tensor([2.0, 3.0, 4.0][:k], requires_grad=True)
        idx = _long(m, (k,))
        y = m.gather(x, 0, idx)
        z = m.scatter_add(x * 1, 0, idx, src)
        ((y * m.tensor([1.0, 2.0, 3.0][:k])).sum() + z * 5).backward()
        res.append((y, z, x.grad, src.grad))
    for t, s in zip(*res):
        assert_data_matches(s.detach())
        assert tuple(s.shape) == tuple(t.shape)
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy())


# ---- expand: negative sizes --------------------------------------------------------------

@pytest.mark.parametrize("shape,sizes", [((3,), (-1, 3)), ((1, 3), (-1, -1, 3)), ((), (-1,)),
                                         ((), (-1, 3)), ((1,), (-2,)), ((3,), (2, -2))])
def test_expand_with_negative_sizes_raises_like_pytorch(shape, sizes):
    with pytest.raises(RuntimeError):
        torch.ones(shape).expand(*sizes)
    with pytest.raises(sf.ShapeError, match="expand") as info:
        sf.ones(shape).expand(*sizes)
    assert isinstance(info.value, RuntimeError)

