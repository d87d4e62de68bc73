"""Real PyTorch .pt/.pth files (torch.save's zip format) load without running code: tensors,
views, dtypes and byte order as torch wrote them; hostile files raise CheckpointError."""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import CheckpointError

torch = pytest.importorskip("torch")


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _equal(a, t) -> None:
    assert isinstance(a, sf.Tensor) and a.shape == tuple(t.shape), (a, t)
    assert str(a.dtype) == str(t.dtype).removeprefix("torch.")
    mine = np.asarray(a.float() if a.dtype is sf.bfloat16 else a)
    assert np.array_equal(mine, (t.float() if t.dtype == torch.bfloat16 else t).numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.int16, torch.int8,
                                   torch.uint8, torch.bool, torch.uint16])
def test_dtypes(dtype):
    t = (torch.randn(3, 4) * 50).to(dtype)
    _equal(sf.load(io.BytesIO(_saved({"t": t})))["t"], t)


def test_views_shared_storages_and_strides():
    base = torch.arange(60.0).reshape(5, 12)
    obj = {"base": base, "rows": base[1:4], "cols": base[:, 3::2], "t": base.t(),
           "flat": base.view(-1)[7:20], "scalar": base[2, 5], "empty": base[:0],
           "expanded": torch.arange(3.0).expand(4, 3)}
    out = sf.load(io.BytesIO(_saved(obj)))
    for k, t in obj.items():
        _equal(out[k], t)
    # one storage in the file, one buffer after loading: a write shows in every view
    assert np.shares_memory(out["base"].data, out["cols"].data)
    out["base"]._data[1, 3] = -1.0
    assert out["rows"]._data[0, 3] == -1.0 and out["cols"]._data[1, 0] == -1.0
    # an expanded (stride 0) tensor is a copy: its elements must not alias each other
    out["expanded"]._data[0, 0] = 9.0
    assert out["expanded"]._data[1, 0] == 0.0


def test_nested_objects():
    obj = {"epoch": 3, "lr": 1e-3, "name": "run", "hist": [0.5, 0.25], "pair": (1, "a"),
           "none": None, "od": collections.OrderedDict(a=torch.ones(2)),
           "deep": {"x": [{"y": torch.zeros(1, dtype=torch.int64)}]}, "tags": {"a"},
           "fs": frozenset({1}), "c": 1 + 2j, "b": b"\x00\xff", "size": torch.Size([2, 3]),
           "dtype": torch.float16, "device": torch.device("cpu")}
    out = sf.load(io.BytesIO(_saved(obj)))
    for k in ("epoch", "lr", "name", "hist", "pair", "none", "tags", "fs", "c", "b"):
        assert out[k] == obj[k] and type(out[k]) is type(obj[k])
    assert type(out["od"]) is collections.OrderedDict
    _equal(out["od"]["a"], obj["od"]["a"])
    _equal(out["deep"]["x"][0]["y"], obj["deep"]["x"][0]["y"])
    assert out["size"] == (2, 3) and out["dtype"] is sf.float16 and out["device"] == "cpu"


def test_optimizer_state_dict():
    """The layout torch.optim.Adam's state_dict() has (built directly: optim is slow to import)."""
    sd = {"state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.randn(2, 3),
                        "exp_avg_sq": torch.rand(2, 3)}},
          "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "params": [0, 1],
                            "amsgrad": False, "foreach": None}]}
    out = sf.load(io.BytesIO(_saved(sd)))
    assert out["param_groups"] == sd["param_groups"]
    for k, t in sd["state"][0].items():
        _equal(out["state"][0][k], t)


def test_torch_state_dict_loads_into_the_same_shapeflow_model(tmp_path):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4),
                                 torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 36, 5))
    theirs.eval()
    with torch.no_grad():
        theirs[1].running_mean.uniform_(-1, 1)
    path = tmp_path / "model.pth"
    torch.save(theirs.state_dict(), path)
    mine = sf.nn.Sequential(sf.nn.Conv2d(1, 4, 3), sf.nn.BatchNorm2d(4), sf.nn.ReLU(),
                            sf.nn.Flatten(), sf.nn.Linear(4 * 36, 5))
    mine.load_state_dict(sf.load(path))
    mine.eval()
    x = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expect = theirs(torch.from_numpy(x)).numpy()
    got = np.asarray(mine(sf.from_numpy(x)))
    assert np.abs(got - expect).max() < 1e-5


