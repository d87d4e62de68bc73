"""The safetensors header: read, parse and check it before any tensor data is touched.

A hostile file gets nothing but CheckpointError, in time and memory bounded by its size:
the header's length is checked against the file before it is read, its JSON nesting depth
is measured without recursion before `json.loads` recurses, and every tensor entry (dtype,
shape, offsets, byte count) is checked, and the entries must tile the data section exactly
as the safetensors spec requires, before anything is allocated from the header's claims.
The same checks run whatever the map_location, so "meta" accepts only what "cpu" would.
"""

from __future__ import annotations

import json
import math
import reprlib
import struct
import sys

import numpy as np

from .. import dtypes as _dt
from ..errors import CheckpointError

MAX_HEADER = 100_000_000  # bytes: the safetensors library's own limit
MAX_DEPTH = 127  # JSON nesting: the deepest that serde_json (safetensors' parser) accepts
MAX_NDIM = 64  # NumPy's limit
_INT = {int}  # bool is no size: type(), not isinstance()
_MAX_NBYTES = 2**63 - 1  # the largest array NumPy can describe, zero dims aside
_SCAN = 1 << 16  # bytes per step of the depth scan: its scratch memory stays small
_STEP = np.zeros(256, np.int8)  # what each byte does to the depth, outside strings
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1

# safetensors dtype codes <-> shapeflow dtypes
CODES = {
    "F64": _dt.float64, "F32": _dt.float32, "F16": _dt.float16, "BF16": _dt.bfloat16,
    "I64": _dt.int64, "I32": _dt.int32, "I16": _dt.int16, "I8": _dt.int8, "U8": _dt.uint8,
    "BOOL": _dt.bool_, "C64": _dt.complex64,  # (safetensors has no complex128)
}


def fail(path, reason: str, hint: str | None = None) -> CheckpointError:
    """The error for a file that cannot be loaded, naming it."""
    return CheckpointError(f"cannot load {path}: {reason}", op="load", hint=hint)


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxlong = 100, 100, 8, 40


def short(x) -> str:
    """repr(x) cut short, built short: a hostile header's values can be megabytes long."""
    return _REPR.repr(x)


# ---- bounded JSON -----------------------------------------------------------------------------

def json_depth(text: bytes) -> int:
    """How deep the JSON in `text` nests, strings skipped; linear time, no recursion.

    Exact on every valid prefix of a document, which is all a recursive parser reads before
    it stops, so a parser run only when this is small never recurses deeper.
    """
    # Escaped backslashes first (left to right, as JSON pairs them), then escaped quotes:
    # every quote left opens or closes a string.
    text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    codes = np.frombuffer(text, np.uint8)
    depth = deepest = 0
    inside = 0  # whether the previous chunk ended inside a string
    for start in range(0, len(codes), _SCAN):
        c = codes[start:start + _SCAN]
        quotes = np.cumsum(c == 34, dtype=np.int32)  # (int32: NumPy's fast cumsum)
        quotes += inside
        inside = quotes[-1] & 1
        step = _STEP.take(c)
        step[(quotes & 1).astype(np.bool_)] = 0  # an odd count of quotes so far: in a string
        levels = np.cumsum(step, dtype=np.int32)
        deepest = max(deepest, depth + int(levels.max()))
        depth += int(levels[-1])
    return deepest


class JSONRefused(ValueError):
    """Why a bounded JSON parse refused its text, as a predicate: "is not valid JSON (...)"."""


def _pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):  # JSON leaves duplicates open; two readers may pick differently
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise JSONRefused(f"repeats the key {short(k)} in one object")
            seen.add(k)
    return out


def _constant(name: str):
    raise JSONRefused(f"is not valid JSON ({name} is not a JSON value)")


# Numbers past the float range, which serde_json (so safetensors) refuses even where it
# ignores the value: refused here too, so that map_location="meta" accepts what cpu does.
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))  # digits -> "0", rest -> " "


def _int(text: str) -> int:
    v = int(text)
    if len(text) > 300 and abs(v) > sys.float_info.max:
        raise JSONRefused(f"holds a number out of range ({text:.20}...)")
    return v


def _float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise JSONRefused(f"holds a number out of range ({text:.40})")
    return v


