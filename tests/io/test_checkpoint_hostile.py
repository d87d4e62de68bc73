"""Hostile checkpoint files: CheckpointError and nothing else, on every map_location.

Deep JSON nesting (header and shapeflow metadata), tensors that overlap or leave gaps,
huge claims in a small file; safetensors (the library) as the reference on each file;
and a model that a failed load leaves bit-identical.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
from safetensors import safe_open

import shapeflow as sf
from shapeflow import nn
from shapeflow.errors import CheckpointError, DeviceError, ShapeError
from shapeflow.io import load, save
from shapeflow.io.header import MAX_DEPTH, MAX_HEADER

LOCATIONS = [None, "meta"]
DEEP = 100_000


def _file(path, header, data: bytes = b""):
    """A safetensors file from a header (a dict, or raw bytes) and a data section."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return path


def _refused(path, map_location=None) -> str:
    with pytest.raises(CheckpointError) as info:
        load(path, map_location=map_location)
    assert isinstance(info.value, OSError) and str(path) in str(info.value)
    return str(info.value)


def _theirs(path) -> bool:
    """Whether the safetensors library reads every tensor of the file."""
    try:
        with safe_open(str(path), framework="numpy") as f:
            for name in f.keys():  # noqa: SIM118  (a safe_open handle has no __iter__)
                f.get_tensor(name)
    except Exception:
        return False
    return True


def _entry(begin, end, shape=(2,), dtype="F32", **extra) -> dict:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end], **extra}


def _nest(k: int, inner: bytes = b"") -> bytes:
    return b"[" * k + inner + b"]" * k


# ---- the reported defects ---------------------------------------------------------------------

@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("where,depth", [("root", DEEP), ("entry", DEEP + 2),
                                         ("__metadata__", DEEP + 2), ("name", 1)])
def test_deeply_nested_header_is_refused(tmp_path, map_location, where, depth):
    entry = b'"dtype":"F32","shape":[2],"data_offsets":[0,8]'
    header = {
        "root": _nest(DEEP),
        "entry": b'{"w":{' + entry + b',"extra":' + _nest(DEEP) + b"}}",
        "__metadata__": b'{"__metadata__":{"k":' + _nest(DEEP) + b'},"w":{' + entry + b"}}",
        # brackets inside a string are no nesting: this header is fine
        "name": b'{"' + b"[" * DEEP + b'":{' + entry + b"}}",
    }[where]
    path = _file(tmp_path / "deep.st", header, b"\0" * 8)
    start = time.perf_counter()
    if where == "name":
        assert load(path, map_location=map_location)["[" * DEEP].shape == (2,)
        return
    msg = _refused(path, map_location)
    assert time.perf_counter() - start < 2
    # the exact depth: measured by the scan before json.loads ever recursed
    assert f"header nests {depth} levels deep, more than the {MAX_DEPTH} allowed" in msg
    assert not _theirs(path)


def _doc(obj: str) -> str:
    return '{"format":"shapeflow.checkpoint","version":1,"obj":' + obj + "}"


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("obj,depth", [
    ("[" * DEEP + "]" * DEEP, DEEP + 1),
    ('{"$dict":{"a":' * DEEP + "1" + "}}" * DEEP, 2 * DEEP + 1),
    ('{"$tuple":[' * DEEP + "]}" * DEEP, 2 * DEEP + 1),
])
def test_deeply_nested_metadata_is_refused(tmp_path, map_location, obj, depth):
    path = _file(tmp_path / "deep.st", {"__metadata__": {"shapeflow": _doc(obj)}})
    start = time.perf_counter()
    msg = _refused(path, map_location)
    assert time.perf_counter() - start < 2
    assert f"metadata nests {depth} levels deep, more than the {MAX_DEPTH} allowed" in msg


TILINGS = {  # header, data section length: each breaks the spec's "tensors tile the data"
    "same bytes": ({"a": _entry(0, 8), "b": _entry(0, 8)}, 8),
    "partial overlap": ({"a": _entry(0, 8), "b": _entry(4, 12)}, 12),
    "one inside another": ({"a": _entry(0, 16, (4,)), "b": _entry(4, 12)}, 16),
    "empty inside another": ({"a": _entry(0, 8), "e": _entry(4, 4, (0,))}, 8),
    "gap between": ({"a": _entry(0, 8), "b": _entry(12, 20)}, 20),
    "gap at start": ({"a": _entry(4, 12)}, 12),
    "bytes after the last": ({"a": _entry(0, 8)}, 12),
    "data but no tensors": ({}, 4),
}


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("case", TILINGS)
def test_tensors_must_tile_the_data_section(tmp_path, map_location, case):
    header, n = TILINGS[case]
    path = _file(tmp_path / "t.st", header, bytes(range(n)))
    msg = _refused(path, map_location)
    assert "corrupted header" in msg
    if "same bytes" in case or "inside" in case or "overlap" in case:
        assert "claim the same bytes" in msg
    assert not _theirs(path)  # the library refuses each one too


