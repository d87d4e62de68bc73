"""Quantized state dicts through safetensors: bit-exact round trips, atomic failures."""

from __future__ import annotations

import os

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import CheckpointError
from shapeflow.quant import QuantizedLinear, quantize


def _gpt(seed=0):
    sf.manual_seed(seed)
    return sf.models.GPT(vocab_size=96, block_size=32, n_layer=2, n_head=4, n_embd=64)


def _state(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("scheme", list(sf.quant.SCHEMES))
def test_round_trip_into_the_float_model_is_bit_exact(tmp_path, scheme):
    sf.manual_seed(0)
    m = sf.models.MLP(128, [128], 10)
    x = sf.randn(8, 128)
    q = quantize(m, scheme, calibration=[x] if scheme == "fp8-e4m3" else None)
    path = tmp_path / "q.safetensors"
    sf.quant.save(q, path)
    before = _state(m)
    back = sf.quant.load(path, m)
    assert back is not m and isinstance(back.net[0], QuantizedLinear)
    assert back.net[0].scheme == scheme
    for k, v in _state(m).items():  # the float model is untouched
        np.testing.assert_array_equal(v, before[k])
    want, got = _state(q), _state(back)
    assert want.keys() == got.keys()
    for k in want:
        assert want[k].dtype == got[k].dtype
        np.testing.assert_array_equal(want[k], got[k])
    np.testing.assert_array_equal(back(x).numpy(), q(x).numpy())


def test_file_holds_data_scales_and_scheme(tmp_path):
    q = quantize(_gpt(), "int4-g32")
    path = tmp_path / "g.safetensors"
    sf.quant.save(q, path)
    raw = sf.load(path)
    meta = raw["quant"]
    assert meta["format"] == "shapeflow.quant"
    assert meta["modules"]["lm_head"] == {"kind": "linear", "scheme": "int4-g32",
                                          "in_features": 64, "out_features": 96, "bias": False,
                                          "static_input": False}
    sd = raw["state_dict"]
    assert sd["lm_head.weight_qdata"].dtype == sf.uint8
    assert tuple(sd["lm_head.weight_qdata"].shape) == (96, 32)  # two int4 a byte
    assert tuple(sd["lm_head.weight_scale"].shape) == (96, 2)
    assert sd["lm_head.weight_scale"].dtype == sf.float16  # one float16 scale per group
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:  # a tied table is stored once
        names = set(f.keys())
    assert sum(n.endswith("weight_qdata") and ("wte" in n or "lm_head" in n)
               for n in names) == 1


def test_gpt_round_trip_keeps_the_tie_and_the_logits(tmp_path):
    m = _gpt()
    q = quantize(m, "int8")
    path = tmp_path / "g.safetensors"
    sf.quant.save(q, path)
    back = sf.quant.load(path, _gpt(seed=5))  # other float weights: all replaced
    assert back.lm_head.weight_qdata is back.transformer.wte.weight_qdata
    idx = sf.randint(0, 96, (2, 8))
    np.testing.assert_array_equal(back(idx)[0].numpy(), q(idx)[0].numpy())


def test_load_into_a_quantized_model_in_place(tmp_path):
    q = quantize(_gpt(0), "int8")
    other = quantize(_gpt(1), "int8")
    path = tmp_path / "g.safetensors"
    sf.quant.save(q, path)
    assert sf.quant.load(path, other) is other
    for k, v in _state(q).items():
        np.testing.assert_array_equal(_state(other)[k], v)


def test_failed_load_leaves_the_model_as_it_was(tmp_path):
    q = quantize(_gpt(0), "int8")
    path = tmp_path / "g.safetensors"
    sf.quant.save(q, path)
    other = quantize(_gpt(1), "int8")
    before = _state(other)
    raw = sf.load(path)
    del raw["state_dict"]["transformer.h.1.mlp.c_fc.weight_scale"]
    bad = tmp_path / "bad.safetensors"
    sf.save(raw, bad)
    with pytest.raises(Exception, match="c_fc.weight_scale"):
        sf.quant.load(bad, other)
    for k, v in _state(other).items():
        np.testing.assert_array_equal(v, before[k])
    with pytest.raises(CheckpointError, match="quantized differently"):
        sf.quant.load(path, quantize(_gpt(1), "int4-g32"))
    sf.save(q.state_dict(), bad)
    with pytest.raises(CheckpointError, match="not a quantized state dict"):
        sf.quant.load(bad, other)
    with pytest.raises(CheckpointError):
        sf.quant.load(tmp_path / "missing.safetensors", other)


def test_save_is_atomic(tmp_path, monkeypatch):
    q = quantize(_gpt(), "int8")
    path = tmp_path / "g.safetensors"
    sf.quant.save(q, path)
    good = path.read_bytes()
    import shapeflow.io.checkpoint as ck

    def boom(f, data):
        f.write(data[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ck, "_write_bytes", boom)
    with pytest.raises(CheckpointError, match="No space left"):
        sf.quant.save(quantize(_gpt(1), "int8"), path)
    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ["g.safetensors"]
