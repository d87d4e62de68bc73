"""Fuzzing the loader: mutated checkpoints load right or raise CheckpointError, fast and small.

Valid files written by shapeflow are mutated (header bytes, the length field, offsets,
dtypes, shapes, names, nesting, the shapeflow metadata) by a seeded mutator. Each mutant
is loaded on cpu and on meta under tracemalloc: the two must agree; a load that succeeds
must give what the file holds (read here independently, and checked against the safetensors
library); a refusal must be CheckpointError, and where the library reads the file anyway,
for a reason the library does not check.
"""

from __future__ import annotations

import collections
import json
import math
import random
import re
import struct
import time
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import load_file

import shapeflow as sf
from shapeflow.errors import CheckpointError
from shapeflow.io import header as _header
from shapeflow.io import load, save
from shapeflow.io.header import MAX_DEPTH, json_depth

NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
      "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
      "BOOL": np.bool_}
CASES_PER_SEED = 100
SECONDS_PER_LOAD = 1.0  # typical: a millisecond; a hang or a huge allocation is far slower
# refusals of files the library reads: checks it does not make (see test_checkpoint_hostile)
STRICTER = re.compile(r"metadata|version|repeats the key|shapeflow lacks")


# ---- the depth scan -----------------------------------------------------------------------------

def _reference_depth(text: str) -> int:
    """The deepest nesting a parser reaches reading `text`: a plain state machine."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


_chars = st.text(alphabet=st.sampled_from('[]{}"\\/ a:,\n\u00e9\u2603\U0001f600'), max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | _chars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_chars, kids, max_size=4),
    max_leaves=30,
)


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@pytest.mark.parametrize("scan", [3, 1 << 16])  # tiny steps: strings and runs cross them
@given(value=_json, ascii_only=st.booleans(), cut=st.floats(0, 1))
def test_json_depth_is_exact(scan, value, ascii_only, cut):
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)
    prefix = text[:int(len(text) * cut)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_header, "_SCAN", scan)
        assert json_depth(text.encode()) == _depth(value) == _reference_depth(text)
        assert json_depth(prefix.encode()) == _reference_depth(prefix)  # what a parser reaches


def test_json_depth_long_inputs():
    assert json_depth(b'["' + b"[" * 200_000 + b'"]') == 1
    assert json_depth(b"[" * 100 + b" " * 200_000 + b"]" * 100) == 100
    assert json_depth(b'["' + b"\\\\" * 100_000 + b'",[]]') == 2
    assert json_depth(b'["' + b'\\"[' * 100_000 + b'"]') == 1


# ---- the mutator ---------------------------------------------------------------------------------

def _bases(folder) -> list[bytes]:
    """Valid files, written by shapeflow: a state dict, optimizer-like state, a plain file."""
    rng = np.random.default_rng(0)
    model = collections.OrderedDict([
        ("w", sf.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))),
        ("b", sf.from_numpy(np.arange(3, dtype=np.int64))),
        ("h", sf.from_numpy(np.array([1.5, -2.0], ml_dtypes.bfloat16))),
        ("m", sf.from_numpy(np.array([True, False, True]))),
        ("e", sf.zeros(0, 2)),
        ("s", sf.from_numpy(np.array(7, np.int16))),
    ])
    optim = {
        "state": {0: {"step": 3, "exp_avg": sf.ones(2, 2)}, 1: {"momentum_buffer": None}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "name": "déc"}],
        "dtype": sf.bfloat16, "np": np.float32(1.5), "nan": float("nan"),
        "arr": np.arange(4, dtype=np.uint8), "odict": collections.OrderedDict([(2, "x")]),
    }
    out = []
    for obj in (model, optim):
        path = folder / "base.st"
        save(obj, path)
        out.append(path.read_bytes())
    header, data = _split(out[0])
    del header["__metadata__"]  # a plain safetensors file: no shapeflow metadata
    out.append(_join(header, data))
    return out


def _split(blob: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def _join(header, data: bytes) -> bytes:
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


INTS = [0, 1, 2, 3, 4, 7, 8, 12, -1, 2**31, 2**32, 2**62, 2**63, 2**64, 10**30]
JUNK = [None, True, 1.5, "8", [], [0], {}, "F32", [[0, 8]]]
DTYPES = [*NP, "U16", "F8_E4M3", "f32", "", "BOOL "]


def _tensors(header: dict) -> list[str]:
    return [k for k in header if k != "__metadata__"]


def _some_int(r: random.Random, near: int = 0) -> object:
    pick = r.random()
    if pick < 0.5:
        return max(0, near + r.randint(-8, 8))
    return r.choice(INTS) if pick < 0.9 else r.choice(JUNK)


def _mutate_header(r: random.Random, header: dict, data_len: int) -> str:
    """Change the parsed header in place; says what it did."""
    names = _tensors(header)
    if not names:
        header["x"] = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
        return "a tensor added"
    name = r.choice(names)
    info = header[name]
    kind = r.choice(["offset", "offset", "offsets", "shape", "shape", "dtype", "swap", "drop",
                     "copy", "rename", "nest", "entry", "metadata", "metadata", "metadata"])
    if kind == "offset":
        i = r.randrange(2)
        info["data_offsets"][i] = _some_int(r, info["data_offsets"][i])
    elif kind == "offsets":
        info["data_offsets"] = r.choice([[0, data_len], [data_len, data_len], [0, 0], *JUNK])
    elif kind == "shape":
        shape = info["shape"]
        op = r.randrange(5)
        if op == 0:
            shape.insert(r.randint(0, len(shape)), r.choice([0, 1, 2, 2**62]))
        elif op == 1 and shape:
            shape.pop(r.randrange(len(shape)))
        elif op == 2 and shape:
            shape[r.randrange(len(shape))] = _some_int(r, shape[0])
        elif op == 3:
            info["shape"] = r.choice([[1] * r.choice([64, 65]), list(reversed(shape)), *JUNK])
        else:
            info["shape"] = [shape]
    elif kind == "dtype":
        info["dtype"] = r.choice(DTYPES)
    elif kind == "swap" and len(names) > 1:  # two tensors trade their bytes
        other = header[r.choice([n for n in names if n != name])]
        info["data_offsets"], other["data_offsets"] = other["data_offsets"], info["data_offsets"]
    elif kind == "drop":
        del header[name]
    elif kind == "copy":
        header[name + "'"] = json.loads(json.dumps(info))
    elif kind == "rename":
        header[r.choice(["", "__metadata__", name.upper(), "[{\"\\"])] = header.pop(name)
    elif kind == "nest":
        info[r.choice(["shape", "data_offsets", "note"])] = _nested(r, 1)
    elif kind == "entry":
        header[name] = r.choice(JUNK)
    elif kind == "metadata":
        return _mutate_metadata(r, header, names)
    return f"{kind} of {name!r}"


def _nested(r: random.Random, inner) -> object:
    value = inner
    for _ in range(r.choice([1, MAX_DEPTH - 3, MAX_DEPTH - 2, MAX_DEPTH, 1000])):
        value = [value]
    return value


BAD_NODES = [
    {"$tensor": "nope"}, {"$tensor": "__metadata__"}, {"$tensor": 3}, {"$ndarray": None},
    {"$np": ["uint8", 300]}, {"$np": ["int64", 1e300]}, {"$np": ["float32", [1, 2]]},
    {"$np": ["nope", 1]}, {"$items": [[[1], 2]]}, {"$items": [[1]]}, {"$items": [[1, 2], [1, 3]]},
    {"$odict": [[{"$dict": {}}, 1]]}, {"$dict": 5}, {"$float": "pi"}, {"$dtype": "nope"},
    {"$tuple": 3}, {"a": 1, "b": 2}, {}, {"$what": 1}, 10**100, "x" * 300, -0.0,
]


def _mutate_metadata(r: random.Random, header: dict, names: list[str]) -> str:
    meta = header.get("__metadata__")
    if not isinstance(meta, dict) or "shapeflow" not in meta:
        header["__metadata__"] = r.choice([{"k": 1}, {"shapeflow": "{"}, [], None, {"k": "v"}])
        return "__metadata__ replaced"
    doc = json.loads(meta["shapeflow"])
    nodes = [(doc, "obj")]
    stack = [doc["obj"]]
    while stack:  # every container in the document, with a key into it
        node = stack.pop()
        keys = range(len(node)) if isinstance(node, list) else node if type(node) is dict else ()
        for k in keys:
            nodes.append((node, k))
            stack.append(node[k])
    parent, key = r.choice(nodes)
    choice = r.random()
    if choice < 0.5:
        new = r.choice(BAD_NODES)
    elif choice < 0.7:
        new = {"$tensor": r.choice(names)}  # valid: another tensor there
    elif choice < 0.85:
        new = _nested(r, 0)
    else:
        doc[r.choice(["version", "format"])] = r.choice([0, 2, "1", None, "shapeflow"])
        new = parent[key]
    parent[key] = new
    meta["shapeflow"] = json.dumps(doc)
    return f"metadata at {key!r}"


def _mutant(r: random.Random, good: bytes) -> tuple[bytes, str]:
    header, data = _split(good)
    n = len(good) - 8 - len(data)
    kind = r.random()
    if kind < 0.25:  # bytes of the header
        bad = bytearray(good)
        for _ in range(r.randint(1, 3)):
            at = r.randrange(8, 8 + n)
            bad[at] = r.choice(b'[]{}",:0189-.eE\\ \x00\xff') if r.random() < 0.5 else bad[at] ^ (
                1 << r.randrange(8))
        return bytes(bad), "header bytes"
    if kind < 0.35:  # the length field
        length = r.choice([0, 1, n - 1, n + 1, n + 8, len(good) - 8, len(good), 2**63, 2**64 - 1])
        return struct.pack("<Q", length) + good[8:], f"length {length}"
    if kind < 0.45:  # the file's end
        if r.random() < 0.5:
            return good[:r.randrange(len(good))], "truncated"
        return good + bytes(r.randint(1, 16)), "extended"
    if kind < 0.5:  # splice text into the header and fix the length
        at = r.randrange(8, 8 + n)
        junk = r.choice([b" ", b",", b"[", b"{}", b'"', b"\\", b'"a":1,', b"[" * 200, b"\xc3"])
        return _join(good[8:at] + junk + good[at:8 + n], data), "spliced"
    try:
        what = _mutate_header(r, header, len(data))
        text = json.dumps(header).encode()
    except RecursionError:  # json.dumps of a 1000-deep nest, on pytest's deep stack
        return good, "unchanged"
    if r.random() < 0.1:  # a key twice, spelled as text
        name = r.choice(_tensors(header) or ["x"])
        text = text[:-1] + b", " + json.dumps(name).encode() + b": " + json.dumps(
            header.get(name)).encode() + b"}"
        what += ", a name twice"
    return _join(text, data), what


# ---- the oracle ----------------------------------------------------------------------------------

def _load(path, map_location, size: int):
    """load() timed and traced: (result, None) or (None, the CheckpointError)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        return load(path, map_location=map_location), None
    except CheckpointError as e:
        return None, e
    except Exception as e:
        raise AssertionError(f"{type(e).__name__} escaped: {e}") from e
    finally:
        took, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert took < SECONDS_PER_LOAD, f"{took:.2f} s"
        assert peak < 16 * size + (512 << 10), f"peak {peak} bytes for a {size}-byte file"