@pytest.mark.parametrize("map_location", LOCATIONS)
def test_valid_tilings_load(tmp_path, map_location):
    header = {"b": _entry(8, 20, (3,)), "e": _entry(20, 20, (0, 5)), "z": _entry(8, 8, (2, 0)),
              "a": _entry(0, 8, (2,), "I32"), "s": _entry(20, 20, (0,), "U8")}
    data = np.array([1, -2], np.int32).tobytes() + np.array([0.5, 1, 2], np.float32).tobytes()
    path = _file(tmp_path / "ok.st", header, data)
    out = load(path, map_location=map_location)
    assert sorted(out) == ["a", "b", "e", "s", "z"] and out["e"].shape == (0, 5)
    if map_location is None:
        assert out["a"].tolist() == [1, -2] and out["b"].tolist() == [0.5, 1, 2]
        assert _theirs(path)


# ---- the rest of the spec, beside the library --------------------------------------------------

E8 = b'"dtype":"F32","shape":[2],"data_offsets":[0,8]'
SPEC = [  # label, header, data, whether the library reads it; shapeflow must agree
    ("plain", {"a": _entry(0, 8)}, 8, True),
    ("extra field", {"a": _entry(0, 8, note=[1, {"x": None}])}, 8, True),
    ("padding", b'  {"a":{' + E8 + b"}}\t\n  ", 8, True),
    ("scalar", {"a": _entry(0, 4, ())}, 4, True),
    ("64 dims", {"a": _entry(0, 4, (1,) * 64)}, 4, True),
    ("65 dims", {"a": _entry(0, 4, (1,) * 65)}, 4, False),
    ("empty, huge dim", {"a": _entry(0, 0, (0, 2**61 - 1))}, 0, True),
    ("empty, too huge dim", {"a": _entry(0, 0, (0, 2**61))}, 0, False),
    ("dims past u64", {"a": _entry(0, 0, (2**64, 0), "U8")}, 0, False),
    ("negative dim", {"a": _entry(0, 8, (-2,))}, 8, False),
    ("bool dim", b'{"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}', 4, False),
    ("float dim", b'{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', 8, False),
    ("NaN dim", b'{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,8]}}', 8, False),
    ("float offset", b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}}', 8, False),
    ("string offset", {"a": _entry(0, "8")}, 8, False),
    ("three offsets", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}, 8, False),
    ("reversed offsets", {"a": _entry(8, 0)}, 8, False),
    ("size mismatch", {"a": _entry(0, 8, (3,))}, 8, False),
    ("past the end", {"a": _entry(0, 8)}, 4, False),
    ("no shape", {"a": {"dtype": "F32", "data_offsets": [0, 8]}}, 8, False),
    ("lowercase dtype", {"a": _entry(0, 8, dtype="f32")}, 8, False),
    ("entry not an object", {"a": [0, 8]}, 8, False),
    ("header a list", b"[]", 0, False),
    ("metadata not str", {"__metadata__": {"k": 1}, "a": _entry(0, 8)}, 8, False),
    ("metadata null", {"__metadata__": None, "a": _entry(0, 8)}, 8, True),
    ("duplicate __metadata__", b'{"__metadata__":{},"__metadata__":{}}', 0, False),
    ("lone surrogate", b'{"\\ud800":{' + E8 + b"}}", 8, False),
    ("surrogate pair", b'{"\\ud83d\\ude00":{' + E8 + b"}}", 8, True),
    ("number out of range", b'{"a":{' + E8 + b',"x":1e400}}', 8, False),
    ("long int", b'{"a":{' + E8 + b',"x":' + b"9" * 400 + b"}}", 8, False),
    ("not UTF-8", b'{"\xff":{' + E8 + b"}}", 8, False),
    ("nesting at the limit", b'{"a":{' + E8 + b',"x":' + _nest(MAX_DEPTH - 2) + b"}}", 8, True),
    ("nesting past it", b'{"a":{' + E8 + b',"x":' + _nest(MAX_DEPTH - 1) + b"}}", 8, False),
]
STRICTER = [  # files the library reads and shapeflow refuses, on purpose
    ("duplicate name", b'{"a":{' + E8 + b'},"a":{' + E8 + b"}}", 8, "repeats the key 'a'"),
    ("dtype shapeflow lacks", {"a": _entry(0, 4, dtype="U16")}, 4, "shapeflow lacks"),
]


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("label,header,n,readable", SPEC, ids=[c[0] for c in SPEC])
def test_spec_agrees_with_the_safetensors_library(tmp_path, map_location, label, header, n,
                                                  readable):
    path = _file(tmp_path / "s.st", header, bytes(n))
    assert _theirs(path) == readable
    if readable:
        load(path, map_location=map_location)
    else:
        _refused(path, map_location)


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("label,header,n,why", STRICTER, ids=[c[0] for c in STRICTER])
def test_stricter_than_the_library(tmp_path, map_location, label, header, n, why):
    path = _file(tmp_path / "s.st", header, bytes(n))
    assert _theirs(path)
    assert why in _refused(path, map_location)


