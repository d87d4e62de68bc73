"""Attention over a paged KV cache: keys and values live in fixed-size blocks of a pool.

Layout per layer: `k_cache`, `v_cache` `[num_blocks, n_head, block_size, head_dim]`; token t of
a sequence sits in block `block_table[t // block_size]` at offset `t % block_size`, and a slot is
`block_id * block_size + offset`. `write_kv` writes the new tokens' rows (O(new tokens) bytes);
`paged_attention` attends the new queries of a ragged batch to their sequences' cached keys,
causally. The C kernel (backend/cpu/paged_attention.c) reads the blocks in place with an online
softmax; the NumPy reference here gathers each sequence's blocks and is the fallback.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from ..backend.cpu import native
from ..backend.cpu.kernels import address
from ..errors import ArgumentError, ShapeError

__all__ = ["available", "paged_attention", "paged_attention_reference", "set_enabled",
           "write_kv", "write_kv_reference"]

_P, _N = ctypes.c_void_p, ctypes.c_ssize_t
_SIGNATURES = {
    "paged_attention_f32": [_P] * 6 + [_N] * 7 + [ctypes.c_float, _P],
    "paged_attention_q8": [_P] * 5 + [_N] + [_P] * 3 + [_N] * 7 + [ctypes.c_float, _P],
    "paged_write_kv": [_P] * 4 + [_N, _P] + [_N] * 5,
}
_state: dict = {"lib": None, "loaded": False, "enabled": True, "refused": None}
_SOURCE_FILE = os.path.join(os.path.dirname(__file__), os.pardir, "backend", "cpu",
                            "paged_attention.c")
_F32 = np.dtype(np.float32)


def _load():
    """backend/_paged_attention where it was built from the paged_attention.c beside it, for
    this CPU, and SHAPEFLOW_KERNELS is not "0"; else None (NumPy)."""
    _state["loaded"] = True
    _state["lib"] = native.load("_paged_attention", _SOURCE_FILE, "paged", _SIGNATURES, _state,
                                restype=ctypes.c_int)
    return _state["lib"]


def _lib():
    if not _state["enabled"]:
        return None
    return _state["lib"] if _state["loaded"] else _load()


def available() -> bool:
    """Whether the compiled paged-attention kernel is in use."""
    return _lib() is not None


def set_enabled(flag: bool) -> bool:
    """Turn the compiled kernel on or off (tests compare both paths); returns the old flag."""
    old = _state["enabled"]
    _state["enabled"] = bool(flag)
    return old


def _check_cache(k_cache: np.ndarray, v_cache: np.ndarray) -> None:
    if k_cache.ndim != 4 or k_cache.shape != v_cache.shape:
        raise ShapeError(
            f"k_cache and v_cache must both be [num_blocks, n_head, block_size, head_dim], got "
            f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}", op="paged_attention")


def _check_write(k_cache, v_cache, k, v, slots) -> np.ndarray:
    _check_cache(k_cache, v_cache)
    nb, h, bs, d = k_cache.shape
    slots = np.asarray(slots)
    if slots.ndim != 1 or slots.dtype.kind not in "iu":
        raise ArgumentError(f"slots must be a 1-D integer array, got {slots.dtype} "
                            f"{tuple(slots.shape)}", op="write_kv")
    n = slots.shape[0]
    if k.shape != (n, h, d) or v.shape != (n, h, d):
        raise ShapeError(f"k and v must be [N, n_head, head_dim] = {(n, h, d)} for {n} slots, got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}", op="write_kv")
    if n and (int(slots.min()) < 0 or int(slots.max()) >= nb * bs):
        raise ArgumentError(f"slots must lie in [0, {nb * bs}) (num_blocks * block_size), got "
                            f"{int(slots.min())}..{int(slots.max())}", op="write_kv")
    return slots


def write_kv_reference(k_cache: np.ndarray, v_cache: np.ndarray, k: np.ndarray, v: np.ndarray,
                       slots: np.ndarray) -> None:
    """Write k, v `[N, n_head, head_dim]` into the rows named by `slots` (NumPy)."""
    slots = _check_write(k_cache, v_cache, k, v, slots)
    bs = k_cache.shape[2]
    blocks, offs = np.divmod(slots, bs)
    # the two advanced indices around a slice put N first: [N, n_head, head_dim], as k is
    k_cache[blocks, :, offs, :] = k
    v_cache[blocks, :, offs, :] = v


def _check_attention(q, k_cache, v_cache, block_tables, context_lens, query_lens):
    _check_cache(k_cache, v_cache)
    nb, h, bs, d = k_cache.shape
    if q.ndim != 3 or q.shape[1:] != (h, d):
        raise ShapeError(f"q must be [N, n_head, head_dim] with n_head={h}, head_dim={d}, got "
                         f"{tuple(q.shape)}", op="paged_attention")
    bt = np.asarray(block_tables)
    cl = np.asarray(context_lens).reshape(-1)
    ql = np.asarray(query_lens).reshape(-1)
    if any(a.dtype.kind not in "iu" for a in (bt, cl, ql)):
        raise ArgumentError(f"block_tables, context_lens and query_lens must be integers, got "
                            f"{bt.dtype}, {cl.dtype}, {ql.dtype}", op="paged_attention")
    s = cl.shape[0]
    if bt.ndim != 2 or bt.shape[0] != s or ql.shape[0] != s:
        raise ShapeError(f"block_tables [S, max_blocks], context_lens [S] and query_lens [S] must "
                         f"agree on S, got {tuple(bt.shape)}, {tuple(cl.shape)}, {tuple(ql.shape)}",
                         op="paged_attention")
    if s:
        if int(ql.sum()) != q.shape[0]:
            raise ShapeError(f"query_lens sum to {int(ql.sum())} but q holds {q.shape[0]} tokens",
                             op="paged_attention")
        if (ql < 0).any() or (cl < ql).any() or (cl > bt.shape[1] * bs).any():
            raise ArgumentError("need 0 <= query_lens <= context_lens <= max_blocks * block_size",
                                op="paged_attention")
        used = np.arange(bt.shape[1])[None, :] * bs < cl[:, None]  # blocks that hold tokens
        if used.any() and (int(bt[used].min()) < 0 or int(bt[used].max()) >= nb):
            raise ArgumentError(f"block_tables name blocks outside [0, {nb})", op="paged_attention")
    elif q.shape[0] != 0:
        raise ShapeError("q holds tokens but there are no sequences", op="paged_attention")
    return bt.astype(np.int64, copy=False), cl.astype(np.int64), ql.astype(np.int64)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def paged_attention_reference(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                              block_tables: np.ndarray, context_lens: np.ndarray,
                              query_lens: np.ndarray, scale: float) -> np.ndarray:
    """Causal attention of S sequences' new queries to their paged keys/values (NumPy).

    q `[N, n_head, head_dim]` holds the sequences back to back (query_lens `[S]`); new token i of
    a sequence with context c and q-len n sits at c - n + i and sees keys 0..c-n+i.
    """
    bt, cl, ql = _check_attention(q, k_cache, v_cache, block_tables, context_lens, query_lens)
    bs = k_cache.shape[2]
    ct = _compute_dtype(q.dtype)
    out = np.empty(q.shape, ct)
    start = 0
    for s in range(cl.shape[0]):
        n, c = int(ql[s]), int(cl[s])
        if n == 0:
            continue
        blocks = bt[s, : -(-c // bs)]
        # [nblk, H, bs, D] -> [H, nblk*bs, D] -> the first c tokens
        kk = k_cache[blocks].transpose(1, 0, 2, 3).reshape(k_cache.shape[1], -1, k_cache.shape[3])
        vv = v_cache[blocks].transpose(1, 0, 2, 3).reshape(kk.shape)
        kk, vv = kk[:, :c].astype(ct, copy=False), vv[:, :c].astype(ct, copy=False)
        qs = q[start:start + n].astype(ct, copy=False).transpose(1, 0, 2)  # [H, n, D]
        scores = (qs @ kk.transpose(0, 2, 1)) * ct.type(scale)  # [H, n, c]
        pos = c - n + np.arange(n)
        scores[:, np.arange(c)[None, :] > pos[:, None]] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        out[start:start + n] = (scores @ vv).transpose(1, 0, 2)
        start += n
    return out.astype(q.dtype, copy=False)


def write_kv(k_cache: np.ndarray, v_cache: np.ndarray, k: np.ndarray, v: np.ndarray,
             slots: np.ndarray) -> None:
    """Write k, v `[N, n_head, head_dim]` into the cache rows named by `slots` (int64 `[N]`).

    Quantized caches (`kv_quant.QuantizedBlocks`) quantize the rows per token and head first.
    """
    if not isinstance(k_cache, np.ndarray):
        from .kv_quant import write_kv as write_quantized

        return write_quantized(k_cache, v_cache, k, v, slots)
    lib = _lib()
    if lib is None or not _rows_ok(k_cache, v_cache, k, v):
        return write_kv_reference(k_cache, v_cache, k, v, slots)
    if not (isinstance(slots, np.ndarray) and slots.dtype == np.int64
            and slots.flags.c_contiguous):
        slots = np.asarray(slots)
        if slots.dtype.kind not in "iu":
            return write_kv_reference(k_cache, v_cache, k, v, slots)  # it raises the error
        slots = np.ascontiguousarray(slots, np.int64)
    if slots.shape != (k.shape[0],):
        return write_kv_reference(k_cache, v_cache, k, v, slots)  # it raises the error
    nb, h, bs, d = k_cache.shape
    item = k_cache.itemsize
    inner = (d * item, item)  # heads back to back in a token: a view of a fused qkv will do
    if k.dtype != k_cache.dtype or v.dtype != k_cache.dtype or k.strides[1:] != inner \
            or v.strides[1:] != inner or k.strides[0] != v.strides[0] or k.strides[0] <= 0:
        k = np.ascontiguousarray(k, k_cache.dtype)
        v = np.ascontiguousarray(v, k_cache.dtype)
    if lib.paged_write_kv(address(k_cache), address(v_cache), address(k), address(v), k.strides[0],
                          address(slots), slots.shape[0], h, bs, nb, d * item):
        return write_kv_reference(k_cache, v_cache, k, v, slots)  # it raises the error
    return None


def _rows_ok(k_cache, v_cache, k, v) -> bool:
    """Whether the C copy can take these: writable contiguous caches of one dtype, and
    k, v arrays of `[N, n_head, head_dim]` with N > 0."""
    return (isinstance(k, np.ndarray) and isinstance(v, np.ndarray) and k_cache.ndim == 4
            and k_cache.shape == v_cache.shape and k_cache.dtype == v_cache.dtype
            and k.ndim == 3 and k.shape == v.shape and k.shape[0] > 0
            and k.shape[1:] == (k_cache.shape[1], k_cache.shape[3])
            and k_cache.flags.c_contiguous and v_cache.flags.c_contiguous
            and k_cache.flags.writeable and v_cache.flags.writeable)


def _int32(a) -> np.ndarray | None:
    """a as contiguous int32; None where it is not integers or a value would not fit (the
    reference then says what is wrong), so a cast never wraps a bad id into a valid one."""
    a = np.asarray(a)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if a.dtype.kind not in "iu" or (a.size and (a.min() < -2**31 or a.max() >= 2**31)):
        return None
    return np.ascontiguousarray(a, np.int32)


def paged_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                    block_tables: np.ndarray, context_lens: np.ndarray, query_lens: np.ndarray,
                    scale: float) -> np.ndarray:
    """Causal attention over a paged KV cache; `[N, n_head, head_dim]` in q's dtype.

    See the module docstring for the layout; the new tokens must already be in the cache.
    Quantized caches (`kv_quant.QuantizedBlocks`) are dequantized row by row as they are read.
    """
    if not isinstance(k_cache, np.ndarray):
        from .kv_quant import paged_attention as quantized_attention

        return quantized_attention(q, k_cache, v_cache, block_tables, context_lens, query_lens,
                                   scale)
    lib = _lib()
    if q.dtype == _F32 and not q.flags.c_contiguous and lib is not None:
        q = np.ascontiguousarray(q)  # the kernel reads query rows
    if lib is None or q.dtype != _F32 or k_cache.dtype != _F32 or v_cache.dtype != _F32 \
            or not (q.flags.c_contiguous and k_cache.flags.c_contiguous
                    and v_cache.flags.c_contiguous) or k_cache.ndim != 4 \
            or k_cache.shape != v_cache.shape or q.ndim != 3 \
            or q.shape[1:] != (k_cache.shape[1], k_cache.shape[3]):
        return paged_attention_reference(q, k_cache, v_cache, block_tables, context_lens,
                                         query_lens, scale)
    bt, cl, ql = _int32(block_tables), _int32(context_lens), _int32(query_lens)
    if bt is None or cl is None or ql is None or bt.ndim != 2 or cl.shape != (bt.shape[0],) \
            or ql.shape != cl.shape:
        return paged_attention_reference(q, k_cache, v_cache, block_tables, context_lens,
                                         query_lens, scale)  # it raises the error
    nb, h, bs, d = k_cache.shape
    out = np.empty(q.shape, _F32)
    if lib.paged_attention_f32(address(q), address(k_cache), address(v_cache), address(bt),
                               address(cl), address(ql), bt.shape[0], bt.shape[1], q.shape[0],
                               nb, h, bs, d, scale, address(out)):
        # the kernel found the batch invalid (or head_dim too large): the reference says why
        return paged_attention_reference(q, k_cache, v_cache, block_tables, context_lens,
                                         query_lens, scale)
    return out
