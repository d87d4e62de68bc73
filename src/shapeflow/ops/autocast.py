"""What autocast does to the inputs of the ops on PyTorch's CPU lists (torch 2.13).

`lower`: matrix products, linear, convolutions, attention, prelu run in the region's dtype;
a float32 leaf that requires grad (a weight) is cast once per region and the copy reused.
`fp32`: losses, prod, cdist, trace run in float32. `promote`: cat, stack, index_copy take
the widest float dtype of their inputs. Each listed function calls these only when
`autocast_state.hot.on` (one attribute read); float64 tensors are never cast, as in PyTorch.
"""

from __future__ import annotations

from ..autograd.autocast_state import state
from ..dtypes import float32, float64, promote_types
from ..tensor import Tensor
from .elementwise.casts import cast

# the op names each policy covers (tests and docs read them)
LOWER_PRECISION = ("matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "linear", "conv1d",
                   "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                   "scaled_dot_product_attention", "prelu", "einsum", "tensordot")
FP32 = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
        "margin_ranking_loss", "soft_margin_loss", "cosine_embedding_loss", "poisson_nll_loss",
        "prod", "cdist", "trace")
PROMOTE = ("cat", "stack", "index_copy")


def _eligible(t) -> bool:
    return isinstance(t, Tensor) and t.dtype.is_floating_point and t.dtype is not float64


def _cached_cast(t: Tensor, dtype, st) -> Tensor:
    """t in `dtype`; a float32 weight's copy is made once per region (PyTorch's cache)."""
    if (st.cache_enabled and t.dtype is float32 and t.requires_grad and t.grad_fn is None
            and getattr(t, "_base", None) is None):
        hit = st.cache.get(id(t))
        if hit is not None and hit[0] is t:  # the entry keeps t alive: its id is not reused
            return hit[1]
        out = cast(t, dtype)
        st.cache[id(t)] = (t, out)
        return out
    return cast(t, dtype)


def lower(*tensors):
    """The tensors in this thread's autocast dtype (unchanged outside an enabled region)."""
    st = state
    if not st.enabled:
        return tensors
    dtype = st.dtype
    return tuple(_cached_cast(t, dtype, st) if _eligible(t) and t.dtype is not dtype else t
                 for t in tensors)


def params_like(x: Tensor, *params):
    """A norm's weight and bias in the dtype of its low-precision input inside a region.

    PyTorch's norms take a bfloat16 input with float32 parameters and return bfloat16;
    shapeflow's norm ops want one dtype, so the parameters are cast (once per region).
    """
    st = state
    if not st.enabled or x.dtype is not st.dtype:
        return params
    return lower(*params)


def fp32(*tensors):
    """The tensors in float32 inside an enabled region (unchanged outside)."""
    if not state.enabled:
        return tensors
    return tuple(cast(t, float32) if _eligible(t) and t.dtype is not float32 else t
                 for t in tensors)


def promote(tensors) -> list:
    """A list of tensors cast to their widest float dtype inside an enabled region."""
    tensors = list(tensors)
    if not state.enabled:
        return tensors
    floats = [t.dtype for t in tensors if isinstance(t, Tensor) and t.dtype.is_floating_point]
    if len(set(floats)) < 2:
        return tensors
    wide = floats[0]
    for d in floats[1:]:
        wide = promote_types(wide, d)
    return [cast(t, wide) if isinstance(t, Tensor) and t.dtype.is_floating_point
            and t.dtype is not wide else t for t in tensors]
