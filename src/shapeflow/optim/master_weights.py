"""Float32 master weights for 16-bit parameters (`master_weights=True` on an optimizer).

A model trained in bfloat16 or float16 (`model.to(sf.bfloat16)`) loses small updates to
rounding: lr * update is often below half a 16-bit ulp of the weight. With master weights
the optimizer keeps a float32 copy of each 16-bit parameter in its state ("master"), runs
its usual update on that copy with the gradient widened to float32 (its moments are float32
too), and writes the copy back rounded to the parameter's dtype.
"""

from __future__ import annotations

import functools

from .. import dtypes as _dt
from ..tensor import Tensor

_HALF = (_dt.bfloat16, _dt.float16)
_F32 = _dt.float32.np


def with_master_weights(step):
    """Wrap an optimizer's step: 16-bit parameters of groups with master_weights=True are
    updated through their float32 masters."""
    @functools.wraps(step)
    def wrapped(self, *args, **kwargs):
        swapped = _swap_in(self)
        if not swapped:
            return step(self, *args, **kwargs)
        try:
            return step(self, *args, **kwargs)
        finally:
            _swap_out(self, swapped)

    return wrapped


def _swap_in(opt) -> list:
    """Point each 16-bit parameter (with a grad) at its float32 master for the step."""
    swapped = []
    for group in opt.param_groups:
        if not group.get("master_weights"):
            continue
        for p in group["params"]:
            if p.grad is None or p.dtype not in _HALF or p._data is None:
                continue
            state = opt.state[p]
            master = state.get("master")
            if master is None:  # the first step: made here, stored after it (see _swap_out)
                master = Tensor._make(p._data.astype(_F32), p.shape, _dt.float32, p.device)
            grad = p.grad
            g32 = Tensor._make(grad._data.astype(_F32), grad.shape, _dt.float32,
                               grad.device)
            swapped.append((p, p._data, p.dtype, grad, master))
            p._data, p.dtype, p.grad = master._data, _dt.float32, g32
    return swapped


def _swap_out(opt, swapped: list) -> None:
    """Give each parameter back its 16-bit array, now the master rounded to its dtype."""
    for p, data, dtype, grad, master in swapped:
        master._data = p._data  # an optimizer may have rebound it (it updates in place)
        p.device.xp.copyto(data, master._data, casting="unsafe")  # round to nearest even
        p._data, p.dtype, p.grad = data, dtype, grad
        opt.state[p]["master"] = master
