"""PyTorch's checkpoint format (`torch.save`'s zip), read and written without torch.

A checkpoint is a zip holding `<archive>/data.pkl`, a pickle (protocol 2) whose tensors are
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` calls,
each storage a persistent id `("storage", torch.FloatStorage, key, location, numel)` naming
the record `<archive>/data/<key>` that holds its bytes, plus `version` and `byteorder`.
Here those torch names map to shapeflow's own functions (the table TORCH), so a file loads
as shapeflow tensors; writing emits the same names, so `torch.load` reads what `save` wrote.

Before anything is allocated, every record is checked against the zip's directory: storage
sizes against numel * itemsize, stored records against the archive's size, compressed ones
against deflate's ratio (zip bombs), and each tensor's size/stride/offset against its storage.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import secrets
import struct
import sys
import zipfile
import zlib

import numpy as np

from .. import dtypes as _dt
from ..device import Device, cpu, get_device
from ..errors import CheckpointError, DeviceError, ShapeflowError
from ..shape import Shape
from ..tensor import Tensor
from .header import MAX_NDIM, fail, short
from .pickled import RestrictedUnpickler, WeightsOnlyError, global_name

ARCHIVE = "archive"
MAX_RATIO = 1032  # deflate's largest possible expansion: a record claiming more is lying
MAX_INFLATED = 1 << 32  # bytes all compressed records of one archive may expand to
_CHUNK = 1 << 24
MAX_EXPANDED = 1 << 31  # bytes: an expanded (stride 0) tensor is copied, up to this size

# torch's dtype names (what `torch.float32` pickles as) and legacy typed storages
DTYPES = {d.name: d for d in _dt.ALL + _dt.COMPLEX}
STORAGES = {
    "DoubleStorage": _dt.float64, "FloatStorage": _dt.float32, "HalfStorage": _dt.float16,
    "BFloat16Storage": _dt.bfloat16, "LongStorage": _dt.int64, "IntStorage": _dt.int32,
    "ShortStorage": _dt.int16, "CharStorage": _dt.int8, "ByteStorage": _dt.uint8,
    "BoolStorage": _dt.bool_, "ComplexFloatStorage": _dt.complex64,
    "ComplexDoubleStorage": _dt.complex128,
}
_STORAGE_OF = {d: name for name, d in STORAGES.items()}


class StorageType:
    """`torch.FloatStorage` and kin in a pickle: the dtype of a storage (None: untyped)."""

    def __init__(self, name: str, dtype: _dt.DType | None) -> None:
        self.name, self.dtype = name, dtype

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class Storage:
    """A storage read from the archive: its raw bytes (None on meta), dtype and device."""

    def __init__(self, key: str, dtype: _dt.DType | None, nbytes: int, location: str,
                 device: Device) -> None:
        self.key, self.dtype, self.nbytes, self.location = key, dtype, nbytes, location
        self.device = device
        self.raw: np.ndarray | None = None
        self.big_endian = False
        self._typed: dict = {}  # dtype -> the data as that dtype, native byte order

    def cpu(self) -> Storage:  # map_location=lambda storage, loc: storage.cpu()
        return self

    def cuda(self, *args, **kwargs) -> Storage:
        raise DeviceError("load: map_location moved a storage to cuda, which this shapeflow "
                          "build lacks", op="load", hint="use map_location='cpu'")

    def array(self, dtype: _dt.DType) -> np.ndarray:
        """The bytes as a 1-d array of `dtype` (shared by every tensor of this storage)."""
        if dtype not in self._typed:
            n = self.nbytes // dtype.itemsize
            raw = self.raw[:n * dtype.itemsize]
            if dtype is _dt.bool_ and (raw > 1).any():  # a bool is one byte of 0 or 1
                arr = raw != 0
            elif self.big_endian and dtype.itemsize > 1:
                arr = raw.view(np.dtype(dtype.np).newbyteorder(">")).astype(dtype.np)
            else:
                arr = raw.view(dtype.np)
            self._typed[dtype] = arr
        return self._typed[dtype]


# ---- rebuilding tensors (the functions torch's names map to) ---------------------------------

def _ints(x, what: str) -> tuple:
    if not (type(x) in (tuple, list, Shape) and len(x) <= MAX_NDIM
            and all(type(v) is int and v >= 0 for v in x)):
        raise _Bad(f"a tensor's {what} is {short(x)}, not at most {MAX_NDIM} ints >= 0")
    return tuple(x)


class _Bad(Exception):
    """A rebuild call's arguments that describe no tensor (the reader names the file)."""


