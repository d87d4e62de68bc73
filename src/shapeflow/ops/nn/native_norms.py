"""torch's top-level native_batch_norm / native_layer_norm / native_group_norm: a norm's
output together with the statistics it normalized by (mean and 1 / sqrt(var + eps)).

The output is the ordinary norm's (its kernels and gradient); the statistics are computed
beside it. As in PyTorch, layer and batch norm's statistics carry no gradient and group
norm's do.
"""

from __future__ import annotations

from ...errors import ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..registry import public

# ops/norm imports ops/nn at module level: the norms are imported where they are called


def _stats(x: Tensor, dims: tuple, eps: float, keepdim: bool) -> tuple:
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=keepdim)
    rstd = (var + eps).rsqrt()
    return (mean if keepdim else mean.squeeze(dims)), rstd


@public()
def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple:
    """(layer_norm's output, mean, rstd); the stats have shape input.shape[:axis] + (1,) *
    len(normalized_shape), axis the first normalized dim."""
    from ..norm.layer_norm import layer_norm

    shape = tuple(normalized_shape)
    out = layer_norm(input, shape, weight, bias, eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    mean, rstd = _stats(input.detach(), dims, eps, True)
    return out, mean, rstd


@public()
def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int,
                      C: int, HxW: int, group: int, eps: float) -> tuple:
    """(group_norm's output, mean [N, group], rstd [N, group]); N, C, HxW must describe
    input."""
    from ..norm.group_norm import group_norm

    op = "native_group_norm"
    n = 1
    for s in input.shape[2:]:
        n *= s
    if input.ndim < 2 or (input.shape[0], input.shape[1], n) != (N, C, HxW):
        raise ShapeError(f"{op}: input {format_shape(input.shape)} is not N={N}, C={C}, "
                         f"HxW={HxW}", op=op, operands=[("input", describe(input))])
    if group < 1 or C % group:
        raise ShapeError(f"{op}: C={C} is not divisible by group={group}", op=op)
    out = group_norm(input, group, weight, bias, eps)
    mean, rstd = _stats(input.reshape(N, group, -1), (2,), eps, False)
    return out, mean, rstd


@public()
def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                      running_mean: Tensor | None, running_var: Tensor | None, training: bool,
                      momentum: float, eps: float) -> tuple:
    """(batch_norm's output, save_mean [C], save_invstd [C]); training updates the running
    stats, and outside training both saved stats are empty, as PyTorch's."""
    from ..norm.batch_norm import batch_norm

    out = batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        empty = input.new_zeros((0,)).detach()
        return out, empty, empty.clone()
    dims = (0,) + tuple(range(2, input.ndim))
    mean, rstd = _stats(input.detach(), dims, eps, False)
    return out, mean, rstd
