"""The strict seam: every op family runs on a device whose arrays are not NumPy's.

Each program below runs on cpu and on the strict device (tests/core/strict_device.py), and
its values and gradients must agree exactly. An op that makes a NumPy array on its own, or
calls a NumPy function on the device's arrays, fails here with a SeamError or NumPy's
TypeError: the proof that a device with its own arrays (CuPy's) needs no op edited.
"""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.device import register_device, unregister_device
from shapeflow.nn import functional as F
from tests.core.strict_device import StrictArray, StrictDevice

NAME = "strict"


@pytest.fixture(scope="module")
def strict():
    d = register_device(StrictDevice(NAME))
    yield d
    unregister_device(d)


def _leaf(shape, device, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if positive:
        a = np.abs(a) + 0.5
    return sf.tensor(a, device=device, requires_grad=True)


def _elementwise(device):
    x, y = _leaf((3, 4), device, 0), _leaf((4,), device, 1, positive=True)
    outs = [x + y, x - y, x * y, x / y, x ** 2, y ** x, -x, x.abs(), x.exp(), y.log(),
            y.sqrt(), x.sin(), x.tanh(), x.sigmoid(), x.relu(), F.gelu(x), F.silu(x),
            x.clamp(-0.5, 0.5), sf.where(x > 0, x, y), sf.maximum(x, y), x.pow(3),
            x * 2.5 + 1, 1.0 / y, x.floor(), (x > y).float(), sf.erf(x), x.sign(),
            sf.lerp(x, y.expand(3, 4), 0.3), F.softplus(x), F.leaky_relu(x, 0.1),
            F.elu(x), F.hardswish(x), x.to(sf.float64), x.half().float(),
            x.bfloat16().float()]
    loss = sum(o.sum() for o in outs if o.dtype.is_floating_point)
    loss.backward()
    return [*outs, x.grad, y.grad]


def _movement(device):
    x = _leaf((2, 3, 4), device, 2)
    idx = sf.tensor([2, 0, 1], device=device)
    outs = [x.reshape(6, 4), x.permute(2, 0, 1), x.transpose(0, 1), x[:, 1:, ::2],
            x[0], x[..., idx], x[:, idx], sf.cat([x, x], 1), sf.stack([x, x]),
            x.flip(2), x.roll(1, 2), F.pad(x, (1, 2)), x.unsqueeze(1).expand(2, 5, 3, 4),
            x.gather(2, idx.reshape(1, 3, 1).expand(2, 3, 1)), x.split(2, dim=2)[1],
            x.chunk(3, dim=1)[2], sf.tril(x[0]), x.repeat(1, 2, 1), x.masked_fill(x > 0, 0.0),
            x.index_select(1, idx), x.narrow(2, 1, 2), x.flatten(1), x.movedim(0, 2),
            sf.zeros(3, 4, device=device).scatter_add(0, idx.reshape(3, 1).expand(3, 4), x[0]),
            x.diagonal(dim1=1, dim2=2), x.repeat_interleave(2, dim=0), x.tile((2, 1, 1))]
    sum((o * o).sum() for o in outs).backward()
    y = x.detach().clone()
    y[0, 1] = 7.0
    y[:, :, 0] += 1.0
    return [*outs, x.grad, y]


def _sampling(device):
    """Draws come from the host generator and reach the device through from_numpy."""
    w = sf.tensor([[0.1, 0.5, 0.4, 0.0], [0.3, 0.3, 0.2, 0.2]], device=device)
    rate = sf.tensor([[0.5, 2.0, 7.0], [1.0, 0.0, 3.5]], device=device)
    return [sf.multinomial(w, 6, replacement=True), sf.multinomial(w, 3), sf.bernoulli(w),
            sf.bernoulli(w, 0.3), sf.poisson(rate), sf.normal(rate, w[:, :3]),
            sf.normal(0.5, w), sf.normal(rate, 2.0), sf.normal(1.0, 2.0, (2, 3), device=device),
            sf.empty(3, 4, device=device).uniform_(-1, 1),
            sf.empty(3, 4, device=device).normal_(0.5, 2.0),
            sf.empty(3, 4, device=device).exponential_(1.5),
            sf.empty(2, 4, device=device).bernoulli_(w),
            sf.empty(3, 4, device=device).bernoulli_(0.25)]


def _reduce(device):
    x = _leaf((3, 5), device, 3)
    v, i = x.max(dim=1)
    s, order = x.sort(dim=1)
    outs = [x.sum(), x.mean(1), x.var(0), x.std(1), x.amax(0), v, i, x.argmin(1),
            x.prod(1), x.cumsum(1), x.logsumexp(1), x.norm(), x.norm(dim=1), s, order,
            x.topk(2, dim=1)[0], x.median(dim=1)[0], x.min(), sf.cumprod(x, 1),
            x.softmax(1), x.log_softmax(0), (x > 0).any(1), (x > 0).sum(), x.kthvalue(2, 1)[0]]
    sum(o.float().sum() for o in outs if o.dtype.is_floating_point).backward()
    return [*outs, x.grad]


def _linalg(device):
    a, b = _leaf((3, 4), device, 4), _leaf((4, 5), device, 5)
    m = _leaf((2, 3, 3), device, 6)
    m = m @ m.transpose(1, 2) + 3 * sf.eye(3, device=device)
    outs = [a @ b, sf.matmul(a.unsqueeze(0).expand(2, 3, 4), b), sf.bmm(m, m), a.mT @ a,
            sf.einsum("ij,jk->ik", a, b), sf.linalg.inv(m), sf.linalg.det(m),
            sf.linalg.cholesky(m), sf.linalg.solve(m, m[..., :1]), sf.outer(a[0], b[0]),
            sf.linalg.slogdet(m)[1], sf.linalg.svd(a)[1], sf.linalg.qr(a)[1].abs(),
            sf.linalg.eigh(m)[0], sf.linalg.norm(a), sf.addmm(a[:, :1], a, b)]
    sum(o.sum() for o in outs).backward()
    return outs


def _nn_layers(device):
    sf.manual_seed(0)
    x = _leaf((4, 6), device, 7)
    t = sf.tensor([0, 2, 1, 2], device=device)
    lin = nn.Linear(6, 3).to(device)
    emb = nn.Embedding(5, 6).to(device)
    h = lin(F.layer_norm(x, (6,)))
    outs = [h, F.cross_entropy(h, t), F.nll_loss(F.log_softmax(h, 1), t),
            F.mse_loss(h, h.detach() * 0.5), F.binary_cross_entropy_with_logits(h, h.sigmoid()),
            F.l1_loss(h, h * 0), F.smooth_l1_loss(h, h * 0.3), emb(t), F.rms_norm(x, (6,)),
            F.group_norm(x.reshape(4, 6, 1), 2), F.batch_norm(x, None, None, training=True),
            F.kl_div(F.log_softmax(h, 1), F.softmax(h, 1).detach(), reduction="batchmean"),
            F.cross_entropy(h, t, label_smoothing=0.1), F.normalize(x, dim=1)]
    sum(o.sum() for o in outs).backward()
    return [*outs, x.grad, lin.weight.grad, emb.weight.grad]


def _conv(device):
    x = _leaf((2, 3, 8, 8), device, 8)
    w, w1 = _leaf((4, 3, 3, 3), device, 9), _leaf((4, 3, 3), device, 10)
    y = F.conv2d(x, w, padding=1)
    outs = [y, F.conv2d(x, w, stride=2), F.conv1d(x[:, :, 0], w1, padding=1),
            F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1),
            F.interpolate(y, scale_factor=2, mode="nearest"),
            F.interpolate(y, size=(5, 5), mode="bilinear", align_corners=False),
            F.conv_transpose2d(y, w), F.instance_norm(y),
            F.batch_norm(y, None, None, training=True), F.pixel_shuffle(y, 2)]
    sum(o.sum() for o in outs).backward()
    return [*outs, x.grad, w.grad]