# ---- huge claims in small files ----------------------------------------------------------------

def _peak_while_refused(path, map_location) -> int:
    tracemalloc.start()
    try:
        _refused(path, map_location)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("entry", [
    _entry(0, 2**42, (2**40,)),
    _entry(0, 8, (2**31, 2**31), "F64"),
    _entry(0, 2**64, (2**62,) * 64, "U8"),
    _entry(0, 0, (0,) + (2**62,) * 64, "U8"),
    _entry(0, 8, (10**300, 10**300)),
    {"dtype": "F32", "shape": [1] * 100_000, "data_offsets": [0, 4]},
])
def test_huge_claims_allocate_nothing(tmp_path, map_location, entry):
    path = _file(tmp_path / "h.st", {"x": entry}, bytes(64))
    assert _peak_while_refused(path, map_location) < 8 * path.stat().st_size + (256 << 10)


@pytest.mark.parametrize("map_location", LOCATIONS)
def test_header_length_past_the_limit_is_never_read(tmp_path, map_location):
    path = tmp_path / "big.st"
    with open(path, "wb") as f:  # a sparse file: large, but nothing written past the length
        f.write(struct.pack("<Q", MAX_HEADER + 1))
        f.truncate(MAX_HEADER + 16)
    assert _peak_while_refused(path, map_location) < 1 << 20
    assert "exceeds the safetensors limit" in _refused(path, map_location)
    path.write_bytes(struct.pack("<Q", 2**64 - 1) + b"{}")
    assert "exceeds file size" in _refused(path, map_location)


# ---- limits that save and load share -------------------------------------------------------------

def _lists(k: int):
    obj: list = []
    for _ in range(k - 1):
        obj = [obj]
    return obj


@pytest.mark.parametrize("map_location", LOCATIONS)
def test_nesting_at_the_limit_round_trips(tmp_path, map_location):
    obj = _lists(MAX_DEPTH - 1)  # plus the document around it: MAX_DEPTH levels
    save(obj, tmp_path / "d.st")
    assert load(tmp_path / "d.st", map_location=map_location) == obj


def test_save_refuses_what_load_would(tmp_path):
    with pytest.raises(ValueError, match=f"nests {MAX_DEPTH + 1} levels deep"):
        save(_lists(MAX_DEPTH), tmp_path / "d.st")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("doc,what", [
    (_doc('{"$dict":{"a":1,"a":2}}'), "repeats the key 'a'"),
    (_doc('{"$np":["uint8",300]}'), "bad NumPy scalar"),
    (_doc('{"$np":["float32",[1,2]]}'), "unknown tag"),
    (_doc('{"$np":["int64",' + "9" * 30 + "]}"), "bad NumPy scalar"),
    (_doc("[NaN]"), "NaN is not a JSON value"),
    (_doc("[1e999]"), "out of range"),
    (_doc('"\\udc00"'), "lone UTF-16 surrogate"),
    ('{"format":"shapeflow.checkpoint","version":0,"obj":1}', "version 0"),
    ('{"format":"shapeflow.checkpoint","version":true,"obj":1}', "version True"),
])
def test_bad_metadata_values(tmp_path, map_location, doc, what):
    path = _file(tmp_path / "m.st", {"__metadata__": {"shapeflow": doc}})
    assert what in _refused(path, map_location)


