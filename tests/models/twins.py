"""PyTorch twins of the reference models, with the same parameter names."""


import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF


class TorchViT(tnn.Module):
    def __init__(self, image_size, patch_size, in_channels, num_classes, dim, depth, heads,
                 mlp_ratio=4):
        super().__init__()
        self.patch_size, self.heads = patch_size, heads
        n = (image_size // patch_size) ** 2
        self.project = tnn.Linear(patch_size * patch_size * in_channels, dim)
        self.cls_token = tnn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = tnn.Parameter(torch.zeros(1, n + 1, dim))
        hidden = int(dim * mlp_ratio)
        self.blocks = tnn.ModuleList()
        for _ in range(depth):
            b = tnn.Module()
            b.norm1, b.norm2 = tnn.LayerNorm(dim), tnn.LayerNorm(dim)
            b.attn = tnn.Module()
            b.attn.qkv, b.attn.proj = tnn.Linear(dim, 3 * dim), tnn.Linear(dim, dim)
            b.mlp = tnn.Sequential(tnn.Linear(dim, hidden), tnn.GELU(), tnn.Dropout(0.0),
                                   tnn.Linear(hidden, dim), tnn.Dropout(0.0))
            self.blocks.append(b)
        self.norm = tnn.LayerNorm(dim)
        self.head = tnn.Linear(dim, num_classes)

    def forward(self, x):
        B, C, H, W = x.shape
        P = self.patch_size
        x = x.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
        x = self.project(x.reshape(B, (H // P) * (W // P), P * P * C))
        x = torch.cat([self.cls_token.expand(B, 1, x.shape[-1]), x], 1) + self.pos_embed
        for b in self.blocks:
            h = b.norm1(x)
            Bn, N, D = h.shape
            qkv = b.attn.qkv(h).reshape(Bn, N, 3, self.heads, D // self.heads).permute(
                2, 0, 3, 1, 4)
            y = TF.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
            x = x + b.attn.proj(y.transpose(1, 2).reshape(Bn, N, D))
            x = x + b.mlp(b.norm2(x))
        return self.head(self.norm(x)[:, 0])


class TorchGPT(tnn.Module):
    """nanoGPT's model (Karpathy), written from its description: same names and maths."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, bias=True):
        super().__init__()
        self.n_head = n_head
        self.transformer = tnn.ModuleDict(dict(
            wte=tnn.Embedding(vocab_size, n_embd), wpe=tnn.Embedding(block_size, n_embd),
            h=tnn.ModuleList(), ln_f=tnn.LayerNorm(n_embd, bias=bias)))
        for _ in range(n_layer):
            b = tnn.Module()
            b.ln_1, b.ln_2 = tnn.LayerNorm(n_embd, bias=bias), tnn.LayerNorm(n_embd, bias=bias)
            b.attn = tnn.Module()
            b.attn.c_attn = tnn.Linear(n_embd, 3 * n_embd, bias=bias)
            b.attn.c_proj = tnn.Linear(n_embd, n_embd, bias=bias)
            b.mlp = tnn.Module()
            b.mlp.c_fc = tnn.Linear(n_embd, 4 * n_embd, bias=bias)
            b.mlp.c_proj = tnn.Linear(4 * n_embd, n_embd, bias=bias)
            self.transformer.h.append(b)
        self.lm_head = tnn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for b in self.transformer.h:
            h = b.ln_1(x)
            C = h.shape[-1]
            q, k, v = b.attn.c_attn(h).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                       for t in (q, k, v))
            y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
            x = x + b.mlp.c_proj(TF.gelu(b.mlp.c_fc(b.ln_2(x))))
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = TF.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def copy_weights(sf_model, torch_model):
    """Load shapeflow's weights into the twin (names must match one to one)."""
    sd = {k: torch.from_numpy(np.array(v.numpy())) for k, v in sf_model.state_dict().items()}
    missing, unexpected = torch_model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    assert all(k == "lm_head.weight" for k in missing), missing
    return torch_model




class TorchCharLSTM(tnn.Module):
    """sf.models.CharLSTM's twin: embedding, LSTM (batch_first), linear head."""

    def __init__(self, vocab_size, embed_dim, hidden_size, num_layers):
        super().__init__()
        self.embedding = tnn.Embedding(vocab_size, embed_dim)
        self.lstm = tnn.LSTM(embed_dim, hidden_size, num_layers, batch_first=True)
        self.head = tnn.Linear(hidden_size, vocab_size)

    def forward(self, idx, targets):
        logits = self.head(self.lstm(self.embedding(idx))[0])
        return logits, TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
