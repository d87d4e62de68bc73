"""One forward of a GPT over a ragged batch: the new tokens of S sequences, flattened.

The tokens of every scheduled chunk (a decode's one token, a prefill chunk's many) are laid
back to back as `[N, C]`, so each weight matrix is read once per step for all sequences:
that is what makes continuous batching pay. Attention writes each token's key and value
into its slot of the paged pool and reads the sequence's blocks in place. Only the last
token of a sequence that finished its chunk gets logits. The math is the ops' own (gemm,
the compiled LayerNorm, the GELU tables), so logits equal `model(idx)` to float32 rounding.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend.cpu import kernels
from ..device import cpu
from ..ops.activation import Gelu
from . import paged_attention as pa
from .kv_pool import KVPool
from .scheduler import Chunk

__all__ = ["ModelRunner"]


def _layer_norm(x: np.ndarray, w, b, eps: float) -> np.ndarray:
    """LayerNorm over rows as F.layer_norm computes it (the compiled pass for float32)."""
    fused = kernels.layer_norm(x, w, b, eps, False)
    if fused is not None:
        return fused[0]
    ct = np.float64 if x.dtype == np.float64 else np.float32
    xc = x.astype(ct, copy=False)
    m = xc.mean(-1, keepdims=True)
    d = xc - m
    out = d / np.sqrt((d * d).mean(-1, keepdims=True) + eps)
    if w is not None:
        out *= w
    if b is not None:
        out += b
    return out.astype(x.dtype, copy=False)


class _Layer:
    __slots__ = ("ln1", "attn_w", "attn_b", "proj_w", "proj_b", "ln2", "fc_w", "fc_b",
                 "out_w", "out_b", "gelu")


def _arr(p) -> np.ndarray | None:
    return None if p is None else p.detach().numpy()


def _ln(mod) -> tuple:
    return _arr(mod.weight), _arr(getattr(mod, "bias", None)), float(mod.eps)


class ModelRunner:
    """Runs `model` (a nanoGPT-layout GPT) on chunks of sequences over a KVPool."""

    def __init__(self, model, pool: KVPool) -> None:
        self.model, self.pool = model, pool
        c = model.config
        self.n_layer, self.n_head, self.n_embd = c.n_layer, c.n_head, c.n_embd
        self.head_dim = c.n_embd // c.n_head
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self._params = list(model.parameters())
        self._key = None
        self.kv_bytes_written = 0  # bytes write_kv was handed, all steps (keys and values)

    def _weights(self) -> None:
        """Read the parameters' arrays once; again when one is replaced or changed in place."""
        key = tuple((id(p._data), p._version[0]) for p in self._params)
        if key == self._key:
            return
        m = self.model
        t = m.transformer
        self.wte, self.wpe = _arr(t.wte.weight), _arr(t.wpe.weight)
        self.lm_w = _arr(m.lm_head.weight)
        self.ln_f = _ln(t.ln_f)
        self.layers = []
        for block in t.h:
            L = _Layer()
            L.ln1, L.ln2 = _ln(block.ln_1), _ln(block.ln_2)
            a, mlp = block.attn, block.mlp
            L.attn_w, L.attn_b = _arr(a.c_attn.weight).T, _arr(a.c_attn.bias)
            L.proj_w, L.proj_b = _arr(a.c_proj.weight).T, _arr(a.c_proj.bias)
            L.fc_w, L.fc_b = _arr(mlp.c_fc.weight).T, _arr(mlp.c_fc.bias)
            L.out_w, L.out_b = _arr(mlp.c_proj.weight).T, _arr(mlp.c_proj.bias)
            L.gelu = Gelu(getattr(getattr(mlp, "gelu", None), "approximate", "none"))
            L.gelu.device = cpu  # its kernel runs on the host arrays, outside apply
            self.layers.append(L)
        self._key = key

    def inputs(self, chunks: list[Chunk]) -> tuple:
        """(token ids, positions, slots, block tables, context lens, query lens, logit rows)."""
        bs = self.pool.block_size
        S = len(chunks)
        if all(c.num_tokens == 1 for c in chunks):  # decode: one token per sequence
            pos = [c.start for c in chunks]
            ids = [c.seq.tokens[p] for c, p in zip(chunks, pos)]
            slots = [c.seq.block_table[p // bs] * bs + p % bs for c, p in zip(chunks, pos)]
            positions = np.array(pos, np.int64)
            query_lens = np.ones(S, np.int32)
            logit_rows = np.array([i for i, c in enumerate(chunks) if c.need_logits], np.int64)
            ids, slots = np.array(ids, np.int64), np.array(slots, np.int64)
        else:
            ids_l, pos_l, slot_l, rows = [], [], [], []
            at = 0
            for c in chunks:
                p = np.arange(c.start, c.start + c.num_tokens, dtype=np.int64)
                table = np.asarray(c.seq.block_table, np.int64)
                ids_l.append(np.asarray(c.seq.tokens[c.start:c.start + c.num_tokens], np.int64))
                pos_l.append(p)
                slot_l.append(table[p // bs] * bs + p % bs)
                at += c.num_tokens
                if c.need_logits:
                    rows.append(at - 1)
            ids, positions = np.concatenate(ids_l), np.concatenate(pos_l)
            slots = np.concatenate(slot_l)
            query_lens = np.array([c.num_tokens for c in chunks], np.int32)
            logit_rows = np.array(rows, np.int64)
        width = max(len(c.seq.block_table) for c in chunks)
        tables = np.zeros((S, width), np.int32)
        for i, c in enumerate(chunks):
            tables[i, :len(c.seq.block_table)] = c.seq.block_table
        context_lens = np.array([c.start + c.num_tokens for c in chunks], np.int32)
        return ids, positions, slots, tables, context_lens, query_lens, logit_rows

    def run(self, chunks: list[Chunk]) -> np.ndarray:
        """Run the chunks through the model; logits `[rows, vocab]` of the chunks that end
        their sequence's known tokens, in chunk order."""
        self._weights()
        ids, pos, slots, tables, ctx, qlens, rows = self.inputs(chunks)
        return self.forward(ids, pos, slots, tables, ctx, qlens, rows)

    def forward(self, ids, pos, slots, tables, ctx, qlens, rows) -> np.ndarray:
        """The GPT over N flattened tokens; keys/values land in the pool at `slots`."""
        N, C, H, D = len(ids), self.n_embd, self.n_head, self.head_dim
        x = self.wte[ids]
        x += self.wpe[pos]
        pool = self.pool
        # looked up each step: pa dispatches float and quantized blocks (and tests wrap it)
        write, attend = pa.write_kv, pa.paged_attention
        for i, L in enumerate(self.layers):
            h = _layer_norm(x, *L.ln1)
            qkv = cpu.kernels.matmul_bias(h, L.attn_w, L.attn_b)
            q = np.ascontiguousarray(qkv[:, :C]).reshape(N, H, D)  # the kernel reads rows
            k = qkv[:, C:2 * C].reshape(N, H, D)
            v = qkv[:, 2 * C:].reshape(N, H, D)
            kc, vc = pool.k_caches[i], pool.v_caches[i]
            write(kc, vc, k, v, slots)
            self.kv_bytes_written += k.nbytes + v.nbytes
            y = attend(q, kc, vc, tables, ctx, qlens, self.scale)
            x += cpu.kernels.matmul_bias(y.reshape(N, C), L.proj_w, L.proj_b)
            h = _layer_norm(x, *L.ln2)
            f = L.gelu.fn(cpu.kernels.matmul_bias(h, L.fc_w, L.fc_b))
            x += cpu.kernels.matmul_bias(f, L.out_w, L.out_b)
        if len(rows) == 0:
            return np.empty((0, self.wte.shape[0]), x.dtype)
        h = _layer_norm(np.ascontiguousarray(x[rows]), *self.ln_f)
        return cpu.kernels.matmul(h, self.lm_w.T)
