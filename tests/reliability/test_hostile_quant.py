"""Hostile quantized checkpoints: each a CheckpointError naming the field, the model unchanged.

Each file is a good `sf.quant.save` file with one config field or tensor edited: sizes that
would allocate terabytes, settings `quantize()` refuses, NaN / zero / negative scales,
wrong dtypes and shapes, missing tensors, unknown schemes. Loaded into the float model
(rebuilt) and into a quantized one of the same scheme (in place), every one must raise
CheckpointError naming what is wrong and leave the model's values, parameters and module
classes exactly as they were.
"""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.errors import CheckpointError
from shapeflow.quant import quantize

HUGE = 10**12


class Net(nn.Module):
    def __init__(self, in_features: int = 128) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, in_features, padding_idx=0)
        self.fc = nn.Linear(in_features, 32)
        self.head = nn.Linear(32, 10)

    def forward(self, ids):
        return self.head(sf.relu(self.fc(self.emb(ids))))


def _net(seed: int = 0, in_features: int = 128) -> Net:
    sf.manual_seed(seed)
    return Net(in_features)


def _quantized(scheme: str, seed: int = 0) -> nn.Module:
    """`_net(seed)` quantized: every layer whose inputs the scheme's group size divides."""
    m = _net(seed)
    group = sf.quant.get_scheme(scheme).group_size or 1
    cols = {"emb": m.emb.embedding_dim, "fc": m.fc.in_features, "head": m.head.in_features}
    calib = [sf.randint(0, 20, (4, 6))] if scheme == "fp8-e4m3" else None
    return quantize(m, scheme, calibration=calib,
                    modules=[n for n, c in cols.items() if c % group == 0])


def _snapshot(model: nn.Module) -> tuple:
    """Everything a failed load must not change: values, tensor objects, module classes."""
    values = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    objects = {k: id(v) for k, v in model.state_dict(keep_vars=True).items()}
    classes = {name: type(m) for name, m in model.named_modules()}
    return values, objects, classes


def _same(a: tuple, b: tuple) -> None:
    assert a[1] == b[1] and a[2] == b[2]
    assert a[0].keys() == b[0].keys()
    for k in a[0]:
        np.testing.assert_array_equal(a[0][k], b[0][k])


def _hostile(tmp_path, scheme: str, edit) -> str:
    """A good quantized file of `scheme` with edit(quant metadata, state_dict) applied."""
    good = tmp_path / "good.safetensors"
    sf.quant.save(_quantized(scheme), good)
    raw = sf.load(good)
    edit(raw["quant"], raw["state_dict"])
    bad = tmp_path / "bad.safetensors"
    sf.save(raw, bad)
    return bad


def _set(where: str, key: str, value):
    def edit(meta, sd):
        meta["modules"][where][key] = value
    return edit


def _tensor(key: str, fn):
    def edit(meta, sd):
        sd[key] = fn(sd[key])
    return edit


def _poke(value: float):
    def fn(t):
        a = t.numpy().copy()
        a.flat[0] = value
        return sf.from_numpy(a)
    return fn


def _pop(key: str):
    def edit(meta, sd):
        del sd[key]
    return edit


def _both(*edits):
    def edit(meta, sd):
        for e in edits:
            e(meta, sd)
    return edit


def _cast(np_dtype):
    return lambda t: sf.from_numpy(t.numpy().astype(np_dtype))


def _narrow(t):
    return sf.from_numpy(np.ascontiguousarray(t.numpy()[:, :32]))


