"""`save` / `load`, as `torch.save` / `torch.load`: safetensors, or PyTorch's zip format.

A checkpoint of tensors (dicts, lists, tuples, numbers, strings, None, dtypes, tensors) is a
safetensors file. Tensors go into the file's tensor section, named by their path in the
object (`fc.weight`, `state.0.exp_avg`), so a flat state dict is a plain safetensors file
other tools read. Everything around them goes as one JSON document under the metadata key
"shapeflow", with tags where JSON alone would lose a type:

    {"$tensor": name}  {"$ndarray": name}  {"$tuple": [...]}  {"$dict": {str: ...}}
    {"$items": [[key, value], ...]} (a dict with non-str keys)  {"$odict": [[k, v], ...]}
    {"$float": "nan" | "inf" | "-inf"}  {"$np": [dtype, value]}  {"$dtype": name}

Lists are JSON arrays; every dict is tagged, so no JSON object is ever ambiguous.
Loading checks the whole header first (`header.py`), on every map_location, and never
unpickles: a malformed file raises CheckpointError and nothing else. It opens the file once
and reads header and tensors from that one descriptor, so a save renamed over the file
meanwhile is never mixed in: a load returns one whole version.

Any other object (a whole Module, a dataclass, a set) is written in PyTorch's zip format
(`torch_zip.py`), and files `torch.save` wrote load through it: `load` tells the formats
apart by their first bytes, and unpickles with `weights_only` semantics (`pickled.py`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import pickle
import secrets
import struct
import sys

import numpy as np

from .. import dtypes as _dt
from ..device import Device, cpu
from ..errors import CheckpointError, DeviceError, ShapeflowError
from ..tensor import Tensor
from .header import (
    CODES,
    MAX_DEPTH,
    MAX_HEADER,
    JSONRefused,
    fail,
    json_depth,
    loads,
    read_header,
    short,
)

KEY = "shapeflow"
FORMAT = "shapeflow.checkpoint"
VERSION = 1
_CHUNK = 1 << 24  # bytes per write call


# ---- save -------------------------------------------------------------------------------------

class _Encoder:
    """Walks an object: tensors into `arrays` (by name), the rest into a JSON-able skeleton."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.names: dict[int, str] = {}  # id(tensor) -> name: a tensor saved twice is stored once
        self.keep: list = []  # keeps the tensors alive so ids stay unique during the walk

    def name_for(self, path: list) -> str:
        base = ".".join(str(p) for p in path) or "tensor"
        name, k = base, 0
        while name in self.arrays or name == "__metadata__":
            k += 1
            name = f"{base}#{k}"
        return name

    def tensor(self, x, path: list, tag: str):
        if id(x) in self.names:
            return {tag: self.names[id(x)]}
        if isinstance(x, Tensor):
            if not x.device.computes:
                raise DeviceError(
                    f"save: the {x.device} tensor at {_where(path)} {list(x.shape)} {x.dtype} has "
                    "shape and dtype but no data to save",
                    op="save",
                    hint="save tensors of a model that ran on cpu; meta traces shapes only",
                )
            arr = x.device.to_numpy(x._data)
        else:
            arr = x
            if arr.dtype not in _dt._BY_NP:
                raise TypeError(f"save: cannot save a NumPy array of dtype {arr.dtype} at "
                                f"{_where(path)}")
        if arr.dtype == np.complex128:  # a TypeError: save writes PyTorch's format instead
            raise TypeError(f"save: safetensors has no complex128 (the tensor at "
                            f"{_where(path)})")
        name = self.name_for(path)
        self.arrays[name] = np.asarray(arr, order="C")  # (ascontiguousarray makes 0-d 1-d)
        self.names[id(x)] = name
        self.keep.append(x)
        return {tag: name}

    def encode(self, x, path: list):
        t = type(x)
        if x is None or t is bool or t is str:
            return x
        if t is int:
            return x
        if t is float:
            return x if math.isfinite(x) else {"$float": repr(x)}
        if isinstance(x, Tensor):
            return self.tensor(x, path, "$tensor")
        if t is np.ndarray:
            return self.tensor(x, path, "$ndarray")
        if t is list:
            return [self.encode(v, [*path, i]) for i, v in enumerate(x)]
        if t is tuple:
            return {"$tuple": [self.encode(v, [*path, i]) for i, v in enumerate(x)]}
        if t is dict:
            if all(type(k) is str for k in x):
                return {"$dict": {k: self.encode(v, [*path, k]) for k, v in x.items()}}
            return {"$items": [[self.key(k, path), self.encode(v, [*path, k])]
                               for k, v in x.items()]}
        if t is collections.OrderedDict:
            return {"$odict": [[self.key(k, path), self.encode(v, [*path, k])]
                               for k, v in x.items()]}
        if isinstance(x, np.generic) and x.dtype in _dt._BY_NP:
            dt = _dt._BY_NP[x.dtype]
            return {"$np": [dt.name, float(x) if dt.is_floating_point else x.item()]}
        if isinstance(x, _dt.DType):
            return {"$dtype": x.name}
        raise TypeError(
            f"save: cannot save a {t.__name__} at {_where(path)}: a safetensors checkpoint holds "
            "dicts, lists, tuples, str, int, float, bool, None, dtypes and tensors"
        )

    def key(self, k, path):
        if isinstance(k, (Tensor, np.ndarray)) or type(k) in (list, dict):
            raise TypeError(f"save: a {type(k).__name__} cannot be a dict key (at {_where(path)})")
        return self.encode(k, [*path, "<key>"])