def _rebuild_tensor(storage, storage_offset, size, stride, dtype=None) -> Tensor:
    if not isinstance(storage, Storage):
        raise _Bad(f"a tensor's storage is {short(storage)}, not a storage of the archive")
    dtype = storage.dtype if dtype is None else dtype
    if not isinstance(dtype, _dt.DType):
        raise _Bad(f"a tensor has dtype {short(dtype)}, which shapeflow lacks")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if type(storage_offset) is not int or storage_offset < 0 or len(size) != len(stride):
        raise _Bad(f"a tensor of size {list(size)} has stride {list(stride)} and offset "
                   f"{short(storage_offset)}")
    count = storage.nbytes // dtype.itemsize
    numel = math.prod(size)
    if numel and storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) >= count:
        raise _Bad(f"storage {storage.key!r} holds {count} {dtype} elements, fewer than a tensor "
                   f"of size {list(size)}, stride {list(stride)} and offset {storage_offset} "
                   "reads")
    device = storage.device
    if not device.computes:
        return Tensor._make(None, size, dtype, device)
    if numel == 0:
        data = np.zeros(size, dtype.np)
    else:
        overlap = not _no_overlap(size, stride)  # a write to one element changes others
        if overlap and numel * dtype.itemsize > MAX_EXPANDED:
            raise _Bad(f"a tensor of size {list(size)} with stride {list(stride)}: its "
                       f"{numel * dtype.itemsize} bytes repeat storage {storage.key!r}, "
                       f"more than the {MAX_EXPANDED} shapeflow copies out")
        arr = storage.array(dtype)
        data = np.lib.stride_tricks.as_strided(
            arr[storage_offset:], size, tuple(s * dtype.itemsize for s in stride))
        if overlap:
            data = data.copy()
    return Tensor._make(device.from_numpy(data), size, dtype, device)


def _no_overlap(size: tuple, stride: tuple) -> bool:
    """Whether no two elements of this layout share memory."""
    extent = 1
    for s, n in sorted((s, n) for n, s in zip(size, stride) if n > 1):
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True


def _set_grad(t: Tensor, requires_grad) -> Tensor:
    if type(requires_grad) is not bool:
        raise _Bad(f"requires_grad is {short(requires_grad)}, not a bool")
    t.requires_grad = requires_grad and t.dtype.is_floating_point
    return t


def rebuild_tensor_v1(storage, storage_offset, size, stride) -> Tensor:
    """torch._utils._rebuild_tensor."""
    return _rebuild_tensor(storage, storage_offset, size, stride)


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                      metadata=None) -> Tensor:
    """torch._utils._rebuild_tensor_v2 (hooks are never saved; metadata: conj/neg bits)."""
    return _set_grad(_rebuild_tensor(storage, storage_offset, size, stride), requires_grad)


def rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                      dtype, metadata=None) -> Tensor:
    """torch._utils._rebuild_tensor_v3: an untyped storage read as `dtype` (uint16...)."""
    return _set_grad(_rebuild_tensor(storage, storage_offset, size, stride, dtype),
                     requires_grad)


def rebuild_parameter(data, requires_grad, backward_hooks):
    """torch._utils._rebuild_parameter: a shapeflow Parameter."""
    from ..nn.parameter import Parameter

    if not isinstance(data, Tensor) or type(requires_grad) is not bool:
        raise _Bad(f"a parameter of {short(data)} with requires_grad={short(requires_grad)}")
    return Parameter(data, requires_grad=requires_grad)


def rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    """torch._utils._rebuild_parameter_with_state, for a parameter without extra attributes."""
    if state:
        raise _Bad("a parameter with Python attributes, which shapeflow parameters cannot hold")
    return rebuild_parameter(data, requires_grad, backward_hooks)


def rebuild_from_type_v2(func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2, for a plain tensor or parameter."""
    from ..nn.parameter import Parameter

    if func not in _REBUILDS or new_type not in (Tensor, Parameter) or type(args) is not tuple:
        raise _Bad(f"a tensor of type {short(new_type)} rebuilt by {short(func)}")
    if state:
        raise _Bad("a tensor with Python attributes, which shapeflow tensors cannot hold")
    t = func(*args)
    return Parameter(t, requires_grad=t.requires_grad) if new_type is Parameter else t


def _device(kind, index=None):
    """torch.device('cpu') in a pickle: shapeflow's device of that name, or the name."""
    if type(kind) is not str or not (index is None or type(index) is int):
        raise _Bad(f"a device {short(kind)}, {short(index)}")
    name = kind if index is None else f"{kind}:{index}"
    try:
        return get_device(name)
    except DeviceError:
        return name  # a cuda device named in a config: kept as its name


def _bytearray(*args):
    if len(args) > 1 or (args and not isinstance(args[0], (bytes, str, list))):
        raise _Bad("bytearray of other than bytes")
    return bytearray(*args) if not args or not isinstance(args[0], str) else bytearray(
        args[0], "latin1")


def _encode(text, encoding="utf-8"):
    """_codecs.encode, as protocol 2 spells bytes: only latin-1 text to bytes."""
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise _Bad(f"_codecs.encode({short(text)}, {short(encoding)})")
    return text.encode("latin1")


_REBUILDS = (rebuild_tensor_v1, rebuild_tensor_v2, rebuild_tensor_v3)


def _table() -> dict[str, object]:
    from ..nn.parameter import Parameter

    table: dict[str, object] = {
        "torch._utils._rebuild_tensor": rebuild_tensor_v1,
        "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": rebuild_from_type_v2,
        "torch.Tensor": Tensor, "torch.nn.parameter.Parameter": Parameter,
        "torch.Size": Shape, "torch.device": _device,
        "torch.UntypedStorage": StorageType("UntypedStorage", None),
        "torch.storage.UntypedStorage": StorageType("UntypedStorage", None),
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": collections.Counter,
        "builtins.set": set, "builtins.frozenset": frozenset, "builtins.slice": slice,
        "builtins.complex": complex, "builtins.bytearray": _bytearray,
        "_codecs.encode": _encode,
    }
    table.update({f"torch.{name}": StorageType(name, d) for name, d in STORAGES.items()})
    table.update({f"torch.{name}": d for name, d in DTYPES.items()})
    return table


_TABLE: dict[str, object] = {}


def table() -> dict[str, object]:
    """torch's pickled names -> what shapeflow rebuilds them with (built on first use)."""
    if not _TABLE:
        _TABLE.update(_table())
    return _TABLE


# ---- reading ----------------------------------------------------------------------------------

class _Reader:
    """One open archive: its checked directory, and storages read on demand."""

    def __init__(self, where: str, f, restore) -> None:
        self.where, self.restore = where, restore
        start = f.tell()
        self.size = f.seek(0, 2) - start
        f.seek(start)
        try:
            self.zip = zipfile.ZipFile(f)
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
                NotImplementedError, struct.error, UnicodeDecodeError) as e:
            raise fail(where, f"a truncated or corrupted zip archive ({str(e):.100})",
                       "torch.save writes whole zip archives; was the copy cut short?") from None
        self.records = {i.filename: i for i in infos}
        if any(n.endswith("/constants.pkl") for n in self.records):
            raise fail(where, "a TorchScript archive (torch.jit.save), not a checkpoint",
                       "save the model's state_dict with torch.save and load that")
        pkl = [n for n in self.records if n.count("/") == 1 and n.endswith("/data.pkl")]
        if len(pkl) != 1:
            raise fail(where, "a zip archive, but not a PyTorch checkpoint: it holds "
                              f"{'no' if not pkl else len(pkl)} <archive>/data.pkl records",
                       "torch.save writes archive/data.pkl, archive/data/<key>, archive/version")
        self.prefix = pkl[0][:-len("data.pkl")]
        if not ({self.prefix + "version", self.prefix + ".data/version"} & set(self.records)):
            raise fail(where, f"a zip archive without the {self.prefix}version record of a "
                              "PyTorch checkpoint")
        self.inflated = 0
        self.big_endian = False
        if self.prefix + "byteorder" in self.records:
            order = bytes(self.read(self.prefix + "byteorder", limit=16))
            if order not in (b"little", b"big"):
                raise fail(where, f"byteorder record {short(order)} is neither little nor big")
            self.big_endian = order == b"big"
        self.storages: dict[str, Storage] = {}

    def read(self, name: str, limit: int | None = None, want: int | None = None) -> np.ndarray:
        """Record `name`'s bytes, its size checked against `want`/`limit` before allocating."""
        info = self.records.get(name)
        if info is None:
            raise fail(self.where, f"record {short(name)} is missing from the archive")
        self._check_size(info)
        n = info.file_size
        if want is not None and n != want:
            raise fail(self.where, f"record {short(name)} holds {n} bytes, the checkpoint "
                                   f"needs {want}")
        if limit is not None and n > limit:
            raise fail(self.where, f"record {short(name)} holds {n} bytes, more than {limit}")
        raw = np.empty(n, np.uint8)
        view, got = memoryview(raw), 0
        try:
            with self.zip.open(info) as r:
                while got < n:
                    k = r.readinto(view[got:got + _CHUNK])
                    if not k:
                        break
                    got += k
                r.read(1)  # at the end: zipfile checks the CRC
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error, RuntimeError, ValueError,
                NotImplementedError, struct.error) as e:
            raise fail(self.where, f"record {short(name)} is truncated or corrupted "
                                   f"({str(e):.100})") from None
        if got != n:
            raise fail(self.where, f"truncated: record {short(name)} holds {got} of its "
                                   f"{n} bytes")
        return raw

    def _check_size(self, info: zipfile.ZipInfo) -> None:
        """A record's claimed size, against the archive and deflate's ratio (zip bombs)."""
        name = short(info.filename)
        if info.flag_bits & 1:
            raise fail(self.where, f"record {name} is encrypted")
        if info.compress_size > self.size:
            raise fail(self.where, f"truncated: record {name} claims {info.compress_size} "
                                   f"bytes, the file holds {self.size}")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size:
                raise fail(self.where, f"corrupted zip: stored record {name} claims "
                                       f"{info.file_size} bytes in {info.compress_size}")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > MAX_RATIO * info.compress_size + 1024:
                raise fail(self.where, f"record {name} claims {info.file_size} bytes from "
                                       f"{info.compress_size} compressed, more than deflate "
                                       "can expand to (a zip bomb?)")
            self.inflated += info.file_size
            if self.inflated > MAX_INFLATED:
                raise fail(self.where, f"the compressed records expand to over {MAX_INFLATED} "
                                       "bytes (a zip bomb?)")
        else:
            raise fail(self.where, f"record {name} uses zip compression method "
                                   f"{info.compress_type}; torch.save stores records "
                                   "uncompressed")

    def persistent_load(self, pid) -> Storage:
        """A ('storage', type, key, location, numel) id: the storage, sizes checked first."""
        if type(pid) is not tuple or len(pid) != 5:
            raise _Bad(f"a persistent id {short(pid)}, not ('storage', type, key, location, "
                       "numel)")
        kind, stype, key, location, numel = pid
        if kind not in ("storage", b"storage"):
            raise _Bad(f"a persistent id of kind {short(kind)}: only storages are allowed")
        if not isinstance(stype, StorageType) or type(key) is not str or type(
                location) is not str or type(numel) is not int or numel < 0:
            raise _Bad(f"a storage id {short(pid)}")
        dtype = stype.dtype
        nbytes = numel * (1 if dtype is None else dtype.itemsize)
        if key in self.storages:
            st = self.storages[key]
            if st.dtype is not dtype or st.nbytes != nbytes:
                raise _Bad(f"storage {key!r} is read as {st.dtype} and as {dtype}")
            return st
        name = f"{self.prefix}data/{key}"
        info = self.records.get(name)
        if info is None:
            raise fail(self.where, f"storage {key!r} has no record {short(name)} in the archive")
        if info.file_size != nbytes:
            raise fail(self.where, f"storage {key!r} of {numel} {dtype or 'bytes'} needs "
                                   f"{nbytes} bytes, its record holds {info.file_size}")
        st = Storage(key, dtype, nbytes, location, cpu)  # where torch reads it to, first
        st.device = self.restore(location, st)
        if st.device.computes:
            st.raw = self.read(name, want=nbytes)
            st.big_endian = self.big_endian
        else:
            self._check_size(info)
        self.storages[key] = st
        return st