def loads(text: bytes | str) -> object:
    """Parse JSON (bytes: UTF-8), refusing deep nesting, duplicate keys and NaN/Infinity."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    depth = json_depth(raw)
    if depth > MAX_DEPTH:
        raise JSONRefused(f"nests {depth} levels deep, more than the {MAX_DEPTH} allowed")
    # the int hook costs a call per int: only when a digit run is long enough to need it
    ints = {"parse_int": _int} if b"0" * 300 in raw.translate(_DIGITS) else {}
    try:
        out = json.loads(raw.decode("utf-8") if raw is text else text, object_pairs_hook=_pairs,
                         parse_constant=_constant, parse_float=_float, **ints)
        if b"\\u" in raw:  # escapes can spell a lone UTF-16 surrogate, which serde_json refuses
            json.dumps(out, ensure_ascii=False).encode("utf-8")
        return out
    except UnicodeEncodeError:
        raise JSONRefused("is not valid JSON (a lone UTF-16 surrogate)") from None
    except JSONRefused:
        raise
    except UnicodeDecodeError:
        raise JSONRefused("is not valid JSON (not UTF-8)") from None
    except RecursionError:  # the depth was fine but the caller's stack is nearly full
        raise JSONRefused("nests deeper than the stack left allows") from None
    except ValueError as e:  # json's own errors, and Python's limit on long int literals
        raise JSONRefused(f"is not valid JSON ({str(e):.100})") from None


# ---- the header -------------------------------------------------------------------------------

def guess(head: bytes) -> str | None:
    """What a file that is not safetensors looks like, for the hint."""
    if head.startswith(b"PK\x03\x04"):
        return "it looks like a zip archive (a PyTorch .pt/.pth file?); shapeflow never unpickles"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "it looks like a pickle; shapeflow never unpickles"
    if head.startswith(b"\x93NUMPY"):
        return "it looks like a NumPy .npy file: use numpy.load"
    if head.startswith(b"\x1f\x8b"):
        return "it looks gzip-compressed"
    if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "it looks like a text file"
    return None


def read_header(path, f, size: int) -> dict:
    """The checked header of the open safetensors file `f` of `size` bytes."""
    head = f.read(8)
    if len(head) < 8:
        raise fail(path, f"not a safetensors file: it is {size} bytes, shorter than the 8-byte "
                         "header length", guess(head))
    (n,) = struct.unpack("<Q", head)
    if n > size - 8:
        raise fail(path, f"not a safetensors file: header length {n} exceeds file size {size}",
                   guess(head))
    if n > MAX_HEADER:
        raise fail(path, f"header length {n} exceeds the safetensors limit of {MAX_HEADER} bytes")
    raw = f.read(n)
    if len(raw) != n:
        raise fail(path, f"truncated: the header needs {n} bytes, the file holds {len(raw)}")
    try:
        header = loads(raw)
    except JSONRefused as e:
        raise fail(path, f"not a safetensors file: header {e}",
                   guess(head + raw[:64])) from None
    if not isinstance(header, dict):
        raise fail(path, "not a safetensors file: header is not a JSON object")
    check_header(path, header, size - 8 - n)
    return header


def check_header(path, header: dict, data_len: int) -> None:
    """Every entry valid, and the tensors tiling the `data_len`-byte data section exactly."""
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            if info is not None and not (isinstance(info, dict)
                                         and all(isinstance(v, str) for v in info.values())):
                raise fail(path, "corrupted header: __metadata__ is not a str -> str map")
            continue
        spans.append((*_check_entry(path, name, info, data_len), name))
    spans.sort()
    at, prev = 0, None
    for begin, end, name in spans:
        if begin < at:
            raise fail(path, f"corrupted header: tensors {short(prev)} and {short(name)} claim "
                             f"the same bytes (from byte {begin} of the data section)")
        if begin > at:
            raise fail(path, f"corrupted header: no tensor holds bytes [{at}, {begin}) of the "
                             "data section", "safetensors requires the tensors to tile it")
        at, prev = end, name
    if at != data_len:
        raise fail(path, f"corrupted header: the tensors end at byte {at} of the data section, "
                         f"which holds {data_len} bytes", "extra bytes after the last tensor")


def _check_entry(path, name: str, info, data_len: int) -> tuple[int, int]:
    """The entry's (begin, end), once its dtype, shape and offsets are checked."""
    if not isinstance(info, dict):
        raise fail(path, f"corrupted header: tensor {short(name)} is {short(info)}, not an object")
    code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(code, str):
        raise fail(path, f"corrupted header: tensor {short(name)} has no dtype")
    if code not in CODES:
        raise fail(path, f"tensor {short(name)} has dtype {short(code)}, which shapeflow lacks",
                   "supported: " + ", ".join(CODES))
    if not (type(shape) is list and len(shape) <= MAX_NDIM
            and set(map(type, shape)) <= _INT and min(shape, default=0) >= 0):
        raise fail(path, f"corrupted header: tensor {short(name)} has shape {short(shape)}, not a "
                         f"list of at most {MAX_NDIM} sizes >= 0")
    if not (type(offsets) is list and len(offsets) == 2
            and set(map(type, offsets)) == _INT and min(offsets) >= 0):
        raise fail(path, f"corrupted header: tensor {short(name)} has data_offsets "
                         f"{short(offsets)}, not [begin, end]")
    begin, end = offsets
    if end < begin:
        raise fail(path, f"corrupted header: tensor {short(name)} has data_offsets "
                         f"[{short(begin)}, {short(end)}]")
    if end > data_len:
        raise fail(path, f"truncated: tensor {short(name)} ends at byte {short(end)} of the data "
                         f"section, which holds {data_len} bytes")
    need = _nbytes(shape, CODES[code].itemsize)
    if need is None:
        raise fail(path, f"corrupted header: tensor {short(name)} of shape {short(shape)} is "
                         "larger than any array can be")
    if end - begin != need:
        raise fail(path, f"corrupted header: tensor {short(name)} of shape {shape} {code} "
                         f"needs {need} bytes, its offsets span {end - begin}")
    return begin, end


def _nbytes(shape: list, itemsize: int) -> int | None:
    """The tensor's size in bytes; None past NumPy's limit. Stops early on huge sizes."""
    limit, n = _MAX_NBYTES // itemsize, 1
    for d in shape:
        n *= max(d, 1)  # NumPy bounds the other sizes of an empty array too
        if n > limit:
            return None
    return 0 if 0 in shape else n * itemsize