def _where(path: list) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in path)


def _write_bytes(f, data: bytes) -> None:
    """Write `data` to the open file `f` in chunks (the step a crash could interrupt)."""
    view = memoryview(data)
    for start in range(0, len(view), _CHUNK):
        f.write(view[start:start + _CHUNK])


def save(obj, f, pickle_module=None, pickle_protocol: int = 2, *,
         format: str | None = None) -> None:  # noqa: A002  (the name says what it picks)
    """Write `obj` to `f` (a path, or a file object open for writing), as `torch.save`.

    What a checkpoint of tensors holds (dicts, lists, tuples, numbers, str, dtypes, tensors)
    is written as safetensors; anything else (a Module, a dataclass, a set) in PyTorch's own
    zip format, which `torch.load` reads. `format="torch"` or `"safetensors"` picks one.
    A path is written atomically: a temporary file, fsynced, renamed over `path`.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError("save: only Python's own pickle module is supported")
    if format not in (None, "safetensors", "torch"):
        raise ValueError(f"save: format is 'safetensors' or 'torch', not {format!r}")
    data = None
    if format != "torch":
        try:
            data = _safetensors_bytes(obj)
        except TypeError as e:
            if format == "safetensors":
                raise
            data = _pickled_bytes(obj, pickle_protocol, e)
    else:
        data = _pickled_bytes(obj, pickle_protocol, None)
    if hasattr(f, "write"):
        _write_bytes(f, data)
        return
    _write_atomic(os.fspath(f), data)


def _safetensors_bytes(obj) -> bytes:
    """`obj` as a safetensors file: TypeError for anything but containers and tensors."""
    from safetensors.numpy import save as st_save

    enc = _Encoder()
    skeleton = enc.encode(obj, [])
    doc = json.dumps({"format": FORMAT, "version": VERSION, "obj": skeleton},
                     ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    depth = json_depth(doc.encode("utf-8", "surrogatepass"))
    if depth > MAX_DEPTH:  # load would refuse the file: refuse to write it
        raise ValueError(f"save: the object nests {depth} levels deep as JSON, more than the "
                         f"{MAX_DEPTH} a checkpoint allows (each container is 1 or 2 levels)")
    data = st_save(enc.arrays, metadata={KEY: doc})
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise ValueError(f"save: the header (names and the JSON skeleton) takes {n} bytes, more "
                         f"than the {MAX_HEADER} safetensors allows")
    return data


def _pickled_bytes(obj, protocol: int, why: TypeError | None) -> bytes:
    """`obj` in PyTorch's zip format; a TypeError naming what cannot be pickled."""
    from . import torch_zip

    if type(protocol) is not int or not 2 <= protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"save: pickle_protocol is 2..{pickle.HIGHEST_PROTOCOL}, not "
                         f"{protocol!r}")
    try:
        return torch_zip.write(obj, protocol)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        if isinstance(e, ShapeflowError):
            raise
        head = f"{why}; " if why is not None else "save: "
        raise TypeError(f"{head}it cannot be pickled either ({e})") from e