def _attention(device):
    q, k, v = (_leaf((2, 2, 5, 4), device, s) for s in (11, 12, 13))
    outs = [F.scaled_dot_product_attention(q, k, v),
            F.scaled_dot_product_attention(q, k, v, is_causal=True)]
    sf.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).to(device)
    x = _leaf((2, 5, 8), device, 14)
    outs.append(mha(x, x, x)[0])
    sum(o.sum() for o in outs).backward()
    return [*outs, q.grad, k.grad, v.grad, x.grad]


def _rnn(device):
    sf.manual_seed(0)
    lstm, gru = nn.LSTM(4, 5, batch_first=True).to(device), nn.GRU(4, 5).to(device)
    cell = nn.LSTMCell(4, 5).to(device)
    x = _leaf((2, 3, 4), device, 15)
    out, (h, c) = lstm(x)
    g, _ = gru(x)
    hc = cell(x[:, 0])
    outs = [out, h, c, g, hc[0], hc[1]]
    sum(o.sum() for o in outs).backward()
    return [*outs, x.grad, lstm.weight_hh_l0.grad]


def _train(device):
    sf.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Dropout(0.1),
                          nn.Linear(8, 3)).to(device)
    opt = sf.optim.AdamW(model.parameters(), lr=1e-2)
    sgd_p = nn.Parameter(sf.ones(3, device=device))
    sgd = sf.optim.SGD([sgd_p], lr=0.1, momentum=0.9)
    sf.manual_seed(1)
    x, y = sf.randn(16, 4).to(device), sf.randint(0, 3, (16,)).to(device)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        sgd.zero_grad()
        loss = F.cross_entropy(model(x), y) + (sgd_p ** 2).sum()
        loss.backward()
        opt.step()
        sgd.step()
        losses.append(loss.detach())
    return [*losses, *model.parameters(), sgd_p]