def _arrays(blob: bytes) -> dict:
    """The file's tensors, read straight from its bytes by the header's offsets."""
    header, data = _split(blob)
    return {name: np.frombuffer(data[b:e], NP[info["dtype"]]).reshape(info["shape"])
            for name, info in header.items() if name != "__metadata__"
            for b, e in [info["data_offsets"]]}


def _same_array(arr: np.ndarray, want: np.ndarray):
    assert arr.dtype == want.dtype and arr.shape == want.shape
    assert arr.tobytes() == want.tobytes()


def _holds(node, value, arrays):
    """`value` is what the metadata `node` says, with each tensor's bytes from the file."""
    if isinstance(node, list):
        assert type(value) is list and len(value) == len(node)
        for n, v in zip(node, value):
            _holds(n, v, arrays)
        return
    if not isinstance(node, dict):
        assert type(value) is type(node)
        assert value == node or (isinstance(node, float) and math.isnan(node))
        return
    ((tag, v),) = node.items()
    if tag in ("$tensor", "$ndarray"):
        assert isinstance(value, sf.Tensor if tag == "$tensor" else np.ndarray)
        _same_array(value._data if tag == "$tensor" else value, arrays[v])
    elif tag == "$tuple":
        assert type(value) is tuple
        _holds(v, list(value), arrays)
    elif tag == "$dict":
        assert type(value) is dict and list(value) == list(v)
        for k in v:
            _holds(v[k], value[k], arrays)
    elif tag in ("$items", "$odict"):
        assert type(value) is (dict if tag == "$items" else collections.OrderedDict)
        if len(value) == len(v):  # else two keys decoded equal, and the later won
            for (k, e), (vk, ve) in zip(v, value.items()):
                _holds(k, vk, arrays)
                _holds(e, ve, arrays)
    elif tag == "$float":
        assert repr(value) == v
    elif tag == "$np":
        want = sf.dtypes.get_dtype(v[0]).np.type(v[1])
        assert type(value) is type(want) and (value == want or math.isnan(v[1]))
    elif tag == "$dtype":
        assert value is sf.dtypes.get_dtype(v)
    else:
        pytest.fail(f"a file with the tag {tag!r} loaded")


