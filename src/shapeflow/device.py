"""Devices: 'cpu' (NumPy arrays) and 'meta' (shape and dtype, no data).

A Device is also a context manager, as `torch.device` is: inside `with sf.device("meta"):`
factories, `sf.tensor` and module constructors build on meta when given no device. The
default is per thread, and `set_default_device` sets the one the contexts return to.
"""

from __future__ import annotations

import threading

from .errors import DeviceError


class Device(str):
    """A device name that compares equal to its string (`t.device == 'cpu'`)."""

    __slots__ = ()

    @property
    def type(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"device(type='{self}')"

    def __reduce__(self):  # unpickle to the one shared instance (ops compare devices by `is`)
        return (get_device, (str(self),))

    def __enter__(self) -> Device:
        # the stack is the thread's, not the Device's: cpu and meta are shared singletons
        _default.saved.append(_default.device)
        _default.device = _DEVICES[str(self)]
        return self

    def __exit__(self, *exc) -> bool:
        _default.device = _default.saved.pop()
        return False


cpu = Device("cpu")
meta = Device("meta")
_DEVICES = {"cpu": cpu, "meta": meta}


class _Default(threading.local):
    """This thread's default device and the ones the open `with device:` blocks replaced."""

    def __init__(self) -> None:  # runs once in each thread that reads it
        self.device = cpu
        self.saved: list[Device] = []


_default = _Default()


def get_default_device() -> Device:
    """The device factories use when given none: cpu, unless a `with device:` says otherwise."""
    return _default.device


def set_default_device(device) -> None:
    """Make `device` this thread's default (None: cpu), as `torch.set_default_device`."""
    _default.device = cpu if device is None else get_device(device)


def get_device(x) -> Device:
    """The Device for 'cpu', 'meta' or a Device (None: cpu); DeviceError for anything else."""
    if x is None:  # cpu, not the default: `sf.load` and `.to()` keep their meaning in a `with`
        return cpu
    if isinstance(x, Device):
        return _DEVICES[str(x)]
    d = _DEVICES.get(x) if isinstance(x, str) else None
    if d is None:
        if isinstance(x, str) and x.startswith("cuda"):
            raise DeviceError(
                f"device {x!r} is not available: this shapeflow build has only cpu and meta",
                hint="use device='cpu' to run, or device='meta' to trace shapes and memory",
            )
        raise DeviceError(f"unknown device {x!r}", hint="use 'cpu' or 'meta'")
    return d
