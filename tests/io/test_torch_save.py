"""sf.save / sf.load as torch.save / torch.load: file objects, whole modules, dataclasses,
weights_only and its allowlist, map_location; and files torch.load reads back."""

from __future__ import annotations

import collections
import dataclasses
import io
import os
import pickle

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.serialization
from shapeflow.errors import CheckpointError, DeviceError

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Config:
    """A training config, as ported programs save next to their weights."""

    width: int = 4
    lr: float = 1e-3
    name: str = "gpt"


def _bytes_of(obj, **kw) -> io.BytesIO:
    buf = io.BytesIO()
    sf.save(obj, buf, **kw)
    buf.seek(0)
    return buf


def _same(a: sf.Tensor, t) -> None:
    assert isinstance(a, sf.Tensor) and a.shape == tuple(t.shape)
    assert str(a.dtype) == str(t.dtype).removeprefix("torch.")
    assert np.array_equal(np.asarray(a.float() if a.dtype is sf.bfloat16 else a),
                          (t.float() if t.dtype == torch.bfloat16 else t).numpy())


def test_file_objects_bytesio_and_open_files(tmp_path):
    sd = {"w": sf.randn(3, 4), "b": sf.arange(3)}
    out = sf.load(_bytes_of(sd))
    assert np.array_equal(out["w"].data, sd["w"].data) and out["b"].tolist() == [0, 1, 2]
    with open(tmp_path / "m.pt", "wb") as f:
        sf.save({"cfg": Config(), "w": sd["w"]}, f)
    with open(tmp_path / "m.pt", "rb") as f, sf.serialization.safe_globals([Config]):
        out = sf.load(f)
    assert out["cfg"] == Config() and np.array_equal(out["w"].data, sd["w"].data)


def test_whole_module_needs_weights_only_false(tmp_path):
    model = sf.nn.Sequential(sf.nn.Linear(3, 4), sf.nn.ReLU(), sf.nn.Linear(4, 2))
    sf.save(model, tmp_path / "model.pt")  # torch.save(model, f), ported
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed") as e:
        sf.load(tmp_path / "model.pt")
    assert isinstance(e.value, CheckpointError)
    msg = str(e.value)
    assert "weights_only=False" in msg and "sf.serialization.add_safe_globals" in msg
    assert "shapeflow.nn" in msg
    loaded = sf.load(tmp_path / "model.pt", weights_only=False)
    assert type(loaded) is sf.nn.Sequential and isinstance(loaded[0].weight, sf.nn.Parameter)
    x = sf.randn(5, 3)
    assert np.array_equal(loaded(x).data, model(x).data)
    assert loaded[0].weight.requires_grad


def test_dataclass_loads_once_allowlisted():
    buf = _bytes_of({"config": Config(width=8), "step": 3})
    with pytest.raises(CheckpointError, match=r"GLOBAL .*Config was not an allowed global"):
        sf.load(buf)
    sf.serialization.add_safe_globals([Config])
    try:
        assert Config in sf.serialization.get_safe_globals()
        buf.seek(0)
        assert sf.load(buf) == {"config": Config(width=8), "step": 3}
    finally:
        sf.serialization.clear_safe_globals()
    assert sf.serialization.get_safe_globals() == []
    with sf.serialization.safe_globals([Config]):
        buf.seek(0)
        assert sf.load(buf)["config"].width == 8
    assert sf.serialization.get_safe_globals() == []
    buf.seek(0)
    assert sf.load(buf, weights_only=False)["config"] == Config(width=8)


def test_torch_loads_what_sf_saves_with_weights_only():
    w = sf.randn(4, 6)
    obj = {
        "model": collections.OrderedDict(weight=w, bias=sf.zeros(4, dtype=sf.float64)),
        "half": sf.randn(3).to(sf.float16), "bf16": sf.randn(2, 2).to(sf.bfloat16),
        "mask": sf.tensor([True, False]), "ids": sf.tensor([1, -2], dtype=sf.int32),
        "u16": sf.tensor([1, 65535], dtype=sf.uint16),
        "view": w[1:, ::2], "t": w.t(), "steps": 10, "names": ["a", "b"], "tags": {1, 2},
        "dtype": sf.bfloat16, "shape": sf.randn(2, 3).shape,
    }
    buf = _bytes_of(obj, format="torch")
    theirs = torch.load(buf, weights_only=True)
    for k in ("half", "bf16", "mask", "ids", "view", "t"):
        _same(obj[k], theirs[k])
    assert theirs["u16"].dtype == torch.uint16 and theirs["u16"].tolist() == [1, 65535]
    _same(obj["model"]["weight"], theirs["model"]["weight"])
    _same(obj["model"]["bias"], theirs["model"]["bias"])
    assert type(theirs["model"]) is collections.OrderedDict
    assert theirs["tags"] == {1, 2} and theirs["steps"] == 10 and theirs["names"] == ["a", "b"]
    assert theirs["dtype"] is torch.bfloat16 and theirs["shape"] == torch.Size([2, 3])
    # views of one tensor share one storage in torch too
    assert theirs["view"].untyped_storage().data_ptr() == theirs["t"].untyped_storage().data_ptr()
    assert theirs["view"].stride() == (4 * 0 + 6, 2) and theirs["view"].storage_offset() == 6
    # and sf reads its own file back, types and all
    buf.seek(0)
    mine = sf.load(buf)
    assert mine["dtype"] is sf.bfloat16 and mine["tags"] == {1, 2}
    assert mine["u16"].dtype is sf.uint16 and mine["u16"].tolist() == [1, 65535]
    assert mine["shape"] == (2, 3) and np.array_equal(mine["view"].data, obj["view"].data)


