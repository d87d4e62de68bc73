"""One training step in a chosen precision, for `shapeflow train --precision` and benches.

fp32; bf16-mixed (forward and loss under sf.autocast, fp32 weights); fp16-mixed (the same in
float16, the loss scaled by a GradScaler that skips steps with inf/NaN gradients); bf16-true
(the model in bfloat16, the optimizer keeping fp32 master weights: master_weights=True).
"""

from __future__ import annotations

import contextlib

PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "bf16-true")


class AmpStep:
    """The autocast region, loss scaling and model dtype a precision asks for."""

    def __init__(self, precision: str = "fp32", model=None) -> None:
        import shapeflow as sf
        from shapeflow.errors import ShapeflowError

        if precision not in PRECISIONS:
            raise ShapeflowError(f"unknown precision {precision!r}",
                                 hint=f"use one of {', '.join(PRECISIONS)}")
        self.precision = precision
        self.dtype = {"bf16-mixed": sf.bfloat16, "fp16-mixed": sf.float16}.get(precision)
        self.master_weights = precision == "bf16-true"
        self.scaler = sf.amp.GradScaler("cpu", enabled=precision == "fp16-mixed")
        if self.master_weights and model is not None:
            model.to(sf.bfloat16)

    def autocast(self):
        """The region forward and loss run in (nothing for fp32 and bf16-true)."""
        import shapeflow as sf

        if self.dtype is None:
            return contextlib.nullcontext()
        return sf.autocast("cpu", dtype=self.dtype)

    def backward_and_step(self, loss, opt, params, clip: float | None = None) -> bool:
        """Backward, clip, step and zero the grads; False where the scaler skipped the step."""
        import shapeflow as sf

        params = list(params)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(opt)  # (nothing without scaling) before clipping
        if clip is not None:
            sf.nn.utils.clip_grad_norm_(params, clip)
        before = self.scaler.get_scale()
        self.scaler.step(opt)
        self.scaler.update()
        opt.zero_grad()
        return not self.scaler.is_enabled() or self.scaler.get_scale() >= before