# (scheme, edit, what the message must name); the config edits make files that loaded
# (or died with MemoryError) before, and the tensor edits files that loaded NaN or cast.
CASES = {
    "out_features 10**12": ("int8", _set("fc", "out_features", HUGE), "'out_features'"),
    "in_features 10**12": ("int8", _set("fc", "in_features", HUGE), "'in_features'"),
    "num_embeddings 10**12": ("int8-weight", _set("emb", "num_embeddings", HUGE),
                              "'num_embeddings'"),
    "embedding_dim 10**12": ("int4-g32", _set("emb", "embedding_dim", HUGE),
                             "'embedding_dim'"),
    "negative out_features": ("int8", _set("fc", "out_features", -1), "'out_features'"),
    "float in_features": ("int8", _set("fc", "in_features", 64.0), "'in_features'"),
    "bias not a bool": ("int8", _set("fc", "bias", "yes"), "'bias'"),
    "bias false, tensor kept": ("int8", _set("fc", "bias", False), "'bias'"),
    "static_input on int8": ("int8", _both(_set("fc", "static_input", True),
                                           lambda meta, sd: sd.__setitem__(
                                               "fc.input_scale", sf.ones(()))),
                             "'static_input'"),
    "padding_idx 10**12": ("int8-weight", _set("emb", "padding_idx", HUGE), "'padding_idx'"),
    "padding_idx not the model's": ("int8-weight", _set("emb", "padding_idx", 3),
                                    "'padding_idx'"),
    "unknown scheme": ("int8", _set("fc", "scheme", "int3"), "'scheme'"),
    "unknown field": ("int8", _set("fc", "zero_point", 0), "'zero_point'"),
    "in_features not the model's": ("int8", _both(_set("fc", "in_features", 32),
                                                  _tensor("fc.weight_qdata", _narrow)),
                                    "'in_features'"),
    "NaN scale": ("int8", _tensor("fc.weight_scale", _poke(np.nan)), "fc.weight_scale"),
    "inf scale": ("int8-weight", _tensor("emb.weight_scale", _poke(np.inf)),
                  "emb.weight_scale"),
    "zero scale": ("int4-g32", _tensor("fc.weight_scale", _poke(0.0)), "fc.weight_scale"),
    "negative scale": ("int4-g128", _tensor("fc.weight_scale", _poke(-0.5)),
                       "fc.weight_scale"),
    "NaN input scale": ("fp8-e4m3", _tensor("fc.input_scale", _poke(np.nan)),
                        "fc.input_scale"),
    "zero fp8 scale": ("fp8-e4m3", _tensor("head.weight_scale", _poke(0.0)),
                       "head.weight_scale"),
    "fp8 NaN code": ("fp8-e4m3", _tensor("fc.weight_qdata", _poke(0x7F)), "fc.weight_qdata"),
    "float32 group scales": ("int4-g32", _tensor("fc.weight_scale", _cast(np.float32)),
                             "fc.weight_scale"),
    "uint8 int8 data": ("int8", _tensor("fc.weight_qdata", _cast(np.uint8)), "fc.weight_qdata"),
    "qdata shape": ("int8", _tensor("fc.weight_qdata", _narrow), "fc.weight_qdata"),
    "scale shape": ("int8", _tensor("fc.weight_scale", lambda t: sf.ones(33)),
                    "fc.weight_scale"),
    "missing scale": ("int8", _pop("fc.weight_scale"), "fc.weight_scale"),
    "missing qdata": ("int4-g32", _pop("emb.weight_qdata"), "emb.weight_qdata"),
    "scale not a tensor": ("int8", _tensor("head.weight_scale", lambda t: 1.0),
                           "head.weight_scale"),
    "version True": ("int8", lambda meta, sd: meta.__setitem__("version", True), "version"),
}


@pytest.mark.parametrize("into", ["float", "quantized"])
@pytest.mark.parametrize("case", CASES)
def test_hostile_quantized_file(tmp_path, case, into):
    scheme, edit, names = CASES[case]
    path = _hostile(tmp_path, scheme, edit)
    model = _net(1) if into == "float" else _quantized(scheme, seed=1)
    before = _snapshot(model)
    with pytest.raises(CheckpointError) as info:
        sf.quant.load(path, model)
    assert names in str(info.value), str(info.value)
    assert str(path) in str(info.value)
    _same(before, _snapshot(model))


def test_in_features_quantize_refuses(tmp_path):
    """in_features=40 under int4-g32: quantize() refuses it, so must the loader (it used to
    load, and fail at the first forward)."""
    m40 = _net(0, in_features=40)
    with pytest.raises(sf.errors.ShapeError, match="not a multiple of 32"):
        quantize(m40, "int4-g32", modules=["fc"])

    def edit(meta, sd):  # the tensors a 40-input int4-g32 layer would hold
        cfg = meta["modules"]
        cfg["fc"]["in_features"] = 40
        sd["fc.weight_qdata"] = sf.zeros((32, 20), dtype=sf.uint8)
        sd["fc.weight_scale"] = sf.ones((32, 1), dtype=sf.float16)
        for k in [k for k in sd if k.startswith("emb.")]:
            del sd[k]
        del cfg["emb"]
        sd["emb.weight"] = sf.zeros((20, 40))

    path = _hostile(tmp_path, "int4-g32", edit)
    before = _snapshot(m40)
    with pytest.raises(CheckpointError, match=r"'in_features'.*32") as info:
        sf.quant.load(path, m40)
    assert "40" in str(info.value)
    _same(before, _snapshot(m40))