def test_parameters_keep_requires_grad_in_torch():
    p = sf.nn.Parameter(sf.randn(3))
    theirs = torch.load(_bytes_of({"p": p}, format="torch"), weights_only=True)
    assert isinstance(theirs["p"], torch.nn.Parameter) and theirs["p"].requires_grad
    _same(p.detach(), theirs["p"].detach())


def test_checkpoints_of_tensors_stay_safetensors(tmp_path):
    sf.save({"w": sf.ones(2), "meta": {"step": 1}}, tmp_path / "a.pt")
    assert (tmp_path / "a.pt").read_bytes()[:2] != b"PK"
    sf.save({"w": sf.ones(2), "tags": {"x"}}, tmp_path / "b.pt")
    assert (tmp_path / "b.pt").read_bytes()[:4] == b"PK\x03\x04"
    with pytest.raises(TypeError, match="set"):
        sf.save({"tags": {"x"}}, tmp_path / "c.pt", format="safetensors")


def test_map_location_forms(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"w": torch.arange(6.0).reshape(2, 3)}, path)
    expect = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    for loc in ("cpu", sf.device("cpu"), torch.device("cpu"), {"cpu": "cpu"},
                lambda storage, location: storage, lambda storage, location: None):
        out = sf.load(path, map_location=loc)
        assert out["w"].device == "cpu" and out["w"].tolist() == expect
    meta = sf.load(path, map_location="meta")["w"]
    assert meta.device == "meta" and meta.shape == (2, 3) and meta.dtype is sf.float32
    with pytest.raises(DeviceError, match="cuda"):
        sf.load(path, map_location="cuda:0")
    with pytest.raises(DeviceError, match="cuda"):
        sf.load(path, map_location={"cpu": "cuda:0"})


def test_cuda_checkpoint_needs_map_location(tmp_path):
    """A file saved on cuda names 'cuda:0' as its location, as torch's do."""
    path = tmp_path / "gpu.pt"
    torch.save({"w": torch.ones(2)}, path)
    # rewrite the location tag torch wrote ('cpu' -> 'cuda:0' would change the pickle's
    # lengths): build the same file with a cuda location through sf's writer instead
    with open(path, "rb") as f:
        data = f.read()
    pkl_cpu = b"X\x03\x00\x00\x00cpu"
    assert pkl_cpu in data
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in src.infolist():
            body = src.read(info)
            if info.filename.endswith("data.pkl"):
                body = body.replace(pkl_cpu, b"X\x06\x00\x00\x00cuda:0")
            z.writestr(info.filename, body)
    path.write_bytes(out.getvalue())
    with pytest.raises(DeviceError, match="map_location='cpu'"):
        sf.load(path)
    assert sf.load(path, map_location="cpu")["w"].tolist() == [1.0, 1.0]
    assert sf.load(path, map_location={"cuda:0": "cpu"})["w"].tolist() == [1.0, 1.0]
    assert torch.load(path, map_location="cpu")["w"].tolist() == [1.0, 1.0]


def test_atomic_write_for_paths(tmp_path, monkeypatch):
    from shapeflow.io import checkpoint

    path = tmp_path / "model.pt"
    sf.save({"cfg": {1, 2}}, path)
    before = path.read_bytes()

    def crash(f, data):
        f.write(data[: len(data) // 2])
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(checkpoint, "_write_bytes", crash)
    with pytest.raises(RuntimeError, match="simulated"):
        sf.save({"cfg": {3}, "w": sf.ones(3)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.pt"]


def test_unpicklable_object_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match=r"function at obj\['f'\].*cannot be pickled"):
        sf.save({"f": lambda: 0}, tmp_path / "x.pt")
    assert os.listdir(tmp_path) == []