def _write_atomic(path: str, data: bytes) -> None:
    """Write `data` to `path` through a fsynced temporary file renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    except OSError as e:
        raise CheckpointError(f"cannot save {path}: {e.strerror or e}", op="save") from e
    try:
        with os.fdopen(fd, "wb") as f:
            _write_bytes(f, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and not isinstance(e, CheckpointError):
            raise CheckpointError(f"cannot save {path}: {e.strerror or e}", op="save") from e
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); best effort where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- load -------------------------------------------------------------------------------------

class _Decoder:
    def __init__(self, path, header: dict, tensors, device=cpu) -> None:
        self.path, self.header, self.tensors, self.device = path, header, tensors, device
        self.made: dict[str, object] = {}  # a name referenced twice gives one object

    def bad(self, what: str) -> CheckpointError:
        return fail(self.path, f"corrupted metadata: {what}")

    def array(self, name):
        if not isinstance(name, str):
            raise self.bad(f"a tensor reference is {short(name)}, not a name")
        if name not in self.header or name == "__metadata__":
            raise fail(self.path, f"tensor {short(name)} missing: the metadata refers to it but "
                                  "the file holds no such tensor")
        return self.tensors(name)

    def decode(self, x):
        if x is None or type(x) in (bool, int, float, str):
            return x
        if type(x) is list:
            return [self.decode(v) for v in x]
        if type(x) is not dict or len(x) != 1:
            raise self.bad(f"unexpected value {short(x)}")
        ((tag, v),) = x.items()
        if tag == "$tensor" or tag == "$ndarray":
            key = (tag, v if isinstance(v, str) else repr(v))
            if key not in self.made:
                arr = self.array(v)  # an ndarray, or a meta Tensor with map_location="meta"
                self.made[key] = arr if tag == "$ndarray" else _as_tensor(arr, self.device)
            return self.made[key]
        if tag == "$tuple" and type(v) is list:
            return tuple(self.decode(e) for e in v)
        if tag == "$dict" and type(v) is dict:
            return {k: self.decode(e) for k, e in v.items()}
        if tag in ("$items", "$odict") and type(v) is list:
            if not all(type(p) is list and len(p) == 2 for p in v):
                raise self.bad(f"{tag} entries must be [key, value] pairs")
            try:
                pairs = [(self.decode(k), self.decode(e)) for k, e in v]
                return dict(pairs) if tag == "$items" else collections.OrderedDict(pairs)
            except TypeError:
                raise self.bad(f"{tag} holds a key that cannot be a dict key") from None
        if tag == "$float" and v in ("nan", "inf", "-inf"):
            return float(v)
        if (tag == "$np" and type(v) is list and len(v) == 2 and isinstance(v[0], str)
                and type(v[1]) in (int, float, bool)):
            try:
                return _dt.get_dtype(v[0]).np.type(v[1])
            except (TypeError, ValueError, OverflowError, ShapeflowError):
                raise self.bad(f"bad NumPy scalar {short(v)}") from None
        if tag == "$dtype" and isinstance(v, str) and v in _dt._BY_NAME:
            return _dt.get_dtype(v)
        raise self.bad(f"unknown tag {short(tag)} or a bad value for it")


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args):
    """Read what `save` or `torch.save` wrote (or any safetensors file), as `torch.load`.

    `f` is a path or a file object open for reading. Safetensors files never run code. A
    PyTorch zip checkpoint is unpickled: with `weights_only` (the default, as in PyTorch
    2.6+) only tensors, containers and `sf.serialization.add_safe_globals` globals load;
    `weights_only=False` unpickles anything, which can run arbitrary code: only for files
    you trust. `map_location`: a device name ("cpu", "meta": shapes only), a dict mapping
    saved locations ({"cuda:0": "cpu"}) or a callable(storage, location). A missing,
    truncated, corrupted or hostile file raises CheckpointError naming it.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError("load: only Python's own pickle module is supported")
    if set(pickle_load_args) - {"encoding"}:
        raise TypeError(f"load: unexpected arguments {sorted(pickle_load_args)}")
    restore = _restorer(map_location)
    wo = True if weights_only is None else bool(weights_only)
    if hasattr(f, "read"):
        return _load_from(str(getattr(f, "name", "<file object>")), f, restore, wo)
    path = os.fspath(f)
    try:
        fh = open(path, "rb")  # noqa: SIM115  (closed by the with below)
    except FileNotFoundError:
        raise fail(path, "no such file") from None
    except IsADirectoryError:
        raise fail(path, "it is a folder, not a file") from None
    except OSError as e:
        raise fail(path, e.strerror or str(e)) from None
    # One open file for the header and every tensor: a save renaming a new file over
    # `path` meanwhile cannot mix two versions (this one keeps reading the old inode).
    with fh:
        return _load_from(path, fh, restore, wo)