def test_parameters_and_requires_grad():
    p = torch.nn.Parameter(torch.randn(3))
    out = sf.load(io.BytesIO(_saved({"p": p, "g": torch.ones(2, requires_grad=True)})))
    assert isinstance(out["p"], sf.nn.Parameter) and out["p"].requires_grad
    assert out["g"].requires_grad and type(out["g"]) is sf.Tensor


def _with_big_endian_storages(data: bytes) -> bytes:
    """The file torch would write on a big-endian machine: swapped storages, byteorder big."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in src.infolist():
            body = src.read(info)
            if info.filename.endswith("byteorder"):
                body = b"big"
            elif "/data/" in info.filename:
                body = np.frombuffer(body, np.float32).byteswap().tobytes()
            z.writestr(info.filename, body)
    return out.getvalue()


def test_big_endian_file():
    t = torch.randn(3, 2)
    out = sf.load(io.BytesIO(_with_big_endian_storages(_saved({"t": t}))))
    _equal(out["t"], t)


def test_archive_named_after_the_file(tmp_path):
    """Older torch named the archive's folder after the file ("model/data.pkl")."""
    src = zipfile.ZipFile(io.BytesIO(_saved({"w": torch.ones(2)})))
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:
        for info in src.infolist():
            z.writestr(info.filename.replace("archive/", "model/", 1), src.read(info))
    assert sf.load(path)["w"].tolist() == [1.0, 1.0]


# ---- hostile files ----------------------------------------------------------------------------

