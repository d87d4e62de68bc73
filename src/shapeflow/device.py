"""Devices: 'cpu' (NumPy arrays) and 'meta' (shape and dtype, no data)."""

from __future__ import annotations

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


cpu = Device("cpu")
meta = Device("meta")
_DEVICES = {"cpu": cpu, "meta": meta}


def get_device(x) -> Device:
    """The Device for 'cpu', 'meta' or a Device; DeviceError for anything else."""
    if x is None:
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