def _load_from(path: str, f, restore, weights_only: bool):
    """What the open file `f` (named `path`) holds, by its magic bytes."""
    try:
        start = f.tell()
        head = f.read(4)
        f.seek(start)
    except (OSError, ValueError) as e:
        raise fail(path, f"cannot read it ({e})", "pass a file open for reading in binary "
                                                  "mode, which can seek") from None
    if not isinstance(head, bytes):
        raise fail(path, "the file object reads str, not bytes", "open it with 'rb'")
    if head in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip: PyTorch's format
        from . import torch_zip

        return torch_zip.read(path, f, restore, weights_only)
    return _load_open(path, f, restore("cpu", None))


def _restorer(map_location):
    """map_location as a function (saved location, storage) -> the Device to load onto."""
    from ..device import get_device

    def device(name) -> Device:
        try:
            return get_device(str(name))
        except DeviceError as e:
            raise DeviceError(f"load: the checkpoint's tensors were saved on {name!r}: "
                              f"{e.message}", op="load",
                              hint="pass map_location='cpu' (or {'cuda:0': 'cpu'}) to load "
                                   "them on this machine") from None

    if map_location is None:
        return lambda location, storage: device(location)
    if isinstance(map_location, dict):
        return lambda location, storage: device(map_location.get(location, location))
    if isinstance(map_location, str) or hasattr(map_location, "type"):  # str, Device, device
        fixed = device(map_location)
        return lambda location, storage: fixed
    if callable(map_location):
        def restore(location, storage):
            out = map_location(storage, location)
            if out is None:
                return device(location)
            return out.device if hasattr(out, "nbytes") and hasattr(out, "key") else device(out)

        return restore
    raise TypeError(f"load: map_location is a device name, a dict or a callable, not "
                    f"{type(map_location).__name__}")


def _load_open(path: str, f, device):
    """What the open safetensors file `f` (named `path`) holds, read from that one file."""
    start = f.tell()
    size = f.seek(0, 2) - start
    f.seek(start)
    header = read_header(path, f, size)
    base = f.tell()  # the data section starts right after the header
    doc = (header.get("__metadata__") or {}).get(KEY)
    parsed = None
    if doc is not None:
        try:
            parsed = loads(doc)
        except JSONRefused as e:
            raise fail(path, f"metadata {e}") from None
        if not (isinstance(parsed, dict) and parsed.get("format") == FORMAT and "obj" in parsed):
            raise fail(path, f"corrupted metadata: the {KEY!r} entry is not a shapeflow "
                             "checkpoint")
        version = parsed.get("version")
        if type(version) is not int or not 1 <= version <= VERSION:
            raise fail(path, f"checkpoint format version {short(version)} is not one this "
                             f"shapeflow reads (1..{VERSION})", "upgrade shapeflow")

    if not device.computes:  # the header is all a device without data needs
        def tensors(name):
            info = header[name]
            return Tensor._make(None, tuple(info["shape"]), CODES[info["dtype"]], device)

        return _decode(path, header, parsed, tensors, device)

    return _decode(path, header, parsed, lambda name: _read(path, header, f, base, name),
                   device)


def _decode(path, header: dict, parsed, tensors, device):
    if parsed is None:  # a plain safetensors file: its tensors by name
        return {name: _as_tensor(tensors(name), device) for name in header
                if name != "__metadata__"}
    try:
        return _Decoder(path, header, tensors, device).decode(parsed["obj"])
    except RecursionError:  # MAX_DEPTH fits the default stack; a caller's deep one may not
        raise fail(path, "the metadata nests deeper than the stack left allows") from None


def _as_tensor(arr, device=cpu):
    if isinstance(arr, Tensor):
        return arr
    return Tensor._make(device.from_numpy(arr), arr.shape, _dt.from_numpy_dtype(arr.dtype),
                        device)


def _read(path, header: dict, f, base: int, name: str) -> np.ndarray:
    """Tensor `name` as a new NumPy array, read from the open file `f` (data at `base`).

    read_header has checked the entry against the file's size, so the bytes exist unless
    the file shrank since (written in place, not renamed): that is a CheckpointError.
    """
    info = header[name]
    begin, end = info["data_offsets"]
    raw = np.empty(end - begin, np.uint8)
    view, got = memoryview(raw), 0
    f.seek(base + begin)
    while got < len(view):
        try:
            n = f.readinto(view[got:])
        except OSError as e:
            raise fail(path, f"reading tensor {name!r}: {e.strerror or e}") from None
        if not n:
            raise fail(path, f"truncated: tensor {name!r} needs {end - begin} bytes, the file "
                             f"ended after {got} (was it overwritten in place?)")
        got += n
    arr = raw.view(CODES[info["dtype"]].np).reshape(info["shape"])
    return arr if sys.byteorder == "little" else arr.byteswap()  # safetensors: little-endian
