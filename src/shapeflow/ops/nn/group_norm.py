"""group_norm, instance_norm and normalize, written over the fused norms.

group_norm is layer_norm over [N, G, C/G * spatial] (its saved set: the input and [N, G]
mean and rstd, counted as normalization statistics), then a per-channel affine.
instance_norm is one fused primitive (instance_norm.py); with running estimates it is
batch_norm over [1, N*C, spatial], as PyTorch computes it.
"""

from __future__ import annotations

import math

from ...errors import ShapeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from .batch_norm import batch_norm
from .instance_norm import instance_norm_fused
from .norm import layer_norm


def _affine(out: Tensor, weight, bias, ndim: int) -> Tensor:
    shape = (1, -1) + (1,) * (ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize each of num_groups channel groups of [N, C, *spatial] per sample."""
    op = "group_norm"
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must be [N, C, *spatial], got "
                         f"{format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    N, C = input.shape[0], input.shape[1]
    if type(C) is int and C % num_groups:
        raise ShapeError(f"{op}: {C} channels (dim 1 of {format_shape(input.shape)}) are not "
                         f"divisible by num_groups {num_groups}", op=op,
                         operands=[("input", describe(input))],
                         hint="pick num_groups that divides the channel count")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or not dims_equal(t.shape[0], C)):
            raise ShapeError(f"{op}: {name} {format_shape(t.shape)} must be [C] with C = {C}",
                             op=op, operands=[("input", describe(input)), (name, describe(t))])
    per_group = C // num_groups * math.prod(input.shape[2:]) if input.ndim > 2 else \
        C // num_groups
    if all(type(d) is int for d in input.shape) and N * per_group == 1:
        # PyTorch's check (ValueError): each group's one value would normalize to 0
        raise ShapeError(f"{op}: expected more than 1 value per group, got input "
                         f"{format_shape(input.shape)} with num_groups {num_groups}", op=op,
                         operands=[("input", describe(input))],
                         hint="use fewer groups, or a larger batch or spatial size")
    x = input.reshape(N, num_groups, per_group)
    out = layer_norm(x, (per_group,), None, None, eps).reshape(input.shape)
    return _affine(out, weight, bias, input.ndim)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each (sample, channel) plane of [N, C, *spatial] over its spatial dims."""
    op = "instance_norm"
    if input.ndim < 3:
        raise ShapeError(f"{op}: input must be [N, C, *spatial] with at least one spatial dim, "
                         f"got {format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: running_mean and running_var are needed when "
                             "use_input_stats=False")
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is None and running_var is None:  # the usual case: one fused op
        return instance_norm_fused(input, weight, bias, eps)
    N, C = input.shape[0], input.shape[1]
    x = input.reshape(1, N * C, *input.shape[2:])
    rm = rv = None
    if running_mean is not None and running_var is not None:  # one copy per sample
        rm, rv = running_mean.repeat(N), running_var.repeat(N)
    out = batch_norm(x, rm, rv, None, None, True, momentum, eps).reshape(input.shape)
    if rm is not None:  # the running stats: the mean over the batch of the updated copies
        from ...autograd.grad_mode import no_grad

        with no_grad():
            for buf, upd in ((running_mean, rm), (running_var, rv)):
                if buf._data is not None:
                    buf._data[...] = upd._data.reshape(N, C).mean(0)
                buf._version[0] += 1
    return _affine(out, weight, bias, input.ndim)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """input / max(||input||_p over dim, eps) (PyTorch's F.normalize)."""
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)
