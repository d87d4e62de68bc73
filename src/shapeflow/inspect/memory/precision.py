"""The precisions a memory report plans, and how it tells autocast's weight copies apart."""

from __future__ import annotations

from ... import dtypes as _dt
from ...tensor import Tensor

# name -> (16-bit dtype, how it is used): "mixed" runs the step under sf.autocast (fp32
# weights, grads and state; 16-bit weight copies and activations where ops run in 16 bits),
# "true" holds 16-bit weights and grads with fp32 master weights and state (Megatron's, and
# what optimizers with master_weights=True keep), as Lightning names them
PRECISIONS = {"fp32": (None, None), "bf16-mixed": (_dt.bfloat16, "mixed"),
              "fp16-mixed": (_dt.float16, "mixed"), "bf16-true": (_dt.bfloat16, "true"),
              "fp16-true": (_dt.float16, "true")}
WEIGHT_COPIES = "16-bit weight copies"  # autocast's casts of fp32 weights, kept for backward


def is_weight_copy(t, param_keys) -> bool:
    """Whether a saved tensor is autocast's 16-bit cast of a parameter."""
    from ...ops.elementwise.casts import Cast

    node = t.grad_fn if isinstance(t, Tensor) else None
    if type(node) is not Cast:
        return False
    src = node.next[0]
    return isinstance(src, Tensor) and id(src._version) in param_keys
