"""Checkpoints: exact round trips, atomic writes, and clear errors for bad files."""

from __future__ import annotations

import collections
import json
import math
import os
import pickle
import struct
import zipfile

import ml_dtypes
import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import CheckpointError, DeviceError
from shapeflow.io import checkpoint, load, save

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int64, np.int32, np.int16,
          np.int8, np.uint8, np.bool_]


def _array(np_dtype, shape, rng):
    a = np.asarray(rng.standard_normal(shape) * 50)
    if np_dtype is np.bool_:
        return np.asarray(a > 0)
    return a.astype(np_dtype)


def _bits(arr: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr).tobytes()


def _same_tensor(a, b):
    assert isinstance(b, sf.Tensor)
    assert a.dtype is b.dtype and a.shape == b.shape and b.device == "cpu"
    assert _bits(a._data) == _bits(b._data)  # bit-exact, NaN payloads and -0.0 included


def _same(a, b):
    """Equal values *and* equal types, all the way down."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, sf.Tensor):
        _same_tensor(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert type(k) is type(next(x for x in b if x == k))
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


@pytest.mark.parametrize("np_dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3), (4, 5), (2, 3, 4)])
def test_tensor_round_trip_exact(tmp_path, rng, np_dtype, shape):
    t = sf.from_numpy(_array(np_dtype, shape, rng))
    save({"t": t}, tmp_path / "c.safetensors")
    out = load(tmp_path / "c.safetensors")
    assert list(out) == ["t"]
    _same_tensor(t, out["t"])
    out["t"]._data[...] = 0  # loaded tensors are writable (optimizers update in place)


def test_model_state_dict_round_trip(tmp_path, rng):
    sd = {
        "embed.weight": sf.from_numpy(_array(np.float32, (11, 4), rng)),
        "blocks.0.ln.weight": sf.from_numpy(_array(ml_dtypes.bfloat16, (4,), rng)),
        "blocks.0.attn.qkv.weight": sf.from_numpy(_array(np.float16, (12, 4), rng)),
        "blocks.0.mask": sf.from_numpy(np.tril(np.ones((3, 3), bool))),
        "step_count": sf.from_numpy(np.array(7, np.int64)),
        "head.bias": sf.from_numpy(np.array([np.nan, -0.0, np.inf, 1e-30], np.float64)),
    }
    save(sd, tmp_path / "model.st")
    out = load(tmp_path / "model.st")
    _same(sd, out)
    assert all(not t.requires_grad for t in out.values())


def test_optimizer_state_dict_round_trip(tmp_path, rng):
    sd = {
        "state": {
            0: {"step": 3, "exp_avg": sf.from_numpy(_array(np.float32, (2, 2), rng)),
                "exp_avg_sq": sf.from_numpy(_array(np.float32, (2, 2), rng))},
            1: {"step": 3, "exp_avg": sf.from_numpy(_array(ml_dtypes.bfloat16, (5,), rng)),
                "momentum_buffer": None},
        },
        "param_groups": [
            {"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
             "amsgrad": False, "foreach": None, "params": [0, 1], "name": "décodeur ✓"},
        ],
    }
    save(sd, tmp_path / "opt.st")
    out = load(tmp_path / "opt.st")
    _same(sd, out)
    assert type(next(iter(out["state"]))) is int
    assert out["param_groups"][0]["betas"] == (0.9, 0.999)


def test_nested_types_round_trip(tmp_path):
    obj = {
        "tuple": (1, (2.5, "x"), [None, True]),
        "empty": ((), [], {}, ""),
        "int_keys": {1: "a", -2: "b", 10**30: "big"},
        "mixed_keys": {(1, "a"): 1, None: 2, 2.5: 3, True: 4, "s": 5},
        "ordered": collections.OrderedDict([("b", 1), ("a", 2)]),
        "floats": [float("nan"), float("inf"), -float("inf"), -0.0, 0.1, 1e308, 5e-324],
        "ints": [0, -1, 2**63, -(2**70)],
        "numpy": [np.float32(1.5), np.int64(-3), np.bool_(True), np.float64(0.1),
                  ml_dtypes.bfloat16(0.375), np.uint8(255)],
        "ndarray": np.arange(6, dtype=np.int16).reshape(2, 3),
        "dtype": sf.bfloat16,
        "tensor_in_list": [sf.ones(2), (sf.zeros(1, dtype=sf.int64),)],
        "key with.dots": {"and/slashes": sf.full((2,), 3.0)},
    }
    save(obj, tmp_path / "n.st")
    out = load(tmp_path / "n.st")
    _same(obj, out)
    assert out["dtype"] is sf.bfloat16
    assert math.copysign(1, out["floats"][3]) == -1


def test_root_may_be_a_tensor_or_a_list(tmp_path):
    save(sf.arange(5), tmp_path / "t.st")
    _same_tensor(sf.arange(5), load(tmp_path / "t.st"))
    save([1, (2,)], tmp_path / "l.st")
    _same([1, (2,)], load(tmp_path / "l.st"))


def test_shared_tensor_stored_once_and_name_collisions(tmp_path):
    w = sf.randn(3, 3)
    save({"a": w, "b": w, "c": {"d": sf.ones(1)}, "c.d": sf.zeros(1)}, tmp_path / "s.st")
    out = load(tmp_path / "s.st")
    assert out["a"] is out["b"]
    assert np.asarray(out["c"]["d"]).tolist() == [1.0] and np.asarray(out["c.d"]).tolist() == [0]


def test_grad_and_views_and_noncontiguous(tmp_path):
    w = sf.randn(4, 3, requires_grad=True)
    t = sf.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4).T)  # a transposed view
    save({"w": w, "t": t}, tmp_path / "g.st")
    out = load(tmp_path / "g.st")
    assert not out["w"].requires_grad and np.array_equal(out["w"].data, w.data)
    assert np.array_equal(out["t"].data, t.data) and out["t"].shape == (4, 3)


def test_flat_state_dict_is_plain_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    sd = {"w": sf.randn(2, 3), "b": sf.from_numpy(np.array([1.5, -2.25], ml_dtypes.bfloat16))}
    save(sd, tmp_path / "sf.st")
    theirs = load_file(str(tmp_path / "sf.st"))
    assert set(theirs) == {"w", "b"} and theirs["b"].dtype == torch.bfloat16
    assert theirs["b"].float().tolist() == [1.5, -2.25]
    assert np.array_equal(theirs["w"].numpy(), sd["w"].data)
    # and a file PyTorch wrote loads as a dict of name -> Tensor
    save_file({"x": torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "i": torch.arange(3)},
              str(tmp_path / "pt.st"))
    mine = load(tmp_path / "pt.st")
    assert mine["x"].dtype is sf.bfloat16 and mine["x"].tolist() == [1.0, 2.0]
    assert mine["i"].dtype is sf.int64 and mine["i"].tolist() == [0, 1, 2]


def test_map_location_meta_reads_only_shapes(tmp_path):
    save({"w": sf.randn(3, 4, dtype=sf.float16), "n": 2}, tmp_path / "m.st")
    out = load(tmp_path / "m.st", map_location="meta")
    assert out["w"].device == "meta" and out["w"].shape == (3, 4) and out["w"].dtype is sf.float16
    assert out["n"] == 2


def test_meta_tensor_cannot_be_saved(tmp_path):
    with pytest.raises(DeviceError, match=r"\['layer'\]\['weight'\]"):
        save({"layer": {"weight": sf.zeros(2, 2, device="meta")}}, tmp_path / "x.st")
    assert list(tmp_path.iterdir()) == []


def test_unsupported_values_raise_type_error(tmp_path):
    # what neither safetensors nor pickle can hold (a set now goes to PyTorch's zip format)
    with pytest.raises(TypeError, match=r"function at obj\['a'\]\[1\]"):
        save({"a": [1, lambda: 0]}, tmp_path / "x.st")
    with pytest.raises(TypeError):
        save({"a": collections.namedtuple("P", "x")(1)}, tmp_path / "x.st")
    assert list(tmp_path.iterdir()) == []


# ---- atomic writes ---------------------------------------------------------------------------

def _crash_halfway(f, data):
    f.write(data[: len(data) // 2])
    raise RuntimeError("simulated crash while writing")


def test_crash_during_save_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.st"
    save({"w": sf.ones(100), "step": 1}, path)
    before = path.read_bytes()
    monkeypatch.setattr(checkpoint, "_write_bytes", _crash_halfway)
    with pytest.raises(RuntimeError, match="simulated crash"):
        save({"w": sf.zeros(1000), "step": 2}, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.st"]  # no temporary left
    monkeypatch.undo()
    assert load(path)["step"] == 1


def test_crash_before_first_save_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "_write_bytes", _crash_halfway)
    with pytest.raises(RuntimeError):
        save({"w": sf.ones(10)}, tmp_path / "new.st")
    assert list(tmp_path.iterdir()) == []


def test_failed_fsync_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.st"
    save({"v": 1}, path)
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        save({"v": 2}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["ckpt.st"]


def test_save_writes_through_fsync_and_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(checkpoint.os, "fsync", lambda fd: (calls.append("fsync"),
                                                            real_fsync(fd)))
    monkeypatch.setattr(checkpoint.os, "replace", lambda a, b: (calls.append(("replace", a, b)),
                                                                real_replace(a, b)))
    path = tmp_path / "c.st"
    save({"x": 1}, path)
    assert calls[0] == "fsync"
    _, src, dst = calls[1]
    assert os.path.dirname(src) == str(tmp_path) and dst == str(path)
    assert load(path) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["c.st"]


def test_overwrite_and_file_mode(tmp_path):
    path = tmp_path / "c.st"
    save({"x": 1}, path)
    save({"x": 2}, path)
    assert load(path) == {"x": 2}
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_save_into_missing_folder(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere"):
        save({"x": 1}, tmp_path / "nowhere" / "c.st")


# ---- bad files -------------------------------------------------------------------------------

def _load_error(path) -> str:
    with pytest.raises(CheckpointError) as info:
        load(path)
    assert isinstance(info.value, OSError)
    msg = str(info.value)
    assert str(path) in msg
    return msg


def test_missing_file(tmp_path):
    assert "no such file" in _load_error(tmp_path / "absent.st")


def test_folder_instead_of_file(tmp_path):
    assert "folder" in _load_error(tmp_path)


@pytest.mark.parametrize("cut", ["empty", 4, 8, "mid-header", "end-header", "mid-data", -1])
def test_truncated_file(tmp_path, rng, cut):
    path = tmp_path / "c.st"
    save({"w": sf.from_numpy(_array(np.float32, (64, 64), rng)), "b": sf.ones(3)}, path)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    at = {"empty": 0, "mid-header": 8 + n // 2, "end-header": 8 + n,
          "mid-data": 8 + n + (len(data) - 8 - n) // 2}.get(cut, cut)
    path.write_bytes(data[:at])
    msg = _load_error(path)
    assert "truncated" in msg or "header length" in msg or "shorter than" in msg


def test_header_length_message(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b'{"looks": "like json", "but": "is not safetensors"}' + b" " * 150)
    msg = _load_error(path)
    n = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert f"not a safetensors file: header length {n} exceeds file size 201" in msg
    assert "text file" in msg


def test_random_bytes(tmp_path):
    rng = np.random.default_rng(1)
    for i in range(20):
        path = tmp_path / f"r{i}.st"
        path.write_bytes(rng.bytes(int(rng.integers(1, 5000))))
        _load_error(path)


def test_zip_and_pickle_and_npy(tmp_path):
    z = tmp_path / "model.pt"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("archive/data.pkl", pickle.dumps({"w": [1, 2, 3]}))
    assert "zip" in _load_error(z)
    p = tmp_path / "model.pkl"
    p.write_bytes(pickle.dumps({"w": list(range(100))}))
    assert "pickle" in _load_error(p)
    a = tmp_path / "a.npy"
    np.save(a, np.zeros(100))
    _load_error(a)


def test_small_header_length_with_garbage(tmp_path):
    path = tmp_path / "g.st"
    path.write_bytes(struct.pack("<Q", 16) + b"\xff\xfe" * 8 + b"\0" * 32)
    assert "header is not valid JSON" in _load_error(path)
    path.write_bytes(struct.pack("<Q", 2) + b"[]")
    assert "not a JSON object" in _load_error(path)


def _raw_file(path, header: dict, data: bytes = b""):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def test_metadata_not_json(tmp_path):
    path = tmp_path / "m.st"
    _raw_file(path, {"__metadata__": {"shapeflow": "{not json"}})
    assert "metadata is not valid JSON" in _load_error(path)


def test_tensor_missing(tmp_path):
    path = tmp_path / "m.st"
    doc = {"format": "shapeflow.checkpoint", "version": 1,
           "obj": {"$dict": {"x": {"$tensor": "x"}}}}
    _raw_file(path, {"__metadata__": {"shapeflow": json.dumps(doc)}})
    assert "tensor 'x' missing" in _load_error(path)


@pytest.mark.parametrize("obj", [
    {"$what": 1}, {"$tuple": 3}, {"$items": [[1]]}, {"$float": "pi"}, {"a": 1, "b": 2},
    {"$items": [[[1, 2], 3]]},  # a list cannot be a key
])
def test_corrupted_metadata(tmp_path, obj):
    path = tmp_path / "m.st"
    doc = {"format": "shapeflow.checkpoint", "version": 1, "obj": obj}
    _raw_file(path, {"__metadata__": {"shapeflow": json.dumps(doc)}})
    assert "corrupted metadata" in _load_error(path)


def test_newer_format_version(tmp_path):
    path = tmp_path / "m.st"
    doc = {"format": "shapeflow.checkpoint", "version": 99, "obj": 1}
    _raw_file(path, {"__metadata__": {"shapeflow": json.dumps(doc)}})
    assert "version 99" in _load_error(path)


@pytest.mark.parametrize("entry,data,what", [
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, b"\0" * 4, "truncated"),
    ({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}, b"\0" * 8, "needs 12 bytes"),
    ({"dtype": "U16", "shape": [2], "data_offsets": [0, 4]}, b"\0" * 4, "shapeflow lacks"),
    ({"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}, b"\0" * 8, "corrupted header"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, b"\0" * 8, "corrupted header"),
])
def test_corrupted_tensor_entries(tmp_path, entry, data, what):
    path = tmp_path / "t.st"
    _raw_file(path, {"x": entry}, data)
    assert what in _load_error(path)


def test_flipped_header_byte_never_leaks_a_raw_error(tmp_path, rng):
    path = tmp_path / "c.st"
    save({"w": sf.ones(4, 4), "meta": {"step": 3, "betas": (0.9, 0.99)}}, path)
    good = path.read_bytes()
    (n,) = struct.unpack("<Q", good[:8])
    for pos in range(8, 8 + n):
        bad = bytearray(good)
        bad[pos] ^= 0x55
        path.write_bytes(bytes(bad))
        try:
            load(path)
        except CheckpointError as e:
            assert str(path) in str(e)


def test_save_over_a_folder_raises_checkpoint_error(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(CheckpointError, match="cannot save"):
        save({"x": 1}, tmp_path / "d")
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