class _System:
    """A pickle that calls os.system when loaded (REDUCE)."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        import os

        return (os.system, (self.cmd,))


def _archive(pkl: bytes, records: dict[str, bytes] | None = None, compress=zipfile.ZIP_STORED,
             version: bool = True) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compress) as z:
        z.writestr("archive/data.pkl", pkl)
        if version:
            z.writestr("archive/version", "3\n")
        for name, body in (records or {}).items():
            z.writestr(f"archive/{name}", body)
    return out.getvalue()


def _hostile_pickles(marker) -> dict[str, bytes]:
    cmd = f"touch {marker}".encode()
    call = b"\x80\x02cposix\nsystem\nX" + struct.pack("<I", len(cmd)) + cmd + b"\x85R."
    builtin = (b"\x80\x02cbuiltins\nexec\nX" + struct.pack("<I", 29)
               + f"open('{marker}', 'w').close()".encode()[:29] + b"\x85R.")
    return {
        "reduce os.system": pickle.dumps(_System(f"touch {marker}"), protocol=2),
        "GLOBAL posix.system": call,
        "builtins.exec": builtin,
        "INST": b"(S'touch " + str(marker).encode() + b"'\nios\nsystem\n.",
        "OBJ": b"\x80\x02(cos\nsystem\nX" + struct.pack("<I", len(cmd)) + cmd + b"o.",
        "NEWOBJ": b"\x80\x02csubprocess\nPopen\n]X" + struct.pack("<I", 5) + b"touch"
                  + b"a\x85\x81.",
        "BUILD on a dict": b"\x80\x02}}X\x01\x00\x00\x00ab.",
        "protocol 4 STACK_GLOBAL": pickle.dumps(_System(f"touch {marker}"), protocol=4),
        "protocol 0": pickle.dumps(_System(f"touch {marker}"), protocol=0),
    }


@pytest.mark.parametrize("case", ["reduce os.system", "GLOBAL posix.system", "builtins.exec",
                                  "INST", "OBJ", "NEWOBJ", "BUILD on a dict",
                                  "protocol 4 STACK_GLOBAL", "protocol 0"])
def test_pickled_code_is_refused_and_never_runs(tmp_path, case):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    path.write_bytes(_archive(_hostile_pickles(marker)[case]))
    with pytest.raises(CheckpointError):
        sf.load(path)
    with pytest.raises(pickle.UnpicklingError):  # torch's error for this, too
        sf.load(path)
    assert not marker.exists()
    for loc in ("meta", "cpu"):
        with pytest.raises(CheckpointError):
            sf.load(path, map_location=loc)
    assert not marker.exists()


def _p(x) -> bytes:
    """The opcodes that push `x` (an int, a str or a tuple of them), no PROTO or STOP."""
    return pickle.dumps(x, protocol=2)[2:-1]


def _tensor_pickle(numel: int, offset: int, size: tuple, stride: tuple, key: str = "0",
                   storage: str = "FloatStorage") -> bytes:
    """The pickle torch writes for one tensor, with the given storage and view."""
    pid = b"(" + _p("storage") + f"ctorch\n{storage}\n".encode() + _p(key) + _p("cpu") \
        + _p(numel) + b"tQ"
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + pid + _p(offset) + _p(size)
            + _p(stride) + b"\x89ccollections\nOrderedDict\n)RtR.")


def _torch_file(numel, offset, size, stride, body: bytes | None, key="0") -> bytes:
    records = {"byteorder": b"little"}
    if body is not None:
        records["data/0"] = body
    return _archive(_tensor_pickle(numel, offset, size, stride, key), records)


@pytest.mark.parametrize("case,file,why", [
    ("missing storage", lambda: _torch_file(4, 0, (4,), (1,), None), "no record"),
    ("storage smaller than numel", lambda: _torch_file(4, 0, (4,), (1,), b"\0" * 8), "needs 16"),
    ("view past the storage", lambda: _torch_file(4, 2, (3,), (1,), b"\0" * 16), "fewer than"),
    ("stride past the storage", lambda: _torch_file(4, 0, (2, 2), (3, 1), b"\0" * 16),
     "fewer than"),
    ("negative stride", lambda: _torch_file(4, 3, (4,), (-1,), b"\0" * 16), "stride is (-1,)"),
    ("negative size", lambda: _torch_file(4, 0, (-4,), (1,), b"\0" * 16), "size is (-4,)"),
    ("huge numel", lambda: _torch_file(2**60, 0, (2**60,), (1,), b"\0" * 16), "needs"),
    ("huge expanded shape", lambda: _torch_file(4, 0, (2**40, 2**40), (0, 0), b"\0" * 16),
     "more than"),
    ("key outside data/", lambda: _torch_file(4, 0, (4,), (1,), b"\0" * 16, key="../version"),
     "no record"),
])
def test_bad_storages_are_refused(tmp_path, case, file, why):
    path = tmp_path / "bad.pt"
    path.write_bytes(file())
    # meta checks the sizes too; an expanded tensor allocates only on cpu
    for loc in (None,) if "expanded" in case else (None, "meta"):
        with pytest.raises(CheckpointError) as e:
            sf.load(path, map_location=loc)
        assert why in str(e.value)


def test_the_hostile_test_files_are_otherwise_valid(tmp_path):
    """The same builder with honest sizes loads, so each refusal above is for its one flaw."""
    body = np.arange(4, dtype=np.float32).tobytes()
    path = tmp_path / "ok.pt"
    path.write_bytes(_torch_file(4, 1, (3,), (1,), body))
    assert sf.load(path).tolist() == [1.0, 2.0, 3.0]
    assert torch.load(path, weights_only=True).tolist() == [1.0, 2.0, 3.0]


def test_truncated_garbage_and_foreign_zips(tmp_path):
    data = _saved({"w": torch.randn(100)})
    path = tmp_path / "cut.pt"
    for cut in (len(data) - 1, len(data) // 2, 30, 4):
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError):
            sf.load(path)
    path.write_bytes(b"PK\x03\x04" + np.random.default_rng(0).bytes(500))
    with pytest.raises(CheckpointError, match="zip"):
        sf.load(path)
    path.write_bytes(_archive(pickle.dumps({"w": 1}, protocol=2), version=False))
    with pytest.raises(CheckpointError, match="version"):
        sf.load(path)
    flipped = bytearray(data)
    at = data.index(b"archive/data/0") + 200  # inside the storage's bytes: the CRC catches it
    flipped[at] ^= 0xFF
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="corrupted"):
        sf.load(path)


def test_zip_bomb_is_refused_before_inflating(tmp_path):
    body = bytearray(_archive(b"\x80\x02]." + b"\0" * 100_000, compress=zipfile.ZIP_DEFLATED))
    # claim a gigantic uncompressed size for data.pkl in the central directory
    cd = body.rindex(b"PK\x01\x02archive"[:4])
    first = body.index(b"PK\x01\x02")
    assert first <= cd
    struct.pack_into("<I", body, first + 24, 0xFFFFFFF0)
    path = tmp_path / "bomb.pt"
    path.write_bytes(bytes(body))
    with pytest.raises(CheckpointError, match="zip bomb"):
        sf.load(path)


def test_a_weights_only_refusal_loads_with_weights_only_false(tmp_path):
    path = tmp_path / "np.pt"
    torch.save({"arr": np.arange(3)}, path)
    with pytest.raises(CheckpointError, match="weights_only=False"):
        sf.load(path)
    assert sf.load(path, weights_only=False)["arr"].tolist() == [0, 1, 2]