def _special(device):
    x, p = _leaf((3, 4), device, 16), _leaf((3, 4), device, 17, positive=True)
    u = x.tanh() * 0.9  # in (-1, 1)
    i = sf.tensor([[12, -7, 0, 5], [3, 8, -9, 30], [1, -2, 3, 4]], device=device)
    j = sf.tensor([[4, 3, 6, -5], [9, 2, 3, 7], [1, 1, 2, 3]], device=device)
    s, b = sf.tensor([[1, 2, 3, 4]] * 3, device=device), i > 2
    sp = sf.special
    outs = [sf.erf(x), sf.erfc(x), sf.erfinv(u), sf.lgamma(p), sf.digamma(p), sf.sinc(x),
            sf.logit(u * 0.5 + 0.5), sf.logit(u, eps=0.2), sf.nan_to_num(p.log() / (x > 0)),
            sf.xlogy(x, p), sf.xlogy(2.0, p), sp.polygamma(2, p), sp.ndtr(x), sp.log_ndtr(x),
            sp.ndtri(u * 0.5 + 0.5), sp.erfcx(x), sp.entr(p), sp.i0(x), sp.i0e(x), sp.i1(x),
            sp.i1e(x), sp.xlog1py(x, p), sp.zeta(p.detach() + 1.0, p), sp.gammainc(p.detach(), p),
            sp.gammaincc(p.detach(), p), sp.bessel_j0(x), sp.bessel_y1(p),
            sp.modified_bessel_k0(p), sp.airy_ai(x), sp.spherical_bessel_j0(x),
            sp.chebyshev_polynomial_t(x, 5), sp.hermite_polynomial_h(x, s),
            sp.shifted_chebyshev_polynomial_u(x, 3), *sf.frexp(x), sf.ldexp(x, s),
            sf.nextafter(x, p), sf.heaviside(x.detach(), p.detach()), sf.angle(x),
            sf.fmod(x, 0.7), sf.fmod(x, p), sf.div(x, p, rounding_mode="trunc"),
            i & j, i | 6, 5 ^ i, b & (j > 2), ~i, ~b, i << s, i >> 1, 100 >> s,
            sf.gcd(i, j), sf.lcm(i, j), sf.floor_divide(i, j), sf.remainder(i, j),
            sf.fmod(i, j), sf.fmod(i, 3), sf.div(i, j, rounding_mode="trunc"),
            sf.erf(i), sf.nan_to_num(x.bfloat16()), sf.erf(x.half())]
    sum(o.float().sum() for o in outs if o.requires_grad).backward()
    return [*outs, x.grad, p.grad]


FAMILIES = {"elementwise": _elementwise, "movement": _movement, "reduce": _reduce,
            "linalg": _linalg, "nn_layers": _nn_layers, "conv": _conv,
            "attention": _attention, "rnn": _rnn, "adamw_step": _train, "special": _special,
            "sampling": _sampling}


def _host(t) -> np.ndarray:
    return t.detach().to("cpu").numpy()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_runs_on_the_strict_device_as_on_cpu(strict, family):
    program = FAMILIES[family]
    sf.manual_seed(0)
    expected = program("cpu")
    sf.manual_seed(0)
    got = program(NAME)
    assert len(got) == len(expected)
    for k, (e, g) in enumerate(zip(expected, got)):
        assert g.device is strict, (family, k)
        assert type(g._data) is StrictArray, (family, k, type(g._data))
        np.testing.assert_allclose(_host(g), _host(e), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{family} output {k}")


def test_save_load_and_to_keep_the_device_arrays(strict, tmp_path):
    x = sf.arange(6.0).reshape(2, 3).to(NAME)
    assert type(x._data) is StrictArray
    sf.save({"x": x, "n": 3}, tmp_path / "x.sf")
    back = sf.load(tmp_path / "x.sf", map_location=NAME)
    assert type(back["x"]._data) is StrictArray and back["x"].tolist() == x.tolist()
    model = nn.Linear(3, 2).to(NAME)
    state = model.state_dict()
    sf.save(state, tmp_path / "m.sf")
    fresh = nn.Linear(3, 2).to(NAME)
    fresh.load_state_dict(sf.load(tmp_path / "m.sf", map_location=NAME))
    assert all(type(p._data) is StrictArray for p in fresh.parameters())
    np.testing.assert_array_equal(_host(fresh(x)), _host(model(x)))
    assert x.to("cpu").device is sf.cpu and x.to("meta").is_meta


def test_numpy_on_a_device_array_is_refused(strict):
    x = sf.ones(3, device=NAME)
    with pytest.raises(TypeError):
        np.add(x._data, 1)
    with pytest.raises(TypeError):
        x._data + np.ones(3)
