"""A GPT KV cache stored int8 or fp8: each token's key (and value) of each head keeps one
float32 scale, so a new token never changes what earlier tokens stored."""

from __future__ import annotations

import numpy as np

from .gpt import KVCache

KV_DTYPES = ("int8", "fp8-e4m3", "fp8-e5m2")


class QuantizedKVCache(KVCache):
    """Per layer (keys, key scales, values, value scales): data [B, heads, T, head_dim] in
    `dtype`, scales float32 [B, heads, T, 1]; attention reads them dequantized."""

    def __init__(self, n_layer: int, dtype: str) -> None:
        if dtype not in KV_DTYPES:
            from ..errors import DTypeError

            raise DTypeError(f"GPT: kv_cache_dtype {dtype!r} is not a quantized cache format",
                             op="GPT", hint=f"use None (float) or one of {', '.join(KV_DTYPES)}")
        super().__init__(n_layer)
        self.dtype = dtype

    @property
    def length(self) -> int:
        first = self.layers[0]
        return 0 if first is None else first[0].shape[2]

    def _quantize(self, t) -> tuple[np.ndarray, np.ndarray]:
        from ..quant import quantize_tensor

        a = t.detach().numpy()
        *lead, hs = a.shape
        q = quantize_tensor(a.reshape(-1, hs), self.dtype, axis=0, name="kv cache")
        return q.qdata.reshape(a.shape), q.scale.reshape(*lead, 1)

    def update(self, layer: int, k, v):
        """Quantize and append this step's keys and values; all of them dequantized."""
        from ..tensor import from_numpy

        kq, ks = self._quantize(k)
        vq, vs = self._quantize(v)
        prev = self.layers[layer]
        past = 0
        if prev is not None:
            past = prev[0].shape[2]
            kq, ks, vq, vs = (np.concatenate([p, n], axis=2)
                              for p, n in zip(prev, (kq, ks, vq, vs)))
        self.layers[layer] = (kq, ks, vq, vs)
        dt = k.dtype.np
        return (from_numpy((kq.astype(np.float32) * ks).astype(dt, copy=False)),
                from_numpy((vq.astype(np.float32) * vs).astype(dt, copy=False)), past)

    @property
    def nbytes(self) -> int:
        """Bytes held: the int8 / fp8 data and the float32 scales of every layer."""
        return sum(int(a.nbytes) for entry in self.layers if entry is not None for a in entry)
