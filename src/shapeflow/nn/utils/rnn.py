"""Variable-length sequences (as `torch.nn.utils.rnn`): PackedSequence, packing and padding.

A PackedSequence holds the steps of a batch sorted by decreasing length, step after step:
`data` [N, *] with N the sum of the lengths, and `batch_sizes[t]` sequences alive at step t.
The recurrent layers run on it directly (step t works on its first batch_sizes[t] rows).
Packing and padding are gathers (`index_select`), so gradients flow through both.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...errors import ShapeError
from ...factories import full
from ...ops.index.dim_index import index_select
from ...ops.movement import cat, stack
from ...tensor import Tensor, describe, tensor


class PackedSequence(NamedTuple):
    """data [N, *], batch_sizes [L] (int64, cpu), sorted_indices and unsorted_indices [B]
    (None when the batch came sorted): PyTorch's fields, in its order."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args, **kwargs) -> PackedSequence:
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def _lengths(lengths) -> list[int]:
    if isinstance(lengths, Tensor):
        return [int(v) for v in np.asarray(lengths.numpy()).reshape(-1)]
    return [int(v) for v in lengths]


def _invert(perm: np.ndarray) -> np.ndarray:
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    return inv


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch [L, B, *] ([B, L, *] with batch_first) of the given lengths."""
    lens = _lengths(lengths)
    b_dim = 0 if batch_first else 1
    if input.ndim < 2 or len(lens) != input.shape[b_dim]:
        raise ShapeError(f"pack_padded_sequence: expected {len(lens)} sequences along dim "
                         f"{b_dim} of input, got {describe(input)}", op="pack_padded_sequence",
                         hint="batch_first=True means input is [B, L, *]")
    if any(n <= 0 for n in lens):
        raise ShapeError("pack_padded_sequence: Length of all samples has to be greater than "
                         "0, but found an element in 'lengths' that is <= 0",
                         op="pack_padded_sequence")
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise ShapeError("pack_padded_sequence: `lengths` array must be sorted in "
                             "decreasing order when `enforce_sorted` is True",
                             op="pack_padded_sequence",
                             hint="pass enforce_sorted=False to have the batch sorted here")
        order, sorted_idx, unsorted_idx = np.arange(len(lens)), None, None
    else:
        order = np.argsort(-np.asarray(lens), kind="stable")
        sorted_idx = tensor(order, device=input.device)  # on the input's device, as torch's
        unsorted_idx = tensor(_invert(order), device=input.device)
    steps = input.shape[1 - b_dim]
    lens_sorted = [lens[i] for i in order]
    if lens_sorted[0] > steps:
        raise ShapeError(f"pack_padded_sequence: a length ({lens_sorted[0]}) exceeds the "
                         f"padded length {steps}", op="pack_padded_sequence",
                         operands=[("input", describe(input))])
    batch = len(lens)
    sizes = [sum(1 for n in lens_sorted if n > t) for t in range(lens_sorted[0])]
    # row of step t, sequence order[j] in the padded batch seen as [L * B, *] or [B * L, *]
    if batch_first:
        rows = [int(order[j]) * steps + t for t, bs in enumerate(sizes) for j in range(bs)]
    else:
        rows = [t * batch + int(order[j]) for t, bs in enumerate(sizes) for j in range(bs)]
    flat = input.reshape(batch * steps, *input.shape[2:])
    data = index_select(flat, 0, tensor(rows, device=input.device))
    return PackedSequence(data, tensor(sizes), sorted_idx, unsorted_idx)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """(padded [T, B, *] or [B, T, *], lengths): the inverse of pack_padded_sequence."""
    data, sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    steps, batch = len(sizes), sizes[0]
    if total_length is not None:
        if total_length < steps:
            raise ShapeError(f"pad_packed_sequence: Expected total_length to be at least "
                             f"{steps}, got {total_length}", op="pad_packed_sequence")
        steps = total_length
    n = int(data.shape[0])
    # every padded slot reads a row of data, or the extra padding row n
    slots = np.full((steps, batch), n, np.int64)
    offset = 0
    for t, bs in enumerate(sizes):
        slots[t, :bs] = np.arange(offset, offset + bs)
        offset += bs
    lengths = np.array([sum(1 for b in sizes if b > j) for j in range(batch)], np.int64)
    if sequence.unsorted_indices is not None:
        perm = np.asarray(sequence.unsorted_indices.numpy())
        slots, lengths = slots[:, perm], lengths[perm]
    if batch_first:
        slots = slots.T
    pad_row = full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = index_select(cat([data, pad_row], 0), 0,
                          tensor(slots.reshape(-1), device=data.device))
    return padded.reshape(*slots.shape, *data.shape[1:]), tensor(lengths)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences [L_i, *] into [L_max, B, *] ([B, L_max, *] with batch_first)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side should be either 'right' or 'left', but got "
                         f"{padding_side}")
    sequences = list(sequences)
    longest = max(int(s.shape[0]) for s in sequences)
    rows = []
    for s in sequences:
        extra = longest - int(s.shape[0])
        if extra:
            fill = full((extra, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The sequences of a padded batch, each cut to its length."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i].narrow(0, 0, n) for i, n in enumerate(_lengths(lengths))]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences [L_i, *] (sorted by decreasing length unless told not)."""
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences a PackedSequence holds, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]
