"""quantize(model, scheme) on the bundled models: outputs, copies, module selection, errors,
and the int8 scheme against PyTorch's quantize_dynamic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.errors import ShapeError
from shapeflow.quant import QuantError, QuantizedEmbedding, QuantizedLinear, quantize


def sqnr(ref, q) -> float:
    ref, q = np.asarray(ref, np.float64), np.asarray(q, np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / np.sum((ref - q) ** 2)))


def _mlp(seed=0):
    sf.manual_seed(seed)
    return sf.models.MLP(128, [128, 128], 10)


def _vit(seed=0):
    sf.manual_seed(seed)
    return sf.models.ViT(image_size=16, patch_size=4, in_channels=2, num_classes=10, dim=64,
                         depth=2, heads=4)  # patch vectors of 32: int4-g32 fits


def _gpt(seed=0):
    sf.manual_seed(seed)
    return sf.models.GPT(vocab_size=96, block_size=32, n_layer=2, n_head=4, n_embd=64)


def _params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("scheme", list(sf.quant.SCHEMES))
def test_mlp_every_scheme_close_and_original_untouched(scheme):
    m = _mlp()
    before = _params(m)
    x = sf.randn(32, 128)
    q = quantize(m, scheme, calibration=[x] if scheme == "fp8-e4m3" else None)
    assert all(isinstance(q.net[i], QuantizedLinear) for i in (0, 2, 4))
    assert all(type(m.net[i]) is sf.nn.Linear for i in (0, 2, 4))  # the original stays float
    after = _params(m)
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    ref, out = m(x).detach().numpy(), q(x).numpy()
    assert out.dtype == np.float32 and out.shape == ref.shape
    floor = {"int8": 35, "int8-weight": 38, "int4-g32": 15, "int4-g128": 14, "fp8-e4m3": 22}
    assert sqnr(ref, out) > floor[scheme], (scheme, sqnr(ref, out))
    assert not q(x).requires_grad


def test_int8_linear_matches_its_integer_definition():
    """y = (round(x/sx) . Wq^T) * sx * sw + b, with the product in exact integers."""
    m = _mlp(1)
    q = quantize(m, "int8")
    lin = q.net[0]
    x = np.random.default_rng(0).standard_normal((5, 128)).astype(np.float32)
    x[3] = 0.0  # an all-zero token
    sx = np.abs(x).max(axis=1) / np.float32(127)
    sx[sx == 0] = 1
    xq = np.clip(np.rint(x / sx[:, None]), -127, 127).astype(np.int64)
    wq = lin.weight_q.int_repr().astype(np.int64)
    acc = (xq @ wq.T).astype(np.float32)
    want = acc * sx[:, None] * lin.weight_scale.numpy() + lin.bias.numpy()
    np.testing.assert_array_equal(lin(sf.tensor(x)).numpy(), want)
    np.testing.assert_array_equal(lin(sf.tensor(x)).numpy()[3], lin.bias.numpy())


@pytest.mark.parametrize("env", [{"SHAPEFLOW_KERNELS": "0"}, {"SHAPEFLOW_BLAS": "numpy"}])
def test_int8_same_output_on_every_product_path(monkeypatch, env):
    from shapeflow.backend.cpu import igemm

    m = _mlp(2)
    q = quantize(m, "int8")
    x = sf.randn(300, 128)
    default = q(x).numpy()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(igemm, "_state", {"loaded": False, "fn": None, "vnni": None,
                                          "refused": None})
    assert igemm.backend() != "vnni"
    np.testing.assert_array_equal(q(x).numpy(), default)


def test_weight_only_schemes_dequantize_the_weight():
    m = _mlp(3)
    x = sf.randn(4, 128)
    for scheme in ("int8-weight", "int4-g32"):
        lin = quantize(m, scheme).net[0]
        w = lin.weight_q.dequantize().numpy()
        want = x.numpy() @ w.T + lin.bias.numpy()
        np.testing.assert_allclose(lin(x).numpy(), want, rtol=1e-5, atol=1e-6)


def test_modules_selects_what_is_quantized():
    m = _mlp()
    q = quantize(m, "int8", modules=["net.2"])
    assert type(q.net[0]) is sf.nn.Linear and type(q.net[4]) is sf.nn.Linear
    assert isinstance(q.net[2], QuantizedLinear)
    assert sf.quant.eligible(m, "int8") == ["net.0", "net.2", "net.4"]
    assert quantize(m, "int8", modules=[]).net[0].weight is not m.net[0].weight
    with pytest.raises(QuantError, match="no module 'net.9'"):
        quantize(m, "int8", modules=["net.9"])
    with pytest.raises(QuantError, match="'net.1' \\(ReLU\\) cannot be quantized"):
        quantize(m, "int8", modules=["net.1"])


def test_unknown_scheme_lists_the_known_ones():
    with pytest.raises(QuantError, match="unknown scheme 'int7'") as e:
        quantize(_mlp(), "int7")
    assert all(s in str(e.value) for s in sf.quant.SCHEMES)


def test_nan_weight_names_the_module():
    m = _mlp()
    with sf.no_grad():
        m.net[2].weight._data[1, 1] = np.nan
    with pytest.raises(QuantError, match=r"net\.2\.weight.*NaN"):
        quantize(m, "int8")


def test_calibration_batches_of_the_wrong_shape():
    m = _mlp()
    with pytest.raises(ShapeError, match=r"calibration batch 1 .*\[8, 32\].*does not fit"):
        quantize(m, "fp8-e4m3", calibration=[sf.randn(8, 128), sf.randn(8, 32)])
    with pytest.raises(QuantError, match="calibration batch 0 is a str"):
        quantize(m, "fp8-e4m3", calibration=["x"])
    with pytest.raises(QuantError, match="gave no batches"):
        quantize(m, "fp8-e4m3", calibration=[])


def test_fp8_calibration_max_and_percentile():
    m = _mlp()
    x = sf.randn(64, 128)
    q = quantize(m, "fp8-e4m3", calibration=[x[:32], (x[32:],)])
    s = float(q.net[0].input_scale.numpy())
    assert s == pytest.approx(float(np.abs(x.numpy()).max()) / 448, rel=1e-6)
    qp = quantize(m, "fp8-e4m3", calibration=[x], percentile=99.0)
    sp = float(qp.net[0].input_scale.numpy())
    assert sp == pytest.approx(np.percentile(np.abs(x.numpy()), 99.0) / 448, rel=1e-6)
    assert sp < s
    # without calibration: a scale per call from the call's max |x|, no buffer
    qd = quantize(m, "fp8-e4m3")
    assert "input_scale" not in dict(qd.net[0].named_buffers())
    # the first layer sees the same inputs as in calibration: the same scale
    np.testing.assert_array_equal(qd.net[0](x).numpy(), q.net[0](x).numpy())


def test_vit_schemes():
    m = _vit()
    x = sf.randn(4, 2, 16, 16)
    ref = m(x).detach().numpy()
    for scheme, floor in (("int8", 30), ("int8-weight", 35), ("int4-g32", 12),
                          ("fp8-e4m3", 20)):
        q = quantize(m, scheme, calibration=[x])
        n = sum(isinstance(mod, QuantizedLinear) for mod in q.modules())
        assert n == 1 + 2 * 4 + 1
        assert sqnr(ref, q(x).numpy()) > floor, scheme


def test_group_size_that_does_not_divide_names_the_module():
    sf.manual_seed(0)
    m = sf.models.ViT(image_size=8, patch_size=4, in_channels=3, num_classes=4, dim=32,
                      depth=1, heads=2)  # the patch projection takes 48 inputs
    with pytest.raises(ShapeError, match=r"int4-g32 .*Linear 'project' has 48"):
        quantize(m, "int4-g32")
    names = [n for n in sf.quant.eligible(m, "int4-g32") if n != "project"]
    q = quantize(m, "int4-g32", modules=names)
    assert type(q.project) is sf.nn.Linear
    q(sf.randn(2, 3, 8, 8))


def test_gpt_tied_embedding_shares_storage_and_runs():
    m = _gpt()
    idx = sf.randint(0, 96, (2, 16))
    ref = m(idx)[0].detach().numpy()
    for scheme in ("int8", "int4-g32", "fp8-e4m3"):
        q = quantize(m, scheme)
        assert isinstance(q.transformer.wte, QuantizedEmbedding)
        assert isinstance(q.lm_head, QuantizedLinear)
        assert q.lm_head.weight_qdata is q.transformer.wte.weight_qdata  # one copy
        logits, _ = q(idx)
        assert logits.shape == (2, 16, 96)
        assert sqnr(ref, logits.numpy()) > (25 if scheme == "int8" else 10), scheme
        out = q.generate(idx[:, :4], 3, do_sample=False)
        assert out.shape == (2, 7)


def test_embedding_lookup_and_errors():
    sf.manual_seed(0)
    e = sf.nn.Embedding(10, 32)
    q = QuantizedEmbedding.from_float(e, "int4-g32")
    idx = sf.tensor([[1, 9], [0, 1]])
    w = q.weight_q.dequantize().numpy()
    np.testing.assert_array_equal(q(idx).numpy(), w[idx.numpy()])
    with pytest.raises(IndexError, match="id 10 is out of range for 10"):
        q(sf.tensor([10]))
    with pytest.raises(TypeError, match="integer ids"):
        q(sf.randn(2))


def test_linear_input_errors():
    q = quantize(_mlp(), "int8").net[0]
    with pytest.raises(ShapeError, match="in_features=128"):
        q(sf.randn(3, 129))
    with pytest.raises(TypeError, match="floating-point"):
        q(sf.ones(3, 128, dtype=sf.int64))


def test_meta_device_gives_shapes():
    q = quantize(_gpt(), "int8")
    out, _ = q.to("meta")(sf.zeros(2, 8, dtype=sf.int64, device="meta"))
    assert out.shape == (2, 8, 96) and out.device.type == "meta"


# ---- against PyTorch --------------------------------------------------------------------
def _trained_mlp():
    """An MLP trained for a few steps on a toy task, so the weights are not just random."""
    m = _mlp(4)
    opt = sf.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 10)).astype(np.float32)
    for _ in range(20):
        x = sf.tensor(rng.standard_normal((64, 128)).astype(np.float32))
        y = sf.tensor((x.numpy() @ w).argmax(1))
        loss = sf.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m


def _to_torch(m):
    layers = []
    for mod in m.net:
        if isinstance(mod, sf.nn.Linear):
            t = torch.nn.Linear(mod.in_features, mod.out_features)
            with torch.no_grad():
                t.weight.copy_(torch.from_numpy(mod.weight.detach().numpy()))
                t.bias.copy_(torch.from_numpy(mod.bias.detach().numpy()))
            layers.append(t)
        else:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).eval()


def test_int8_sqnr_at_least_pytorch_quantize_dynamic():
    m = _trained_mlp()
    tm = _to_torch(m)
    x = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)
    ref = m(sf.tensor(x)).detach().numpy()
    with torch.no_grad():
        np.testing.assert_allclose(tm(torch.from_numpy(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
        tq = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
        theirs = sqnr(ref, tq(torch.from_numpy(x)).numpy())
    ours = sqnr(ref, quantize(m, "int8")(sf.tensor(x)).numpy())
    assert ours >= theirs, (ours, theirs)
    assert ours > 30  # PyTorch's own bar for int8 models


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("env", [{}, {"SHAPEFLOW_BLAS": "numpy"}])
def test_int8_token_with_nan_or_inf_gives_a_nan_row(monkeypatch, env):
    from shapeflow.backend.cpu import igemm

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(igemm, "_state", {"loaded": False, "fn": None, "vnni": None,
                                          "refused": None})
    lin = quantize(_mlp(), "int8").net[0]
    x = np.random.default_rng(0).standard_normal((4, 128)).astype(np.float32)
    x[1, 5], x[2, 100] = np.nan, np.inf
    out = lin(sf.tensor(x)).numpy()
    assert np.isnan(out[1]).all() and np.isnan(out[2]).all()
    assert np.isfinite(out[[0, 3]]).all()
    np.testing.assert_array_equal(out[[0, 3]], lin(sf.tensor(x[[0, 3]])).numpy())


def test_module_constructors_refuse_what_they_cannot_hold():
    with pytest.raises(QuantError, match="no static input scale"):
        QuantizedLinear(4, 4, scheme="int8", static_input=True)
    with pytest.raises(QuantError, match="unknown scheme"):
        QuantizedLinear(4, 4, scheme="int2")
    q = quantize(_mlp(), "int8").to("meta")
    with pytest.raises(sf.DeviceError, match="hold no values"):
        q.net[0].weight_q  # noqa: B018


def test_deepcopy_and_requantizing_leave_quantized_layers_alone():
    import copy

    q = quantize(_mlp(), "int8", modules=["net.0"])
    x = sf.randn(3, 128)
    c = copy.deepcopy(q)
    np.testing.assert_array_equal(c(x).detach().numpy(), q(x).detach().numpy())
    assert sf.quant.eligible(q, "int8") == ["net.2", "net.4"]
    qq = quantize(q, "int4-g32")
    assert qq.net[0].scheme == "int8" and qq.net[2].scheme == "int4-g32"


@pytest.mark.parametrize("scheme", list(sf.quant.SCHEMES))
def test_empty_batch_and_strided_input(scheme):
    q = quantize(_mlp(), scheme)
    assert q(sf.randn(0, 128)).shape == (0, 10)
    x = sf.randn(128, 6)
    a, b = q(x.t()).numpy(), q(x.t().contiguous()).numpy()
    if scheme == "int8":  # integer products: independent of the layout
        np.testing.assert_array_equal(a, b)
    else:  # sgemm's rounding may depend on the operand's layout
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_module_to_double_keeps_working():
    q = quantize(_mlp(), "int8")
    x = sf.randn(5, 128)
    want = q(x).numpy()
    q.double()  # casts the float buffers (scales) and biases to float64
    assert q.net[0].weight_scale.dtype == sf.float64
    got = q(x.double()).numpy()
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.astype(np.float32), want)