def read(where: str, f, restore, weights_only: bool):
    """The object the PyTorch checkpoint in the open file `f` holds."""
    r = _Reader(where, f, restore)
    data = bytes(r.read(r.prefix + "data.pkl", limit=r.size * MAX_RATIO + 1024))
    allowed = table()
    try:
        if weights_only:
            return RestrictedUnpickler(data, where, allowed, r.persistent_load).load()
        return _FullUnpickler(io.BytesIO(data), where, allowed, r.persistent_load).load()
    except _Bad as e:
        raise fail(where, f"data.pkl is corrupted: {e}") from None
    except DeviceError as e:
        raise DeviceError(f"load: {where}: {e.message}", op="load",
                          hint="pass map_location='cpu' (or {'cuda:0': 'cpu'}) to load on "
                               "this machine") from None


class _FullUnpickler(pickle.Unpickler):
    """weights_only=False: Python's unpickler, which imports and runs what the pickle names."""

    def __init__(self, file, where, allowed, persistent_load) -> None:
        super().__init__(file)
        self.where, self.allowed, self._persistent = where, allowed, persistent_load

    def find_class(self, module: str, name: str):
        full = global_name(module, name)
        if full in self.allowed:
            return self.allowed[full]
        if full.split(".")[0] == "torch":  # never import torch: shapeflow rebuilds its tensors
            raise fail(self.where, f"data.pkl needs torch's {full}, which shapeflow does not "
                                   "rebuild")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._persistent(pid)

    def load(self):
        try:
            return super().load()
        except (CheckpointError, _Bad, DeviceError):
            raise
        except ShapeflowError:
            raise
        except Exception as e:  # noqa: BLE001  (a hostile or stale pickle can raise anything)
            raise fail(self.where, f"unpickling data.pkl failed ({type(e).__name__}: "
                                   f"{str(e):.200})") from e