# ---- a save killed midway leaves the old file ----------------------------------------------------

_SAVER = """
import sys, numpy as np, shapeflow as sf
from shapeflow.io import checkpoint
checkpoint._CHUNK = 1 << 12  # many small writes: a long window for the kill to land in
path = sys.argv[1]
versions = [{"v": sf.from_numpy(np.full(1 << 21, float(k), np.float32)), "step": k} for k in (1, 2)]
sf.save(versions[0], path)
print("ready", flush=True)
while True:
    for obj in versions[::-1]:
        sf.save(obj, path)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
def test_sigkill_during_save_leaves_a_whole_file(tmp_path):
    path = tmp_path / "ckpt.st"
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(sf.__file__))}
    r = random.Random(0)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], env=env,
                                stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(r.uniform(0.01, 0.1))  # several 8 MB saves in: likely mid-write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        out = load(path)  # whichever version was renamed in last, whole
        assert out["step"] in (1, 2) and (out["v"]._data == out["step"]).all()
    # a killed save cannot remove its temporary file; it never takes the checkpoint's name
    assert all(p.name == "ckpt.st" or p.name.startswith(".ckpt.st.") for p in tmp_path.iterdir())


# ---- a failed load leaves the model as it was ----------------------------------------------------

class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.register_buffer("seen", sf.zeros(2, dtype=sf.int64))


def _snapshot(model) -> dict:
    return {k: (t.dtype, t.shape, t._data.tobytes()) for k, t in model.state_dict().items()}


def _header_of(blob: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def _rewrite(blob: bytes, change) -> bytes:
    header, data = _header_of(blob)
    change(header)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def _overlap(header):
    header["fc.bias"]["data_offsets"] = header["norm.weight"]["data_offsets"]


def _deep_metadata(header):
    header["__metadata__"]["shapeflow"] = _doc("[" * DEEP + "]" * DEEP)


def _deep_header(blob: bytes) -> bytes:  # spliced as text: json.dumps would recurse
    header, data = _header_of(blob)
    h = json.dumps(header).encode().replace(b'"data_offsets"',
                                            b'"x":' + _nest(DEEP) + b',"data_offsets"', 1)
    return struct.pack("<Q", len(h)) + h + data


CORRUPTIONS = {
    "truncated": lambda b: b[:-3],
    "header length": lambda b: struct.pack("<Q", len(b)) + b[8:],
    "flipped header byte": lambda b: b[:20] + bytes([b[20] ^ 0x20]) + b[21:],
    "overlapping tensors": lambda b: _rewrite(b, _overlap),
    "deep header": _deep_header,
    "deep metadata": lambda b: _rewrite(b, _deep_metadata),
    "missing tensor": lambda b: _rewrite(b, lambda h: h.pop("norm.bias")),
}


@pytest.mark.parametrize("map_location", LOCATIONS)
@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_load_state_dict_from_a_corrupt_file_changes_nothing(tmp_path, map_location,
                                                            corruption):
    path = tmp_path / "net.st"
    src = _Net()
    src.seen._data[...] = 7
    save(src.state_dict(), path)
    path.write_bytes(CORRUPTIONS[corruption](path.read_bytes()))
    model = _Net()
    before, params = _snapshot(model), list(model.parameters())
    with pytest.raises(CheckpointError):
        model.load_state_dict(load(path, map_location=map_location))
    assert _snapshot(model) == before
    assert all(a is b for a, b in zip(model.parameters(), params))


@pytest.mark.parametrize("bad", ["shape", "dtype", "meta"])
def test_load_state_dict_that_does_not_fit_changes_nothing(tmp_path, bad):
    sd = _Net().state_dict()
    if bad == "shape":  # the last key: every earlier one would fit
        sd["seen"] = sf.zeros(3, dtype=sf.int64)
    elif bad == "dtype":
        sd["seen"] = sf.zeros(2)
    save(sd, tmp_path / "net.st")
    model = _Net()
    before, params = _snapshot(model), list(model.parameters())
    with pytest.raises((ShapeError, sf.DTypeError, DeviceError)):
        model.load_state_dict(load(tmp_path / "net.st",
                                   map_location="meta" if bad == "meta" else None))
    assert _snapshot(model) == before
    assert all(a is b for a, b in zip(model.parameters(), params))
