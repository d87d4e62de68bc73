"""Activations, one home: smooth pointwise, piecewise-linear, gated, GELU, parametric.

One concept a module; this package re-exports their names (`ops.activation.X`). Each
function's sf / Tensor / F names are its `@public(...)` declaration (ops/registry.py).
"""

from __future__ import annotations

from .gated import (  # noqa: F401  (re-exported: importers use these)
    Silu,
    SiluBackward,
    glu,
    hardswish,
    mish,
    silu,
)
from .gelu import (  # noqa: F401  (re-exported: importers use these)
    Gelu,
    GeluBackward,
    GeluGrad,
    gelu,
    normal_cdf,
)
from .parametric import prelu, rrelu  # noqa: F401  (re-exported: importers use these)
from .piecewise import (  # noqa: F401  (re-exported: importers use these)
    Hardtanh,
    LeakyRelu,
    Relu,
    ReluBackward,
    hardshrink,
    hardsigmoid,
    hardtanh,
    leaky_relu,
    relu,
    relu6,
    softshrink,
    threshold,
)
from .pointwise import (  # noqa: F401  (re-exported: importers use these)
    Elu,
    Sigmoid,
    Softplus,
    celu,
    elu,
    logsigmoid,
    selu,
    sigmoid,
    softplus,
    softsign,
    tanhshrink,
)
from .softmin import softmin  # noqa: F401  (re-exported: importers use these)
