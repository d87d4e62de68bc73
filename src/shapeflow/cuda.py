"""`sf.cuda`: what `torch.cuda` answers on a machine without a GPU, truthfully.

This shapeflow build has two devices, cpu and meta, so there is no cuda device:
`is_available()` is False and `device_count()` 0, which makes the usual
`device = "cuda" if torch.cuda.is_available() else "cpu"` pick cpu. Seeding, waiting and
freeing the cache have no device to act on and do nothing; questions about a current
device raise a DeviceError.
"""

from __future__ import annotations

import importlib.util

from .errors import DeviceError

__all__ = [
    "current_device", "device_count", "empty_cache", "get_device_name", "initial_seed",
    "is_available", "is_bf16_supported", "is_initialized", "manual_seed", "manual_seed_all",
    "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
    "reset_peak_memory_stats", "seed", "seed_all", "synchronize",
]


def _no_device(what: str) -> DeviceError:
    return DeviceError(
        f"torch.cuda.{what}: there is no cuda device (this shapeflow build has cpu and meta)",
        op=f"cuda.{what}",
        hint="guard the call with `if sf.cuda.is_available():`, or use device='cpu'",
    )


def is_available() -> bool:
    """False: shapeflow has no cuda device."""
    return False


def device_count() -> int:
    """0: no cuda devices."""
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Nothing to seed without a cuda device (as torch.cuda.manual_seed there); cpu draws are
    seeded by `sf.manual_seed`."""
    int(seed)  # still reject a seed that is not a number, as PyTorch does


def manual_seed_all(seed: int) -> None:
    """As `manual_seed`: no cuda devices to seed."""
    int(seed)


def seed() -> None:
    """No cuda device to seed."""


def seed_all() -> None:
    """No cuda devices to seed."""


def synchronize(device=None) -> None:
    """No cuda work is ever pending: returns at once (PyTorch's CPU build raises here)."""


def empty_cache() -> None:
    """No cuda memory to free."""


def memory_allocated(device=None) -> int:
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def memory_reserved(device=None) -> int:
    return 0


def max_memory_reserved(device=None) -> int:
    return 0


def reset_peak_memory_stats(device=None) -> None:
    """No cuda memory statistics to reset."""


def current_device() -> int:
    raise _no_device("current_device")


def get_device_name(device=None) -> str:
    raise _no_device("get_device_name")


def initial_seed() -> int:
    raise _no_device("initial_seed")


def __getattr__(name: str):
    if name == "amp":
        # torch.cuda.amp is torch.amp's cuda flavour: alias shapeflow's once it exists
        if importlib.util.find_spec("shapeflow.amp") is not None:
            return importlib.import_module("shapeflow.amp")
        raise AttributeError(
            "not implemented in shapeflow yet: torch.cuda.amp (GradScaler, autocast): "
            "shapeflow has no mixed-precision training yet; train in float32 (drop the "
            "scaler and the autocast context)", name=None)
    from ._porting import missing_attribute

    raise missing_attribute("module 'shapeflow.cuda'", "torch.cuda", name)
