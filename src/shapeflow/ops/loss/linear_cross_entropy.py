"""linear_cross_entropy: cross_entropy(linear(input, linear_weight, linear_bias), target), and
its chunked form (LinearCrossEntropyOptions), which computes the logits a block of rows at a
time. (PyTorch's chunked path also recomputes them in backward; here each block's logits are
kept for backward as usual: wrap the call in shapeflow.utils.checkpoint for that saving.)"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ShapeError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..movement import cat
from ..nn.linear import linear
from ..registry import public
from ._common import _reduction
from .cross_entropy import cross_entropy


@dataclass
class LinearCrossEntropyOptions:
    """How linear_cross_entropy chunks: batch_chunk_size rows at a time (None: one chunk).

    The other fields are PyTorch's tuning knobs; shapeflow accepts them and computes in the
    input's dtype.
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None


def _fail(msg: str, **named) -> ShapeRuntimeError:
    op = "linear_cross_entropy"
    return ShapeRuntimeError(f"{op}: {msg}", op=op,
                             operands=[(k, describe(v)) for k, v in named.items()])


def _chunk_loss(x: Tensor, w: Tensor, t: Tensor, b, weight, ignore_index: int) -> Tensor:
    return cross_entropy(linear(x, w, b), t, weight, ignore_index=ignore_index,
                         reduction="none")


def _chunked(input: Tensor, linear_weight: Tensor, target: Tensor, linear_bias, weight,
             reduction: str, ignore_index: int, rows: int | None) -> Tensor:
    """Per-row losses a block of rows at a time, then reduced as cross_entropy reduces them
    ('mean': by the summed class weights of the rows kept)."""
    n = input.shape[0]
    rows = n if not rows else max(1, int(rows))
    parts = [_chunk_loss(input[i:i + rows], linear_weight, target[i:i + rows], linear_bias,
                         weight, ignore_index) for i in range(0, n, rows)]
    losses = cat(parts) if len(parts) > 1 else parts[0]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    kept = target != ignore_index
    if weight is None:
        total = kept.sum().to(losses.dtype)
    else:
        total = (weight.gather(0, target.clamp(min=0)) * kept).sum()
    return losses.sum() / total


@public(sf=False, functional=True)
def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Tensor | None = None, weight: Tensor | None = None,
                         reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...); linear_weight
    [C, d1..., in_features] gives K-dimensional logits [N, C, d1...]. With options (a
    LinearCrossEntropyOptions), rows are processed batch_chunk_size at a time."""
    reduction = _reduction("linear_cross_entropy", None, None, reduction)
    named = {"input": input, "linear_weight": linear_weight, "target": target}
    if input.ndim not in (1, 2):
        raise _fail(f"input must be 1-D or 2-D, got {format_shape(input.shape)}", **named)
    if linear_weight.ndim < 2:
        raise _fail(f"linear_weight must have at least 2 dims, got "
                    f"{format_shape(linear_weight.shape)}", **named)
    if input.shape[-1] != linear_weight.shape[-1]:
        raise _fail(f"input's last dim {input.shape[-1]} (in_features) is not "
                    f"linear_weight's {linear_weight.shape[-1]}", **named)
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise _fail(f"linear_bias must be {format_shape((classes, *out_features))}, got "
                    f"{format_shape(linear_bias.shape)}", linear_bias=linear_bias, **named)
    if out_features and input.ndim == 1:
        raise _fail("a K-dimensional linear_weight needs batched input [N, in_features]",
                    **named)
    logits_shape = (*tuple(input.shape[:-1]), classes, *out_features)
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise ShapeError("linear_cross_entropy: ignore_index cannot be given when target holds "
                         "probabilities", op="linear_cross_entropy")
    ignore_index = -100 if ignore_index is None else ignore_index

    if (options is not None and not out_features and label_smoothing == 0.0
            and not probabilities and target.dtype.is_integer):
        x, t = (input, target) if input.ndim == 2 else (input.unsqueeze(0), target.unsqueeze(0))
        out = _chunked(x, linear_weight, t, linear_bias, weight, reduction, ignore_index,
                       getattr(options, "batch_chunk_size", None))
        return out.squeeze(0) if input.ndim == 1 and reduction == "none" else out

    in_features = input.shape[-1]
    if out_features:  # one linear over C * d1 * ... outputs, then the logits' own shape
        width = math.prod(out_features, start=classes)
        linear_weight = linear_weight.reshape(width, in_features)
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(width)
    logits = linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return cross_entropy(logits, target, weight, ignore_index=ignore_index, reduction=reduction,
                         label_smoothing=label_smoothing)
