"""A small llama training step (llama2.c's layout) in shapeflow and in PyTorch, same weights.

RMSNorm (nn.RMSNorm), rotary embeddings in the real form (cos/sin tables applied to
interleaved pairs, as llama2.c does), grouped-query attention (repeat_kv, causal SDPA),
a SiLU-gated MLP, an output layer tied to the embedding, mean cross-entropy and AdamW with
weight decay on the matrices only. The model is written once against a torch-like module
(`torch` or `shapeflow`), so both sides run the same program, op for op.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

# name: dim, layers, heads, kv heads, seq, batch; vocab 512 (llama2.c's small tokenizer)
CONFIGS = {
    "llama_small_d64": dict(dim=64, n_layers=4, n_heads=8, n_kv_heads=4, seq=64, batch=8),
    "llama_small_d288": dict(dim=288, n_layers=4, n_heads=6, n_kv_heads=2, seq=128, batch=8),
}
VOCAB = 512


def hidden_dim(dim: int, multiple_of: int = 32) -> int:
    """llama's SwiGLU width: 2/3 of 4 * dim, rounded up to a multiple of `multiple_of`."""
    hidden = int(2 * (4 * dim) / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def build(lib: ModuleType, dim: int, n_layers: int, n_heads: int, n_kv_heads: int, seq: int,
          vocab: int = VOCAB):
    """The llama model in `lib` (torch or shapeflow): the same source for both sides."""
    nn, F = lib.nn, lib.nn.functional
    head_dim = dim // n_heads
    n_rep = n_heads // n_kv_heads

    def rotary(x, cos, sin):
        # x [B, T, H, D]: pairs (x[2i], x[2i+1]) rotated by angle t * theta_i
        xr, xi = x.reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
        out_r = xr * cos - xi * sin
        out_i = xr * sin + xi * cos
        return lib.stack([out_r, out_i], dim=-1).flatten(3)

    def repeat_kv(x):
        b, t, h, d = x.shape
        if n_rep == 1:
            return x
        return x[:, :, :, None, :].expand(b, t, h, n_rep, d).reshape(b, t, h * n_rep, d)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(dim, n_heads * head_dim, bias=False)
            self.wk = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(n_heads * head_dim, dim, bias=False)

        def forward(self, x, cos, sin):
            b, t, _ = x.shape
            q = self.wq(x).view(b, t, n_heads, head_dim)
            k = self.wk(x).view(b, t, n_kv_heads, head_dim)
            v = self.wv(x).view(b, t, n_kv_heads, head_dim)
            q, k = rotary(q, cos, sin), rotary(k, cos, sin)
            k, v = repeat_kv(k), repeat_kv(v)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).contiguous().view(b, t, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = hidden_dim(dim)
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.feed_forward = FeedForward()
            self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
            self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)

        def forward(self, x, cos, sin):
            h = x + self.attention(self.attention_norm(x), cos, sin)
            return h + self.feed_forward(self.ffn_norm(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList([Block() for _ in range(n_layers)])
            self.norm = nn.RMSNorm(dim, eps=1e-5)
            self.output = nn.Linear(dim, vocab, bias=False)
            self.tok_embeddings.weight = self.output.weight  # tied, as llama2.c
            freqs = 1.0 / (10000.0 ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
            angles = np.outer(np.arange(seq), freqs).astype(np.float32)  # [T, D/2]
            # [T, 1, D/2]: broadcasts over batch and heads of the [B, T, H, D/2] halves
            self.register_buffer("cos", lib.tensor(np.cos(angles)[:, None, :]),
                                 persistent=False)
            self.register_buffer("sin", lib.tensor(np.sin(angles)[:, None, :]),
                                 persistent=False)

        def forward(self, idx, targets):
            t = idx.shape[1]
            h = self.tok_embeddings(idx)
            cos, sin = self.cos[:t], self.sin[:t]
            for layer in self.layers:
                h = layer(h, cos, sin)
            logits = self.output(self.norm(h))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return Llama()


def optimizer(lib: ModuleType, model, lr: float = 1e-3):
    """AdamW as llama2.c's train.py: decay on the matrices (dim >= 2), none on the norms."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"foreach": False} if lib.__name__ == "torch" else {}
    return lib.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **extra)


def make_pair(config: str | dict, seed: int = 0):
    """(shapeflow model, PyTorch model with the same weights, token ids, targets) for a
    CONFIGS name or a dict of the same keys."""
    import torch

    import shapeflow as sf

    cfg = dict(CONFIGS[config]) if isinstance(config, str) else dict(config)
    batch, seq = cfg.pop("batch"), cfg["seq"]
    sf.manual_seed(seed)
    model = build(sf, **cfg)
    twin = build(torch, **cfg)
    with torch.no_grad():
        twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                              for k, v in model.state_dict().items()})
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, (batch, seq + 1))
    return model, twin, ids[:, :-1], ids[:, 1:]


def make_step(config: str | dict) -> dict:
    """{"shapeflow": step, "torch": step}: one AdamW training step each, for compare()."""
    import torch

    import shapeflow as sf

    model, twin, ia, ta = make_pair(config)
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)
    opt, topt = optimizer(sf, model), optimizer(torch, twin)

    def sf_step():
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def torch_step():
        loss = twin(tidx, ttgt)
        loss.backward()
        topt.step()
        topt.zero_grad()

    return {"shapeflow": sf_step, "torch": torch_step}


def rows(compare, rounds: int, quick: bool) -> dict:
    """`make bench`'s llama rows: compare()'s result per config, one step a sample."""
    return {name: compare(make_step(name), rounds, 3 if quick else 5, 1) for name in CONFIGS}
