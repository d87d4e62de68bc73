"""meta_copy: a model's copy on the meta device, for summaries, graphs and memory reports."""

from __future__ import annotations

import copy

from ..device import meta
from ..tensor import Tensor


def meta_copy(model):
    """A copy of `model` on the meta device: parameters stay Parameters, no data is copied."""
    from ..nn.parameter import Parameter  # not at import: `import shapeflow` leaves nn out

    memo = {}
    for t in list(model.parameters()) + list(model.buffers()):
        m = Tensor._make(None, t.shape, t.dtype, meta)
        memo[id(t)] = Parameter(m, requires_grad=t.requires_grad) if isinstance(
            t, Parameter) else m
    return copy.deepcopy(model, memo)