# ---- writing ----------------------------------------------------------------------------------

class _Ref:
    """A torch global to emit by name (GLOBAL 'module name'), never imported here."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle checks that a reduce function is callable
        raise TypeError(f"{self.module}.{self.name} is written by name, never called")


_REFS: dict[tuple[str, str], _Ref] = {}


def _ref(module: str, name: str) -> _Ref:
    return _REFS.setdefault((module, name), _Ref(module, name))


class _Saved:
    """A storage to write: a contiguous 1-d array, under `key`."""

    def __init__(self, array: np.ndarray, dtype: _dt.DType, key: str) -> None:
        self.array, self.dtype, self.key = array, dtype, key


class _Pickler(pickle._Pickler):  # the Python pickler: it lets torch's names be written
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, protocol: int) -> None:
        super().__init__(file, protocol=protocol)
        self.saved: dict[int, _Saved] = {}  # id(root array) -> its storage
        self.keep: list = []  # the roots stay alive, so their ids stay unique

    def save_ref(self, obj: _Ref) -> None:
        if self.proto >= 4:
            self.save(obj.module)
            self.save(obj.name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Ref] = save_ref

    def save_dtype(self, obj: _dt.DType) -> None:
        self.save_ref(_ref("torch", obj.name))

    dispatch[_dt.DType] = save_dtype

    def persistent_id(self, obj):
        if type(obj) is _Saved:
            storage = _STORAGE_OF.get(obj.dtype)
            if storage is None:  # torch's newer dtypes: bytes, read back as the dtype
                return ("storage", _ref("torch.storage", "UntypedStorage"), obj.key, "cpu",
                        obj.array.nbytes)
            return ("storage", _ref("torch", storage), obj.key, "cpu", obj.array.size)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, Device):
            return (_ref("torch", "device"), (str(obj),))
        if type(obj) is Shape:
            return (_ref("torch", "Size"), (tuple(obj),))
        return NotImplemented

    def tensor(self, x: Tensor):
        from ..nn.parameter import Parameter

        hooks = collections.OrderedDict()
        if isinstance(x, Parameter):
            plain = Tensor._make(x._data, x.shape, x.dtype, x.device)
            self.keep.append(plain)
            return (_ref("torch._utils", "_rebuild_parameter"),
                    (plain, bool(x.requires_grad), hooks))
        if not x.device.computes:
            raise DeviceError(f"save: a {x.device} tensor {list(x.shape)} {x.dtype} has shape "
                              "and dtype but no data to save", op="save",
                              hint="save tensors of a model that ran on cpu")
        storage, offset, stride = self.storage(x)
        args = (storage, offset, tuple(x.shape), stride, bool(x.requires_grad), hooks)
        if x.dtype in _STORAGE_OF:
            return (_ref("torch._utils", "_rebuild_tensor_v2"), args)
        return (_ref("torch._utils", "_rebuild_tensor_v3"), (*args, x.dtype))

    def storage(self, x: Tensor) -> tuple[_Saved, int, tuple]:
        """The tensor's storage, offset and stride: views of one array share one storage."""
        arr = np.asarray(x.device.to_numpy(x._data))
        size = arr.itemsize
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        if (arr.size and root.dtype == arr.dtype == np.dtype(x.dtype.np)
                and root.flags.c_contiguous and all(s >= 0 and s % size == 0 for s in arr.strides)):
            delta = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            if delta >= 0 and delta % size == 0:
                saved = self.saved.get(id(root))
                if saved is None:
                    saved = self.saved[id(root)] = _Saved(root.reshape(-1), x.dtype,
                                                          str(len(self.saved)))
                    self.keep.append(root)
                stride = tuple(s // size if n != 1 else c
                               for s, n, c in zip(arr.strides, arr.shape, _contiguous(arr.shape)))
                return saved, delta // size, stride
        copy = np.ascontiguousarray(arr, dtype=x.dtype.np).reshape(-1)
        saved = _Saved(copy, x.dtype, str(len(self.saved)))
        self.saved[id(copy)] = saved
        self.keep.append(copy)
        return saved, 0, _contiguous(arr.shape)


def _contiguous(shape) -> tuple:
    stride, out = 1, []
    for n in reversed(shape):
        out.append(stride)
        stride *= max(n, 1)
    return tuple(reversed(out))


def write(obj, protocol: int = 2) -> bytes:
    """`obj` as the bytes of a PyTorch checkpoint (what `torch.save` writes)."""
    buf = io.BytesIO()
    pickler = _Pickler(buf, protocol)
    pickler.dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(_info("data.pkl"), buf.getvalue())
        z.writestr(_info("byteorder"), sys.byteorder)
        for saved in pickler.saved.values():
            name = f"{ARCHIVE}/data/{saved.key}"
            # torch pads each storage's local header so the data starts 64-byte aligned
            pad = -(out.tell() + 30 + len(name.encode()) + 4) % 64
            info = _info(f"data/{saved.key}")
            info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            z.writestr(info, memoryview(saved.array.view(np.uint8)))
        z.writestr(_info("version"), "3\n")
        z.writestr(_info(".data/serialization_id"), secrets.token_hex(20))
    return out.getvalue()


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(f"{ARCHIVE}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    return info


__all__ = ["WeightsOnlyError", "read", "table", "write"]
