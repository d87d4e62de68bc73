"""embedding_bag: the sum, mean or max of each bag of embedding rows, without the rows' tensor.

Composite: the looked-up rows (embedding, so max_norm and the gradient are its own) are
reduced into their bags by index_add (sum, mean) or scatter_reduce's amax (max); the bag of
each position comes from offsets, and positions equal to padding_idx join no bag.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..registry import public
from .embedding import embedding

_MODES = ("sum", "mean", "max")


def _bags(op: str, input: Tensor, offsets: Tensor | None, include_last_offset: bool) -> tuple:
    """(flat input, bag index of each position, number of bags)."""
    operands = [("input", describe(input))]
    if input.ndim == 2:
        if offsets is not None:
            raise ShapeError(f"{op}: offsets must be None for a 2-D input (each row is a bag)",
                             op=op, operands=operands)
        B, L = input.shape
        from ...factories import arange

        bag = arange(B, dtype=_dt.int64, device=input.device).repeat_interleave(L)
        return input.reshape(-1), bag, B
    if input.ndim != 1:
        raise ShapeError(f"{op}: input must be 1-D (with offsets) or 2-D [bags, length], got "
                         f"{format_shape(input.shape)}", op=op, operands=operands)
    if offsets is None or offsets.ndim != 1:
        raise ShapeError(f"{op}: a 1-D input needs 1-D offsets (the start of each bag)", op=op,
                         operands=operands + ([("offsets", describe(offsets))]
                                              if offsets is not None else []))
    if not offsets.dtype.is_integer or offsets.dtype.is_bool:
        raise DTypeError(f"{op}: offsets must be an integer tensor, got {offsets.dtype}", op=op)
    n, B = input.shape[0], offsets.shape[0] - (1 if include_last_offset else 0)
    if B < 0:
        raise ShapeError(f"{op}: include_last_offset needs at least one offset", op=op)
    data = offsets._data
    if data is None or input._data is None:
        from ...factories import empty

        return input, empty(n, dtype=_dt.int64, device=input.device), B
    xp = input.device.xp
    starts = data.astype(_dt.int64.np)
    if starts.size and (int(starts[0]) != 0 or bool(xp.any(starts[1:] < starts[:-1]))
                        or int(starts[-1]) > n):
        raise ShapeError(f"{op}: offsets must start at 0, not decrease, and stay within the "
                         f"input's {n} entries, got {starts.tolist()[:8]}", op=op,
                         operands=operands + [("offsets", describe(offsets))])
    # position i belongs to the last bag whose start is <= i (empty bags are skipped)
    bag = xp.searchsorted(starts[:B], xp.arange(n), side="right") - 1
    if B == 0:
        bag = xp.zeros(n, _dt.int64.np)
    return input, Tensor._make(bag.astype(_dt.int64.np), (n,), _dt.int64, input.device), B


@public(sf=False, functional=True)
def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """[bags, dim]: each bag's rows of weight reduced by mode ('sum', 'mean', 'max'); bags
    are input's rows (2-D input) or start at offsets (1-D input). per_sample_weights scales
    each row first (mode 'sum' only); padding_idx's positions are left out of their bag."""
    op = "embedding_bag"
    if mode not in _MODES:
        raise ShapeError(f"{op}: mode must be one of {_MODES}, got {mode!r}", op=op)
    if weight.ndim != 2:
        raise ShapeError(f"{op}: weight must be 2-D [num_embeddings, dim], got "
                         f"{format_shape(weight.shape)}", op=op,
                         operands=[("weight", describe(weight))])
    if not input.dtype.is_integer or input.dtype.is_bool:
        raise DTypeError(f"{op}: input must hold integer indices, got {input.dtype}", op=op)
    if per_sample_weights is not None:
        if mode != "sum":
            raise ShapeError(f"{op}: per_sample_weights is only supported for mode='sum', "
                             f"got mode={mode!r}", op=op)
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ShapeError(f"{op}: per_sample_weights {format_shape(per_sample_weights.shape)}"
                             f" must have the input's shape {format_shape(input.shape)}", op=op)
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ShapeError(f"{op}: padding_idx {padding_idx} is out of range for "
                             f"num_embeddings={num}", op=op)
        padding_idx %= num
    flat, bag, B = _bags(op, input, offsets, include_last_offset)
    rows = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1).to(rows.dtype)
    keep = None
    if padding_idx is not None:  # a padded position adds nothing and is not counted
        keep = (flat != padding_idx).to(rows.dtype)
        rows = rows * keep.unsqueeze(1)
    D = weight.shape[1]
    base = rows.new_zeros((B, D))
    if mode == "max":
        # positions left out go to no bag: a scratch row past the last, dropped after
        target = bag
        if keep is not None:
            from ..elementwise import where

            target = where(keep > 0, bag, B)
            base = rows.new_zeros((B + 1, D))
        index = target.unsqueeze(1).expand(target.shape[0], D)
        out = base.scatter_reduce(0, index, rows, "amax", include_self=False)
        return out[:B] if keep is not None else out
    out = base.index_add(0, bag, rows)
    if mode == "mean":
        ones = keep if keep is not None else rows.new_ones((flat.shape[0],))
        count = ones.new_zeros((B,)).index_add(0, bag, ones)
        out = out / count.clamp(min=1).unsqueeze(1)
    return out
