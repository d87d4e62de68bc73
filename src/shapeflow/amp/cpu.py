"""`sf.cpu.amp`, as `torch.cpu.amp`: the cpu's autocast and GradScaler (deprecated there, as
here: both warn and point to `sf.amp.autocast("cpu", ...)`)."""

from __future__ import annotations

import warnings

from .. import dtypes as _dt
from .autocast_mode import autocast as _autocast


class autocast(_autocast):  # noqa: N801  (PyTorch's name)
    """`sf.amp.autocast("cpu", ...)` under torch.cpu.amp's name and signature."""

    def __init__(self, enabled: bool = True, dtype=_dt.bfloat16,
                 cache_enabled: bool = True) -> None:
        warnings.warn("`sf.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`sf.amp.autocast('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def __getattr__(name: str):
    if name == "GradScaler":  # imported when first used, as sf.amp's
        from .grad_scaler import GradScaler as _GradScaler

        class GradScaler(_GradScaler):
            """`sf.amp.GradScaler("cpu", ...)` under torch.cpu.amp's name and signature."""

            def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                         backoff_factor: float = 0.5, growth_interval: int = 2000,
                         enabled: bool = True) -> None:
                warnings.warn("`sf.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                              "`sf.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                              stacklevel=2)
                super().__init__("cpu", init_scale, growth_factor, backoff_factor,
                                 growth_interval, enabled)

        globals()["GradScaler"] = GradScaler
        return GradScaler
    raise AttributeError(f"module 'shapeflow.amp.cpu' has no attribute {name!r}")
