"""Padding layers, channel-wise and alpha dropout, and the rest of nn.init, against PyTorch."""

import math
import warnings

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.nn import init

torch = pytest.importorskip("torch")
TF = torch.nn.functional
SELU_ALPHA = 1.7580993408473766  # SELU's scale * alpha: -SELU(-inf), where dropped units go

# ---------------------------------------------------------------- padding layers

KINDS = ["Reflection", "Replication", "Circular", "Constant", "Zero"]


def _pair_of_layers(kind: str, dims: int, padding):
    name = f"{kind}Pad{dims}d"
    args = (padding, 1.5) if kind == "Constant" else (padding,)
    return getattr(sf.nn, name)(*args), getattr(torch.nn, name)(*args)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("padding", ["int", "tuple"])
def test_padding_layers_match_torch(kind, dims, batched, padding):
    rng = np.random.default_rng(dims)
    shape = (2, 3, 4, 5, 3)[3 - dims if batched else 4 - dims:]
    pad = 2 if padding == "int" else (2, 1, 0, 3, 1, 2)[:2 * dims]
    ours, theirs = _pair_of_layers(kind, dims, pad)
    x = rng.standard_normal(shape)
    xs, xt = sf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ys, yt = ours(xs), theirs(xt)
    assert ys.shape == tuple(yt.shape)
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=0, atol=0)
    g = rng.standard_normal(tuple(yt.shape))
    ys.backward(sf.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert repr(ours) == repr(theirs) and ours.padding == theirs.padding
    meta = ours(sf.empty(*shape, device="meta"))  # shapes trace without data
    assert meta.device.type == "meta" and meta.shape == tuple(yt.shape)


@pytest.mark.parametrize("make,shape", [
    (lambda nn: nn.ReflectionPad1d(3), (1, 2, 3)),      # reflection needs pad < size
    (lambda nn: nn.ReflectionPad2d((0, 0, 2, 2)), (2, 2, 4)),
    (lambda nn: nn.ReflectionPad3d(1), (1, 1, 1, 3, 3)),
    (lambda nn: nn.CircularPad1d(4), (1, 2, 3)),         # wraps around more than once
    (lambda nn: nn.ReflectionPad2d(1), (3, 3)),          # 2-D into a 2d layer
    (lambda nn: nn.ReplicationPad3d(1), (2, 3, 3)),
    (lambda nn: nn.CircularPad2d(1), (1, 1, 1, 3, 3)),
    (lambda nn: nn.ReflectionPad2d((1, 1)), (1, 1, 3, 3)),  # 2 values for 2 padded dims
    (lambda nn: nn.ConstantPad2d(1, 0.0), (3,)),         # 4 values need 2 dims
])
def test_padding_errors_where_torch_raises(make, shape):
    with pytest.raises((RuntimeError, ValueError, NotImplementedError)):
        make(torch.nn)(torch.ones(*shape))
    with pytest.raises(sf.ShapeError, match="Pad|pad"):
        make(sf.nn)(sf.ones(*shape))


def test_constant_padding_takes_any_rank_and_crops_as_torch():
    x = np.arange(24.0).reshape(2, 3, 4)
    for pad in [(1, -1, 2, 0), (-1, -2)]:
        ours = sf.nn.ConstantPad2d(pad, -1.0)(sf.tensor(x)).numpy()
        assert np.array_equal(ours, torch.nn.ConstantPad2d(pad, -1.0)(torch.tensor(x)).numpy())


@pytest.mark.parametrize("mode,pad", [("replicate", (-3, 3)), ("replicate", (4, -3, -1, 2)),
                                      ("reflect", (1, 1, -4, 2))])
def test_non_constant_pad_may_crop_past_the_edge_as_torch(mode, pad):
    x = np.random.default_rng(0).standard_normal((2, 3, 2))
    xs, xt = sf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ys, yt = F.pad(xs, pad, mode=mode), TF.pad(xt, pad, mode=mode)
    assert np.array_equal(ys.detach().numpy(), yt.detach().numpy())
    (ys * ys).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_padding_in_a_memory_report():
    model = sf.nn.Sequential(sf.nn.ReflectionPad2d(1), sf.nn.Conv2d(3, 4, 3),
                             sf.nn.ZeroPad2d((0, 1, 0, 1)), sf.nn.Dropout2d(0.2))
    rep = sf.memory.report(model, sf.randn(2, 3, 8, 8))
    assert rep.peak > 0
    # Dropout2d keeps one bool per (batch, channel), not one per element
    assert rep.by_kind["dropout masks"] == 2 * 4


# ---------------------------------------------------------------- channel-wise dropout

@pytest.mark.parametrize("cls,shape", [
    ("Dropout1d", (400, 16, 5)), ("Dropout1d", (16, 5)),
    ("Dropout2d", (400, 16, 3, 4)), ("Dropout3d", (400, 16, 2, 3, 2)),
    ("Dropout3d", (16, 2, 3, 2)), ("FeatureAlphaDropout", (400, 16, 3, 2)),
])
def test_channel_dropout_zeroes_whole_channels(cls, shape):
    p = 0.3
    sf.manual_seed(1)
    x = sf.ones(*shape, requires_grad=True)
    layer = getattr(sf.nn, cls)(p)
    y = layer(x)
    assert y.shape == shape
    out = y.detach().numpy()
    channels = out.reshape(shape[0], shape[1], -1) if len(shape) > 2 else out[None]
    if cls == "Dropout1d" and len(shape) == 2 or cls == "Dropout3d" and len(shape) == 4:
        channels = out.reshape(1, shape[0], -1)  # unbatched: (C, *)
    assert np.all(channels == channels[..., :1])  # one draw per channel
    if cls == "FeatureAlphaDropout":  # ATen's a and b: a * (x + alpha * p) kept, else below
        scale = 1 / math.sqrt((SELU_ALPHA ** 2 * p + 1) * (1 - p))
        values = [SELU_ALPHA * scale * (p - 1), scale * (1 + SELU_ALPHA * p)]
    else:
        scale = 1 / (1 - p)
        values = [0.0, scale]
    # the same two values as torch's layer gives on the same input (torch: unseeded)
    np.testing.assert_allclose(np.unique(channels), values, rtol=1e-6)
    theirs = np.unique(getattr(torch.nn, cls)(p)(torch.ones(*shape)).numpy())
    assert all(np.isclose(theirs[:, None], values, rtol=1e-6).any(1))
    kept = channels[..., 0] == values[1]
    if kept.size >= 1000:  # the dropped fraction is p, within 4 sigma
        assert abs(1 - kept.mean() - p) < 4 * math.sqrt(p * (1 - p) / kept.size)
    y.sum().backward()  # the gradient is the mask times the scale
    grad = x.grad.numpy().reshape(channels.shape)
    expected = np.broadcast_to(np.where(kept, scale, 0.0)[..., None], grad.shape)
    np.testing.assert_allclose(grad, expected, rtol=1e-6)
    layer.eval()
    assert np.array_equal(layer(x).detach().numpy(), x.detach().numpy())


def _warnings_of(fn, x) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn(x, 0.5, True)
    return [str(w.message) for w in seen]


@pytest.mark.parametrize("name,shape", [
    ("dropout2d", (2, 3, 4)), ("dropout2d", (2, 3)), ("dropout2d", (2, 3, 4, 5, 6)),
    ("dropout3d", (2, 3, 4)), ("dropout3d", (2, 3, 4, 5)), ("dropout2d", (2, 3, 4, 5)),
])
def test_channel_dropout_warns_as_torch(name, shape):
    ours = _warnings_of(getattr(F, name), sf.ones(*shape))
    assert ours == _warnings_of(getattr(TF, name), torch.ones(*shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert getattr(F, name)(sf.ones(*shape), 0.5).shape == shape


def test_channel_dropout_errors_as_torch():
    for shape in [(3,), (2, 3, 4, 5)]:
        with pytest.raises(RuntimeError, match="Expected 2D or 3D input"):
            TF.dropout1d(torch.ones(*shape))
        with pytest.raises(sf.ShapeError, match="Expected 2D or 3D input"):
            F.dropout1d(sf.ones(*shape))
    with pytest.raises(ValueError, match="between 0 and 1"):
        sf.nn.Dropout2d(1.5)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.feature_alpha_dropout(sf.ones(3), 0.5, True)


def test_channel_dropout_on_meta():
    x = sf.empty(4, 6, 5, 5, device="meta", requires_grad=True)
    y = sf.nn.Dropout2d()(x)
    assert y.device.type == "meta" and y.shape == (4, 6, 5, 5)
    y.sum().backward()
    assert x.grad.shape == (4, 6, 5, 5)


# ---------------------------------------------------------------- alpha dropout

@pytest.mark.parametrize("p", [0.1, 0.5])
def test_alpha_dropout_formula_matches_torch(p):
    x = np.full((50000,), 0.7, dtype=np.float64)
    sf.manual_seed(0)
    ours = F.alpha_dropout(sf.tensor(x), p, True).numpy()
    theirs = TF.alpha_dropout(torch.tensor(x), p, True).numpy()
    a = 1 / math.sqrt((SELU_ALPHA ** 2 * p + 1) * (1 - p))
    expected = {a * 0.7 + SELU_ALPHA * a * p, SELU_ALPHA * a * (p - 1)}
    np.testing.assert_allclose(np.unique(ours), sorted(expected), rtol=1e-12)
    np.testing.assert_allclose(np.unique(theirs), sorted(expected), rtol=1e-12)
    assert abs((ours == max(expected)).mean() - (1 - p)) < 0.02


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_alpha_dropout_keeps_selu_moments_as_torch(p):
    z = np.random.default_rng(0).standard_normal(400_000).astype(np.float32)
    sf.manual_seed(0)
    layer = sf.nn.AlphaDropout(p)
    ours = layer(F.selu(sf.tensor(z))).numpy().astype(np.float64)
    theirs = torch.nn.AlphaDropout(p)(torch.selu(torch.tensor(z))).numpy().astype(np.float64)
    for got in (ours, theirs):  # SELU of N(0, 1) has mean 0 and variance 1: both kept
        assert abs(got.mean()) < 0.01 and abs(got.std() - 1) < 0.01
    assert abs(ours.mean() - theirs.mean()) < 0.01 and abs(ours.std() - theirs.std()) < 0.01
    layer.eval()
    assert np.array_equal(layer(sf.tensor(z)).numpy(), z)


def test_alpha_dropout_edges_as_torch():
    x = np.arange(6.0).reshape(2, 3)
    for p in (0.0, 1.0):
        for ours, theirs in ((F.alpha_dropout, TF.alpha_dropout),
                             (F.feature_alpha_dropout, TF.feature_alpha_dropout)):
            got = ours(sf.tensor(x), p, True).numpy()
            assert np.array_equal(got, theirs(torch.tensor(x), p, True).numpy())
    assert np.array_equal(F.alpha_dropout(sf.tensor(x), 0.5).numpy(), x)  # training=False
    xs = sf.tensor(x, requires_grad=True)
    y = F.alpha_dropout(xs, 0.5, True)
    y.sum().backward()
    a = 1 / math.sqrt((SELU_ALPHA ** 2 * 0.5 + 1) * 0.5)
    kept = y.detach().numpy() != SELU_ALPHA * a * (0.5 - 1)
    np.testing.assert_allclose(xs.grad.numpy(), np.where(kept, a, 0.0), rtol=1e-12)


# ---------------------------------------------------------------- nn.init

def test_every_torch_init_name_exists():
    skip = {"Callable", "Literal", "ParamSpec", "Tensor", "TypeVar", "math", "torch",
            "warnings"}
    names = [n for n in dir(torch.nn.init) if not n.startswith("_") and n not in skip]
    assert [n for n in names if not callable(getattr(init, n, None))] == []
    for old in ("uniform", "normal", "xavier_uniform", "kaiming_normal", "orthogonal"):
        with pytest.warns(FutureWarning, match=f"nn.init.{old}_"):
            assert getattr(init, old)(sf.empty(3, 4)).shape == (3, 4)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (6, 2, 3), (2, 3, 2, 2)])
def test_orthogonal(shape):
    w = sf.empty(*shape, requires_grad=True)
    assert init.orthogonal_(w, gain=2.0) is w and w.grad_fn is None and w.is_leaf
    m = w.detach().numpy().astype(np.float64).reshape(shape[0], -1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4 * np.eye(len(gram)), atol=1e-5)
    t = torch.nn.init.orthogonal_(torch.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    tgram = t @ t.T if t.shape[0] <= t.shape[1] else t.T @ t
    np.testing.assert_allclose(tgram, gram, atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(sf.empty(3))


def test_orthogonal_is_uniform_over_signs():
    sf.manual_seed(0)  # the sign fix makes diagonal entries symmetric around 0
    diag = [init.orthogonal_(sf.empty(3, 3)).numpy()[0, 0] for _ in range(400)]
    assert abs(np.mean(np.array(diag) > 0) - 0.5) < 0.1


@pytest.mark.parametrize("shape,groups", [
    ((4, 3, 3), 1), ((6, 4, 3, 3), 2), ((6, 2, 3, 3, 3), 3), ((2, 5, 4), 1), ((4, 2, 2, 2), 2),
])
def test_dirac_is_torchs_tensor(shape, groups):
    ours = init.dirac_(sf.full(shape, 7.0), groups).numpy()
    assert np.array_equal(ours, torch.nn.init.dirac_(torch.full(shape, 7.0), groups).numpy())


def test_dirac_and_eye_errors_and_eye_values():
    for shape in [(3, 5), (5, 3), (4, 4)]:
        assert np.array_equal(init.eye_(sf.full(shape, 2.0)).numpy(),
                              torch.nn.init.eye_(torch.full(shape, 2.0)).numpy())
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        init.dirac_(sf.empty(3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(sf.empty(5, 2, 3), groups=2)
    assert init.dirac_(sf.empty(4, 2, 3, device="meta"), 2).shape == (4, 2, 3)


@pytest.mark.parametrize("rows,cols,sparsity", [(10, 7, 0.25), (200, 300, 0.9), (5, 4, 0.0)])
def test_sparse_zeros_per_column(rows, cols, sparsity):
    w = init.sparse_(sf.empty(rows, cols), sparsity, std=0.5).numpy()
    t = torch.nn.init.sparse_(torch.empty(rows, cols), sparsity, std=0.5).numpy()
    expected = math.ceil(sparsity * rows)
    assert np.all((w == 0).sum(0) == expected) and np.all((t == 0).sum(0) == expected)
    if w.size > 1000:
        assert abs(w[w != 0].std() - 0.5) < 0.02 and abs(t[t != 0].std() - 0.5) < 0.02
    with pytest.raises(ValueError, match="2 dimensions"):
        init.sparse_(sf.empty(2, 3, 4), 0.5)


def test_generator_keyword_reproduces():
    for fn in (init.orthogonal_, lambda t, generator: init.sparse_(t, 0.5, generator=generator),
               init.xavier_uniform_, init.kaiming_normal_, init.trunc_normal_):
        a = fn(sf.empty(6, 8), generator=sf.Generator().manual_seed(3)).numpy().copy()
        b = fn(sf.empty(6, 8), generator=sf.Generator().manual_seed(3)).numpy()
        c = fn(sf.empty(6, 8), generator=sf.Generator().manual_seed(4)).numpy()
        assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_trunc_normal_warns_as_torch():
    with pytest.warns(UserWarning, match="more than 2 std") as ours:
        init.trunc_normal_(sf.empty(10), mean=5.0, std=1.0, a=-2.0, b=2.0)
    with pytest.warns(UserWarning, match="more than 2 std") as theirs:
        torch.nn.init.trunc_normal_(torch.empty(10), mean=5.0, std=1.0, a=-2.0, b=2.0)
    assert str(ours[0].message) == str(theirs[0].message)


def test_new_inits_record_no_graph_and_skip_meta():
    p = sf.nn.Parameter(sf.empty(4, 3, 3))
    for fn in (init.orthogonal_, init.dirac_):
        assert fn(p) is p and p.grad_fn is None and p.requires_grad
    meta = sf.empty(4, 3, device="meta")
    assert init.orthogonal_(meta) is meta and init.sparse_(meta, 0.5) is meta
