"""Devices: 'cpu' (NumPy arrays) and 'meta' (shape and dtype, no data), one class each.

The engine and the ops ask the device, never its name: `device.computes` says whether kernels
run (False on meta: shapes and dtypes only); `device.xp` (its array namespace) and
`device.kernels` (its kernel table, backend/) are what ops compute with; and `asarray` /
`zeros` / `from_numpy` / `to_numpy` make and move its arrays (None on meta). A new device
is one subclass of Device, registered with `register_device`; docs/design.md "Devices" says
how.

A Device is also a context manager, as `torch.device` is: inside `with sf.device("meta"):`
factories, `sf.tensor` and module constructors build on meta when given no device. The
default is per thread, and `set_default_device` sets the one the contexts return to.
"""

from __future__ import annotations

import threading

import numpy as np

from .backend.cpu.ladder import table as _cpu_kernels
from .backend.null import NullKernels
from .errors import DeviceError


class Device(str):
    """A device name that compares equal to its string (`t.device == 'cpu'`).

    The base class is a computing device whose arrays are NumPy's, in host memory; a subclass
    overrides what differs. One instance per name, shared: ops compare devices by `is`.
    """

    __slots__ = ()
    # Whether ops run their kernels here. Its arrays say the same: a device that does not
    # compute gives None for every array (see MetaDevice), and a tensor's data is None
    # exactly there, which is what apply() reads (~120 instructions cheaper per op).
    computes: bool = True
    # What ops compute with: `xp`, the array namespace (NumPy's API: numpy here, CuPy on a GPU)
    # for the NumPy-style rest, and `kernels`, the kernel table (backend/) for matmul, norms,
    # softmax, losses, convolutions, attention blocks, optimizer updates and allocation.
    xp = np
    kernels = _cpu_kernels
    array_type = np.ndarray  # the class of this device's arrays

    @property
    def type(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"device(type='{self}')"

    def __reduce__(self):  # unpickle to the one shared instance (ops compare devices by `is`)
        return (get_device, (str(self),))

    def __enter__(self) -> Device:
        # the stack is the thread's, not the Device's: devices are shared singletons
        _default.saved.append(_default.device)
        _default.device = _DEVICES[str(self)]
        return self

    def __exit__(self, *exc) -> bool:
        _default.device = _default.saved.pop()
        return False

    # ---- this device's arrays (the base class: NumPy arrays in host memory) ----------------
    def asarray(self, x, dtype=None):
        """`x` (an array of this device, a NumPy array or a number) as this device's array."""
        return np.asarray(x, dtype)

    def zeros(self, shape, dtype):
        """A new array of zeros (`dtype`: a NumPy dtype)."""
        return np.zeros(shape, dtype)

    def from_numpy(self, array: np.ndarray):
        """A host NumPy array as this device's array (shared where the device is the host)."""
        return array

    def to_numpy(self, data) -> np.ndarray:
        """This device's array as a host NumPy array (for printing, saving, `.tolist()`)."""
        return data


class CpuDevice(Device):
    """The host: NumPy arrays, MKL and the compiled kernels of `backend/`. Also `torch.cpu`'s
    functions (and `sf.cpu.amp`, which the amp package adds)."""

    __slots__ = ()

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def synchronize(device=None) -> None:
        """Nothing to wait for: a cpu op has finished when it returns."""


class MetaDevice(Device):
    """Shapes and dtypes only: no kernel runs and no array is made (the array is None)."""

    __slots__ = ()
    computes = False
    kernels = NullKernels()  # every kernel and namespace function returns None
    xp = kernels.xp

    def asarray(self, x, dtype=None) -> None:
        return None

    def zeros(self, shape, dtype) -> None:
        return None

    def from_numpy(self, array) -> None:
        return None

    def to_numpy(self, data) -> np.ndarray:
        raise DeviceError(f"a {self} tensor has shape and dtype but no data",
                          hint="run on a computing device to get values")


cpu = CpuDevice("cpu")
meta = MetaDevice("meta")
_DEVICES: dict[str, Device] = {"cpu": cpu, "meta": meta}


def register_device(device: Device) -> Device:
    """Make `device` the one `get_device(name)` returns (for a new Device subclass)."""
    if not isinstance(device, Device):
        raise DeviceError(f"register_device expects a Device instance, got {device!r}")
    name = str(device)
    if name in _DEVICES and _DEVICES[name] is not device:
        raise DeviceError(f"a device named {name!r} is already registered")
    _DEVICES[name] = device
    return device


def unregister_device(device: Device) -> None:
    """Remove a device `register_device` added (cpu and meta stay)."""
    if device is cpu or device is meta:
        raise DeviceError(f"the {device} device cannot be unregistered")
    if _DEVICES.get(str(device)) is device:
        del _DEVICES[str(device)]


def is_device_name(name: str) -> bool:
    """Whether a string names a device (registered, or cuda) rather than a dtype in `.to()`."""
    return name in _DEVICES or name.startswith("cuda")


class _Default(threading.local):
    """This thread's default device and the ones the open `with device:` blocks replaced."""

    def __init__(self) -> None:  # runs once in each thread that reads it
        self.device: Device = cpu
        self.saved: list[Device] = []


_default = _Default()


def get_default_device() -> Device:
    """The device factories use when given none: cpu, unless a `with device:` says otherwise."""
    return _default.device


def set_default_device(device) -> None:
    """Make `device` this thread's default (None: cpu), as `torch.set_default_device`."""
    _default.device = cpu if device is None else get_device(device)


def get_device(x) -> Device:
    """The Device for 'cpu', 'meta', another registered name or a Device (None: cpu)."""
    if x is None:  # cpu, not the default: `sf.load` and `.to()` keep their meaning in a `with`
        return cpu
    d = _DEVICES.get(x) if isinstance(x, str) else None  # a Device hashes as its name
    if d is None:
        if isinstance(x, str) and x.startswith("cuda"):
            raise DeviceError(
                f"device {x!r} is not available: this shapeflow build has the devices "
                f"{_names()}",
                hint="use device='cpu' to run, or device='meta' to trace shapes and memory",
            )
        raise DeviceError(f"unknown device {x!r}", hint=f"use one of {_names()}")
    return d


def _names() -> str:
    return ", ".join(repr(n) for n in _DEVICES)
