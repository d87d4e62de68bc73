"""The quantization schemes `quantize` knows: how weights are stored and activations treated."""

from __future__ import annotations

from dataclasses import dataclass

from .qtensor import QuantError


@dataclass(frozen=True)
class Scheme:
    """Weights: qdtype and granularity (axis 0 = one scale per output channel / embedding
    row; group_size = groups along the input dim); activations: None (weight-only: the
    weight is dequantized and the product runs in float32), "int8" (per-token dynamic int8,
    int32 accumulation) or "fp8-e4m3" (per-tensor scale, static when calibrated)."""

    name: str
    weight: str
    axis: int | None = 0
    group_size: int | None = None
    activations: str | None = None
    embedding: bool = True  # Embedding tables stored in the weight format (weight-only)
    description: str = ""

    def weight_kwargs(self) -> dict:
        """quantize_tensor's keywords for a [out, in] weight (or an embedding table)."""
        return {"qdtype": self.weight, "axis": self.axis, "group_size": self.group_size,
                "symmetric": True}


SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("int8", "int8", activations="int8",
           description="per-output-channel symmetric int8 weights, per-token dynamic int8 "
                       "activations, int32 accumulation"),
    Scheme("int8-weight", "int8",
           description="per-output-channel symmetric int8 weights, float32 activations"),
    Scheme("int4-g32", "int4", axis=None, group_size=32,
           description="symmetric int4 weights, one float16 scale per 32 inputs"),
    Scheme("int4-g128", "int4", axis=None, group_size=128,
           description="symmetric int4 weights, one float16 scale per 128 inputs"),
    Scheme("fp8-e4m3", "fp8-e4m3", axis=None, activations="fp8-e4m3",
           description="fp8 E4M3 weights and activations, one scale per tensor (activation "
                       "scale from calibration batches, else per call)"),
)}


def get_scheme(scheme) -> Scheme:
    """The Scheme named `scheme` (or `scheme` itself), or a QuantError listing them."""
    if isinstance(scheme, Scheme):
        return scheme
    try:
        return SCHEMES[scheme]
    except (KeyError, TypeError):
        raise QuantError(f"quantize: unknown scheme {scheme!r}", op="quantize",
                         hint=f"one of {', '.join(SCHEMES)}") from None
