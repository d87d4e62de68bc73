"""`sf.amp.GradScaler`: dynamic loss scaling for float16 training, torch.amp.GradScaler's rules.

The loss is multiplied by the scale before backward so small float16 gradients do not
flush to zero; `unscale_` divides the gradients back (and finds inf/NaN among them), `step`
skips the optimizer's step when it found any, and `update` halves the scale after such a
step or doubles it after `growth_interval` clean ones.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from .. import dtypes as _dt
from ..errors import DeviceError, ShapeflowError
from ..ops.base import reads_data
from ..tensor import Tensor


class GradScalerError(ShapeflowError, RuntimeError):
    """A GradScaler call out of order (unscale_ twice, step after step...)."""

    kind = "GradScalerError"


class ScaleValueError(ShapeflowError, ValueError):
    """A GradScaler argument PyTorch rejects with ValueError (a factor, fp16 gradients)."""

    kind = "ScaleValueError"


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN, adapt the scale."""

    def __init__(self, device: str = "cpu", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if device not in ("cpu", "meta"):
            raise DeviceError(f"GradScaler: device {device!r} is not available; shapeflow "
                                 "scales on the cpu", hint="use GradScaler('cpu')")
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise ScaleValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ScaleValueError("The backoff factor must be < 1.0.")
        self._init_scale = float(init_scale)
        self._scale: np.ndarray | None = None  # float32, one element (PyTorch's tensor)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._growth_tracker: int | None = None
        self._per_optimizer_states: dict[int, dict] = {}

    # ---- scaling ----------------------------------------------------------------------------
    def _lazy_init(self) -> None:
        self._scale = np.full(1, self._init_scale, np.float32)
        self._growth_tracker = self._init_growth_tracker

    def _opt_state(self, optimizer) -> dict:
        return self._per_optimizer_states.setdefault(id(optimizer), _fresh_state())

    def scale(self, outputs):
        """outputs * scale (a tensor, or tensors in lists, tuples and dicts)."""
        if not self._enabled:
            return outputs
        reads_data("GradScaler.scale")  # (a host-side scale: sf.compile breaks)
        if self._scale is None:
            self._lazy_init()
        from ..factories import full

        scale = float(self._scale[0])

        def apply(v):
            if isinstance(v, Tensor):
                # PyTorch's 0-d float32 scale: a 0-d float16 loss becomes float32, other
                # outputs keep dtype and shape (the product in float32: 0.5 * 2^16 fits fp16)
                return v * full((), scale, dtype=_dt.float32, device=v.device)
            if isinstance(v, (list, tuple)):
                return type(v)(apply(x) for x in v)
            if isinstance(v, dict):
                return {k: apply(x) for k, x in v.items()}
            raise ScaleValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: np.float32, allow_fp16: bool) -> bool:
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if not allow_fp16 and g.dtype is _dt.float16:
                    raise ScaleValueError("Attempting to unscale FP16 gradients.")
                if g._data is None:
                    continue  # meta: nothing to check
                arr = g._data
                if not np.isfinite(arr).all():
                    found = True
                # in place, in the gradient's dtype (as _amp_foreach_non_finite_check_and_unscale_)
                np.multiply(arr, inv_scale, out=arr, casting="unsafe")
                g._version[0] += 1
        return found

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale in place (before clipping them)."""
        if not self._enabled:
            return
        reads_data("GradScaler.unscale_")  # (a host-side scale: sf.compile breaks)
        self._check_scale_growth_tracker("unscale_")
        st = self._opt_state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise GradScalerError("unscale_() has already been called on this optimizer since "
                                  "the last update().")
        if st["stage"] is OptState.STEPPED:
            raise GradScalerError("unscale_() is being called after step().")
        inv_scale = np.float32(1.0 / np.float64(self._scale[0]))  # reciprocal in double
        st["found_inf"] = self._unscale_grads_(optimizer, inv_scale, False)
        st["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless the gradients held inf or NaN (then the step is skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        reads_data("GradScaler.step")  # (a host-side scale: sf.compile breaks)
        if "closure" in kwargs:
            raise GradScalerError("Closure use is not currently supported if GradScaler is "
                                  "enabled.")
        self._check_scale_growth_tracker("step")
        st = self._opt_state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise GradScalerError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        retval = None
        if not st["found_inf"]:
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Set the scale for the next iteration: backoff after inf/NaN, growth after
        `growth_interval` clean steps; or `new_scale` (a float or one-element tensor)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise ScaleValueError("new_scale should be a float or a 1-element tensor.")
                if new_scale.requires_grad:
                    raise ScaleValueError("new_scale should not require grad.")
                self._scale[0] = np.float32(new_scale.item())
            else:
                self._scale[0] = np.float32(new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer_states.values()
                     if s["found_inf"] is not None]
            if not found:
                raise GradScalerError("No inf checks were recorded prior to update.")
            if any(found):  # torch._amp_update_scale_, in float32
                self._scale[0] = self._scale[0] * np.float32(self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = self._scale[0] * np.float32(self._growth_factor)
                    if np.isfinite(grown):
                        self._scale[0] = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer_states = {}

    def _check_scale_growth_tracker(self, funcname: str) -> None:
        if self._scale is None:
            raise GradScalerError(f"Attempted {funcname} but _scale is None.  This may indicate "
                                  "your script did not use scaler.scale(loss or outputs) "
                                  "earlier in the iteration.")

    # ---- settings ----------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (init_scale before the first `scale`; 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale[0])

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else \
            self._growth_tracker

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval, _growth_tracker ({} when
        disabled), as PyTorch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what `state_dict` returned (PyTorch's dict loads too)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise GradScalerError("The source state dict is empty, possibly because it was "
                                  "saved from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale[0] = np.float32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

    def __repr__(self) -> str:
        return (f"GradScaler(scale={self.get_scale()}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval}, enabled={self._enabled})")
