"""`Rearrange` and `Reduce` layers (as `einops.layers.torch`) for shapeflow models.

`from shapeflow.nn import Rearrange` imports einops (it needs `pip install einops`);
`import shapeflow.nn` does not. A ViT's `Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
p1=16, p2=16)` ports by its import line.
"""

from __future__ import annotations

try:
    from einops.layers import RearrangeMixin, ReduceMixin
except ImportError as e:  # pragma: no cover - only without einops
    raise ImportError("shapeflow.nn.Rearrange and Reduce need einops: pip install einops") from e

from .module import Module

__all__ = ["Rearrange", "Reduce"]


class Rearrange(RearrangeMixin, Module):
    """einops.rearrange as a layer: `Rearrange("b c h w -> b (h w) c")`."""

    def forward(self, input):
        return self._apply_recipe(input)


class Reduce(ReduceMixin, Module):
    """einops.reduce as a layer: `Reduce("b c h w -> b c", "mean")`."""

    def forward(self, input):
        return self._apply_recipe(input)
