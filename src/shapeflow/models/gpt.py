"""A GPT in nanoGPT's layout: pre-LN blocks, causal self-attention, GELU MLP, tied embedding."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import nn
from ..autograd.grad_mode import no_grad
from ..errors import ShapeError
from ..nn import functional as F
from ..ops.movement import cat


@dataclass
class GPTConfig:
    vocab_size: int = 50304
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    n_kv_head: int | None = None  # grouped-query attention when < n_head (memory planning)
    activation: str = "gelu"  # "gelu_tanh": GPT-2's tanh approximation (a loaded HF GPT-2)
    layer_norm_eps: float = 1e-5


class KVCache:
    """Keys and values of the tokens seen so far, one [B, heads, T, head_dim] pair per layer.

    Each key and value tensor has a buffer of its own (not a view of the fused qkv output),
    so the cache holds 2 x layers x B x T x n_embd elements: `kv_cache_bytes`, exactly.
    """

    def __init__(self, n_layer: int) -> None:
        self.layers: list[tuple | None] = [None] * n_layer

    @property
    def length(self) -> int:
        first = self.layers[0]
        return 0 if first is None else first[0].shape[2]

    def update(self, layer: int, k, v):
        """Append this step's keys and values; (all keys, all values, tokens before)."""
        prev = self.layers[layer]
        if prev is None:
            # buffers of their own: views of the qkv output would keep q alive with them
            k, v, past = k.clone(), v.clone(), 0
        else:
            past = prev[0].shape[2]
            k, v = cat([prev[0], k], dim=2), cat([prev[1], v], dim=2)
        self.layers[layer] = (k, v)
        return k, v, past

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds (keys and values of every layer)."""
        return sum(t.nbytes for pair in self.layers if pair is not None for t in pair)


def make_kv_cache(n_layer: int, dtype: str | None = None) -> KVCache:
    """A float cache (dtype None: the activations' dtype) or one stored int8 / fp8 with a
    scale per token and head ("int8", "fp8-e4m3", "fp8-e5m2")."""
    if dtype is None:
        return KVCache(n_layer)
    from .kv_quant import QuantizedKVCache

    return QuantizedKVCache(n_layer, dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        if config.n_embd % config.n_head:
            raise ShapeError(f"GPT: n_embd {config.n_embd} is not divisible by n_head "
                             f"{config.n_head}", op="GPT")
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias,
                                device=device)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias, device=device)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
        # selective recompute (Korthikanti et al. 2022): keep q, k, v, recompute the core
        self.recompute_core = False

    def forward(self, x, cache: KVCache | None = None, layer: int = 0):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.reshape(B, T, self.n_head, hs).transpose(1, 2)
        k = k.reshape(B, T, self.n_head, hs).transpose(1, 2)
        v = v.reshape(B, T, self.n_head, hs).transpose(1, 2)
        past = 0
        if cache is not None:
            k, v, past = cache.update(layer, k, v)
        p = self.dropout if self.training else 0.0
        if past == 0 and self.recompute_core and self.training and cache is None:
            from ..recompute import checkpoint

            # backward keeps q, k, v (the qkv output) instead of the [T, T] probabilities
            y = checkpoint(F.scaled_dot_product_attention, q, k, v, dropout_p=p,
                           is_causal=True)
        elif past == 0:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            # new query i sits at position past + i and may see keys 0 .. past + i (made
            # with ops, not NumPy: sf.compile traces it with past and T symbolic)
            from ..factories import arange

            S = past + T
            mask = arange(S, device=x.device).unsqueeze(0) <= \
                arange(past, S, device=x.device).unsqueeze(1)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias, device=device)
        self.gelu = nn.GELU(approximate=GELU_APPROXIMATE[config.activation])
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias,
                                device=device)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, device=None) -> None:
        super().__init__()
        # built on `device` directly: a meta GPT-3 never allocates its 175B weights on cpu
        eps = config.layer_norm_eps
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=eps, bias=config.bias, device=device)
        self.attn = CausalSelfAttention(config, device)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=eps, bias=config.bias, device=device)
        self.mlp = MLP(config, device)

    def forward(self, x, cache: KVCache | None = None, layer: int = 0):
        x = x + self.attn(self.ln_1(x), cache, layer)
        return x + self.mlp(self.ln_2(x))


RECOMPUTE = ("none", "selective", "full")
GELU_APPROXIMATE = {"gelu": "none", "gelu_tanh": "tanh"}  # GPTConfig.activation -> nn.GELU


class GPT(nn.Module):
    """GPT-2-style language model; `forward(idx, targets=None) -> (logits, loss)`.

    `recompute` trades compute for memory in training: "selective" recomputes each
    attention core (softmax(q k^T) v) in backward, "full" each block (`checkpoint=True`).
    """

    def __init__(self, vocab_size: int = 50304, block_size: int = 1024, n_layer: int = 12,
                 n_head: int = 12, n_embd: int = 768, dropout: float = 0.0, bias: bool = True,
                 checkpoint: bool = False, device=None, recompute: str | None = None,
                 activation: str = "gelu", layer_norm_eps: float = 1e-5) -> None:
        super().__init__()
        if activation not in GELU_APPROXIMATE:
            raise ValueError(f"GPT: activation must be one of {', '.join(GELU_APPROXIMATE)}, "
                             f"got {activation!r}")
        if recompute is not None and recompute not in RECOMPUTE:
            raise ValueError(f"GPT: recompute must be one of {', '.join(RECOMPUTE)}, got "
                             f"{recompute!r}")
        if checkpoint and recompute not in (None, "full"):
            raise ValueError(f"GPT: checkpoint=True is recompute='full', not {recompute!r}")
        self.config = GPTConfig(vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias,
                                activation=activation, layer_norm_eps=layer_norm_eps)
        c = self.config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd, device=device),
            wpe=nn.Embedding(c.block_size, c.n_embd, device=device),
            drop=nn.Dropout(c.dropout),
            h=nn.ModuleList(Block(c, device) for _ in range(c.n_layer)),
            ln_f=nn.LayerNorm(c.n_embd, eps=c.layer_norm_eps, bias=c.bias, device=device),
        ))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False, device=device)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2
        self.checkpoint = checkpoint or recompute == "full"
        for block in self.transformer.h:
            block.attn.recompute_core = recompute == "selective"
        if device is not None:
            self.to(device)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2's scaled init of residual projections
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))

    @classmethod
    def from_pretrained(cls, path) -> GPT:
        """A Hugging Face GPT-2-layout directory (config.json, model.safetensors), as
        transformers' GPT2LMHeadModel computes it (models/hf_gpt2.py)."""
        from .hf_gpt2 import load_hf_gpt2

        return load_hf_gpt2(path)

    def save_pretrained(self, path) -> None:
        """Write a Hugging Face GPT-2-layout directory that `from_pretrained` and
        transformers' GPT2LMHeadModel load."""
        from .hf_gpt2 import save_hf_gpt2

        save_hf_gpt2(self, path)

    @staticmethod
    def _init_weights(module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None, cache: KVCache | None = None):
        B, T = idx.shape
        past = cache.length if cache is not None else 0
        if type(T) is int and past + T > self.config.block_size:
            raise ShapeError(
                f"GPT: sequence of {past + T} tokens is longer than block_size "
                f"{self.config.block_size}", op="GPT",
                hint=f"crop the input to idx[:, -{self.config.block_size}:]")
        from ..factories import arange

        pos = arange(past, past + T, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for i, block in enumerate(self.transformer.h):
            if self.checkpoint and cache is None and self.training:
                from ..recompute import checkpoint

                x = checkpoint(block, x)
            else:
                x = block(x, cache, i)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                   ignore_index=-1)
        return logits, loss

    @no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, use_cache: bool = True, do_sample: bool = True,
                 generator=None, kv_cache_dtype: str | None = None):
        """Append max_new_tokens tokens; greedy when do_sample=False (or temperature == 0).

        `kv_cache_dtype` "int8", "fp8-e4m3" or "fp8-e5m2" stores the KV cache in that format
        with a float32 scale per token and head (`sf.memory.kv_cache_bytes(..., dtype=)`)."""
        from ..random import get_rng
        from ..tensor import tensor

        rng = get_rng(generator)
        bs = self.config.block_size
        cache = make_kv_cache(self.config.n_layer, kv_cache_dtype) if use_cache else None
        tokens = idx.numpy().astype(np.int64)
        fed = 0  # tokens of `tokens` already in the cache
        for _ in range(max_new_tokens):
            if cache is not None and fed and tokens.shape[1] <= bs:
                step_in = tokens[:, fed:]
            else:
                # no cache, or the window slid past block_size: positions shift, start over
                window = tokens[:, -bs:]
                if cache is not None:
                    cache = make_kv_cache(self.config.n_layer, kv_cache_dtype)
                step_in, fed = window, 0
            logits, _ = self(tensor(step_in), cache=cache)
            fed = tokens.shape[1] if cache is not None else 0
            last = logits.numpy()[:, -1, :].astype(np.float64)
            if not do_sample or temperature == 0:
                nxt = last.argmax(-1)
            else:
                last = last / temperature
                if top_k is not None:
                    kth = np.sort(last, axis=-1)[:, -min(top_k, last.shape[-1])][:, None]
                    last = np.where(last < kth, -np.inf, last)
                probs = np.exp(last - last.max(-1, keepdims=True))
                probs /= probs.sum(-1, keepdims=True)
                nxt = np.array([rng.choice(len(p), p=p) for p in probs])
            tokens = np.concatenate([tokens, nxt[:, None]], axis=1)
        return tensor(tokens)
