"""Normalization layers' ops, one home: batch, layer, RMS, group, instance and local response
norms, and normalize.

One norm a module; this package re-exports their names (`ops.norm.X`). Each function's
sf / F names are its `@public(...)` declaration (ops/registry.py).
"""

from __future__ import annotations

from .batch_norm import (  # noqa: F401  (re-exported: importers use these)
    BatchNorm,
    BatchNormBackward,
    batch_norm,
)
from .group_norm import group_norm  # noqa: F401  (re-exported: importers use these)
from .instance_norm import (  # noqa: F401  (re-exported: importers use these)
    InstanceNorm,
    InstanceNormBackward,
    instance_norm,
    instance_norm_fused,
)
from .layer_norm import (  # noqa: F401  (re-exported: importers use these)
    LayerNorm,
    NormBackward,
    NormWeightBackward,
    layer_norm,
)
from .local_response_norm import local_response_norm  # noqa: F401  (re-exported: importers use these)
from .normalize import normalize  # noqa: F401  (re-exported: importers use these)
from .rms_norm import RMSNorm, rms_norm  # noqa: F401  (re-exported: importers use these)