def _same_shapes(cpu, on_meta):
    """The meta load is the cpu load with each tensor's data dropped."""
    if isinstance(cpu, (sf.Tensor, np.ndarray)):
        assert isinstance(on_meta, sf.Tensor) and on_meta.device == "meta"
        data = cpu if isinstance(cpu, np.ndarray) else cpu._data
        assert tuple(on_meta.shape) == data.shape and on_meta.dtype.np == data.dtype
    elif isinstance(cpu, dict):
        assert type(on_meta) is type(cpu) and len(on_meta) == len(cpu)
        for (k, v), (mk, mv) in zip(cpu.items(), on_meta.items()):
            _same_shapes(k, mk)
            _same_shapes(v, mv)
    elif isinstance(cpu, (list, tuple)):
        assert type(on_meta) is type(cpu) and len(on_meta) == len(cpu)
        for a, b in zip(cpu, on_meta):
            _same_shapes(a, b)
    else:
        assert type(on_meta) is type(cpu)
        assert on_meta == cpu or on_meta != on_meta  # NaN


def _check(path, blob: bytes) -> bool:
    """Whether the file loaded; asserts everything the module docstring promises."""
    path.write_bytes(blob)
    out, err = _load(path, None, len(blob))
    on_meta, meta_err = _load(path, "meta", len(blob))
    assert (err is None) == (meta_err is None), f"cpu: {err}, meta: {meta_err}"
    try:
        theirs = load_file(str(path))
    except Exception:
        theirs = None
    if err is not None:
        assert str(path) in str(err)
        if theirs is not None:  # the library reads it: refused for a check it lacks
            assert STRICTER.search(str(err)), str(err)
        return False
    assert theirs is not None, "shapeflow read a file the safetensors library refuses"
    arrays = _arrays(blob)
    assert sorted(theirs) == sorted(arrays)
    for name, arr in arrays.items():
        _same_array(theirs[name], arr)
    doc = (_split(blob)[0].get("__metadata__") or {}).get("shapeflow")
    if doc is None:
        assert list(out) == list(arrays)
        for name, arr in arrays.items():
            _same_array(out[name]._data, arr)
    else:
        _holds(json.loads(doc)["obj"], out, arrays)
    _same_shapes(out, on_meta)
    return True


@pytest.mark.parametrize("seed", range(4))
def test_mutated_checkpoints(tmp_path, seed):
    bases = _bases(tmp_path)
    r = random.Random(seed)
    path = tmp_path / "mutant.st"
    outcomes = collections.Counter()
    for base in bases:  # the unmutated files load, and right
        assert _check(path, base)
    for case in range(CASES_PER_SEED):
        blob, what = _mutant(r, r.choice(bases))
        try:
            outcomes["loaded" if _check(path, blob) else "refused"] += 1
        except AssertionError as e:
            raise AssertionError(f"seed {seed} case {case} ({what}): {e}") from None
    # the mutator reaches both outcomes, so the oracle's two halves both run
    assert outcomes["loaded"] >= 3 and outcomes["refused"] >= CASES_PER_SEED // 2, outcomes
