"""Paged KV blocks stored int8 or fp8, with one float32 scale per token and head.

The same format as the eager cache (models/kv_quant.py) and `sf.quant.quantize_tensor` per
row: each token's key (and value) of each head is quantized on its own, so writing a new token
never changes what earlier tokens stored. A block of one layer's keys is `data` `[num_blocks,
n_head, block_size, head_dim]` (1 byte) plus `scale` `[num_blocks, n_head, block_size]`
float32: head_dim + 4 bytes per token and head, as `sf.memory.kv_cache_bytes` counts.
Attention dequantizes inside the C kernel (int8 directly, fp8 by moving its bits);
the NumPy fallback dequantizes the blocks a batch uses.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from ..errors import DTypeError, ShapeError
from . import paged_attention as pa

__all__ = ["KV_DTYPES", "QuantizedBlocks", "QuantizedRows", "paged_attention", "write_kv"]

KV_DTYPES = ("int8", "fp8-e4m3", "fp8-e5m2")
_STORAGE = {"int8": np.dtype(np.int8), "fp8-e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
            "fp8-e5m2": np.dtype(ml_dtypes.float8_e5m2)}
_KIND = {"int8": 0, "fp8-e4m3": 1, "fp8-e5m2": 2}  # the C kernel's decoder of each


class QuantizedRows(NamedTuple):
    """A slice of quantized blocks: the 1-byte data and the matching float32 scales."""

    data: np.ndarray
    scale: np.ndarray


class QuantizedBlocks:
    """One layer's keys (or values) in blocks: `data` 1-byte, `scale` float32 per row.

    Indexing over the first three dims (block, head, row) gives a `QuantizedRows`, and
    assigning one copies data and scales together (the pool copies partly shared blocks so).
    """

    def __init__(self, shape: tuple[int, int, int, int], kv_dtype: str) -> None:
        if kv_dtype not in KV_DTYPES:
            raise DTypeError(f"serve: kv_dtype {kv_dtype!r} is not a quantized KV format",
                             op="serve", hint=f"use None (float) or one of {', '.join(KV_DTYPES)}")
        if len(shape) != 4:
            raise ShapeError(f"QuantizedBlocks: shape must be [num_blocks, n_head, block_size, "
                             f"head_dim], got {tuple(shape)}", op="serve")
        self.kv_dtype = kv_dtype
        # np.zeros maps pages lazily: an unused block costs no memory
        self.data = np.zeros(tuple(shape), _STORAGE[kv_dtype])
        self.scale = np.zeros(tuple(shape[:3]), np.float32)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.data.shape

    @property
    def nbytes(self) -> int:
        """Bytes allocated: data and scales."""
        return int(self.data.nbytes + self.scale.nbytes)

    def __getitem__(self, index) -> QuantizedRows:
        return QuantizedRows(self.data[index], self.scale[index])

    def __setitem__(self, index, rows: QuantizedRows) -> None:
        self.data[index], self.scale[index] = rows.data, rows.scale

    def dequantize(self, blocks: np.ndarray | None = None) -> np.ndarray:
        """float32 `[len(blocks), n_head, block_size, head_dim]` (all blocks when None)."""
        data = self.data if blocks is None else self.data[blocks]
        scale = self.scale if blocks is None else self.scale[blocks]
        return data.astype(np.float32) * scale[..., None]

    def __repr__(self) -> str:
        return f"QuantizedBlocks({list(self.shape)}, {self.kv_dtype}, {self.nbytes} bytes)"


_LEVELS = {"int8": 127.0, "fp8-e4m3": 448.0, "fp8-e5m2": 57344.0}  # quantize_tensor's


def quantize_rows(x: np.ndarray, kv_dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """x `[N, n_head, head_dim]` -> (data of the same shape, 1 byte; scales `[N, n_head]`).

    `sf.quant.quantize_tensor(rows, kv_dtype, axis=0)`'s arithmetic step for step (float64,
    round half to even, clamp), so the bytes are the eager cache's; its argument checks cost
    more than the work at one decode token, so they run only for a row that is not finite
    (quantize_tensor then raises its error).
    """
    n, h, d = x.shape
    x64 = x.reshape(n * h, d).astype(np.float64)
    amax = np.abs(x64).max(axis=1) if d else np.zeros(n * h)
    if not np.isfinite(amax).all():
        from ..quant import quantize_tensor

        quantize_tensor(x64, kv_dtype, axis=0, name="kv cache")  # raises the error
    scale = (amax / _LEVELS[kv_dtype]).astype(np.float32)
    scale[scale == 0] = 1.0  # an all-zero row (or one under float32's range): stored exactly
    v = x64 / scale.astype(np.float64)[:, None]
    if kv_dtype == "int8":
        q = np.clip(np.rint(v), -127.0, 127.0).astype(np.int8)
    else:
        lim = _LEVELS[kv_dtype]
        q = np.clip(v, -lim, lim).astype(_STORAGE[kv_dtype])
    return q.reshape(n, h, d), scale.reshape(n, h)


def write_kv(k_cache: QuantizedBlocks, v_cache: QuantizedBlocks, k: np.ndarray, v: np.ndarray,
             slots: np.ndarray) -> None:
    """Quantize k, v `[N, n_head, head_dim]` per token and head; write them and their scales
    into the rows named by `slots` (int64 `[N]`)."""
    if k_cache.shape != v_cache.shape or k_cache.kv_dtype != v_cache.kv_dtype:
        raise ShapeError(f"write_kv: key and value blocks differ: {k_cache!r}, {v_cache!r}",
                         op="write_kv")
    if k.ndim != 3 or v.shape != k.shape:
        raise ShapeError(f"write_kv: k and v must be [N, n_head, head_dim], got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}", op="write_kv")
    n = k.shape[0]
    data, scale = quantize_rows(np.concatenate([k, v]), k_cache.kv_dtype)  # one pass for both
    kq, vq, ks, vs = data[:n], data[n:], scale[:n], scale[n:]
    # the scales are rows of one element: [num_blocks, n_head, block_size, 1]
    pa.write_kv(k_cache.scale[..., None], v_cache.scale[..., None], ks[..., None],
                vs[..., None], slots)
    pa.write_kv(k_cache.data, v_cache.data, kq, vq, slots)


def _reference(q, k_cache, v_cache, block_tables, context_lens, query_lens, scale):
    """Dequantize the blocks the batch uses into a compact float pool; attend there."""
    bt, cl, ql = pa._check_attention(q, k_cache.data, v_cache.data, block_tables, context_lens,
                                     query_lens)
    used = np.arange(bt.shape[1])[None, :] * k_cache.shape[2] < cl[:, None]
    ids = np.unique(bt[used])
    if ids.size == 0:
        ids = np.zeros(1, np.int64)  # nothing to read: any one block keeps the shapes
    compact = np.where(used, np.searchsorted(ids, bt), 0)
    return pa.paged_attention_reference(q, k_cache.dequantize(ids), v_cache.dequantize(ids),
                                        compact, cl, ql, scale)


def paged_attention(q: np.ndarray, k_cache: QuantizedBlocks, v_cache: QuantizedBlocks,
                    block_tables: np.ndarray, context_lens: np.ndarray, query_lens: np.ndarray,
                    scale: float) -> np.ndarray:
    """`paged_attention` over quantized blocks: each key and value row dequantized (times
    its scale) as it is read; `[N, n_head, head_dim]` in q's dtype."""
    lib = pa._lib()
    if lib is None or q.dtype != np.float32 or not q.flags.c_contiguous or q.ndim != 3 \
            or q.shape[1:] != (k_cache.shape[1], k_cache.shape[3]) \
            or k_cache.shape != v_cache.shape or k_cache.kv_dtype != v_cache.kv_dtype:
        return _reference(q, k_cache, v_cache, block_tables, context_lens, query_lens, scale)
    bt, cl, ql = pa._int32(block_tables), pa._int32(context_lens), pa._int32(query_lens)
    if bt is None or cl is None or ql is None or bt.ndim != 2 or cl.shape != (bt.shape[0],) \
            or ql.shape != cl.shape:
        return _reference(q, k_cache, v_cache, block_tables, context_lens, query_lens, scale)
    nb, h, bs, d = k_cache.shape
    out = np.empty(q.shape, np.float32)
    a = pa.address
    if lib.paged_attention_q8(a(q), a(k_cache.data), a(k_cache.scale), a(v_cache.data),
                              a(v_cache.scale), _KIND[k_cache.kv_dtype], a(bt), a(cl), a(ql),
                              bt.shape[0], bt.shape[1], q.shape[0], nb, h, bs, d, scale, a(out)):
        # an invalid batch: the reference raises the error that says why
        return _reference(q, k_cache, v_cache, block_tables, context_lens, query_lens, scale)
    return out
