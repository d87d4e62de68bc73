"""A Vision Transformer: image -> patchify -> project -> attention blocks -> head."""

from __future__ import annotations

from .. import nn
from ..errors import ShapeError
from ..nn import functional as F
from ..ops.movement import cat
from ..shape import dims_equal


def _nearest_multiples(n: int, p: int) -> str:
    lo, hi = (n // p) * p, (n // p + 1) * p
    return f"{lo} or {hi}" if lo > 0 else f"{hi}"


def _divisors_near(n: int, p: int) -> str:
    ds = [d for d in range(1, n + 1) if n % d == 0]
    near = sorted(ds, key=lambda d: (abs(d - p), d))[:2]
    return " or ".join(str(d) for d in sorted(near))


class Patchify(nn.Module):
    """[B, C, H, W] -> [B, (H/P)*(W/P), P*P*C] by reshape and permute (no convolution)."""

    def __init__(self, patch_size: int) -> None:
        super().__init__()
        self.patch_size = patch_size

    def forward(self, x):
        P = self.patch_size
        if x.ndim != 4:
            raise ShapeError(f"patchify expects an image batch [B, C, H, W], got {list(x.shape)}",
                             op="patchify", hint="add a batch dim with x.unsqueeze(0)")
        B, C, H, W = x.shape
        for name, size in (("height", H), ("width", W)):
            if type(size) is int and size % P:
                raise ShapeError(
                    f"patchify: patch size {P} does not divide the image {name} {size}",
                    op="patchify", operands=[("image", f"[B, {C}, {H}, {W}]")],
                    hint=f"resize the image to {_nearest_multiples(size, P)} pixels, or use a "
                    f"patch size that divides {size} (e.g. {_divisors_near(size, P)})")
        x = x.reshape(B, C, H // P, P, W // P, P)
        x = x.permute(0, 2, 4, 3, 5, 1)  # B, H/P, W/P, P, P, C
        return x.reshape(B, (H // P) * (W // P), P * P * C)

    def extra_repr(self) -> str:
        return f"patch_size={self.patch_size}"


class Attention(nn.Module):
    """Multi-head self-attention with one qkv projection and the fused attention primitive."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % heads:
            raise ShapeError(f"attention: dim {dim} is not divisible by heads {heads}",
                             op="attention", hint=f"use heads in {_divisors_near(dim, heads)}")
        self.heads, self.dim = heads, dim
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, x):
        B, N, D = x.shape
        h = self.heads
        qkv = self.qkv(x).reshape(B, N, 3, h, D // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        return self.proj(y.transpose(1, 2).reshape(B, N, D))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0, dropout: float = 0.0):
        super().__init__()
        hidden = int(dim * mlp_ratio)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, dim), nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Vision Transformer with a class token and learned positions (Dosovitskiy et al.)."""

    def __init__(self, image_size: int, patch_size: int, in_channels: int, num_classes: int,
                 dim: int, depth: int, heads: int, mlp_ratio: float = 4, dropout: float = 0.0):
        super().__init__()
        if image_size % patch_size:
            raise ShapeError(
                f"ViT: patch size {patch_size} does not divide the image size {image_size}",
                op="ViT", hint=f"use image_size {_nearest_multiples(image_size, patch_size)}, "
                f"or patch_size {_divisors_near(image_size, patch_size)}")
        from .. import factories

        self.image_size, self.patch_size = image_size, patch_size
        self.num_patches = (image_size // patch_size) ** 2
        self.patchify = Patchify(patch_size)
        self.project = nn.Linear(patch_size * patch_size * in_channels, dim)
        self.cls_token = nn.Parameter(factories.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(factories.zeros(1, self.num_patches + 1, dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, mlp_ratio, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.dim = dim

    def forward(self, image):
        x = self.project(self.patchify(image))
        B, N, D = x.shape
        if not dims_equal(N, self.num_patches):
            raise ShapeError(
                f"ViT: the image gives {N} patches but the model was built for "
                f"{self.num_patches} ({self.image_size}x{self.image_size} images)",
                op="ViT", hint=f"feed {self.image_size}x{self.image_size} images")
        x = cat([self.cls_token.expand(B, 1, D), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])

    @staticmethod
    def flops_per_image(image_size, patch_size, in_channels, dim, depth, mlp_ratio=4) -> int:
        """Forward multiply-adds x2 of the matmuls (for throughput reports)."""
        n = (image_size // patch_size) ** 2 + 1
        per_block = 2 * n * dim * (4 * dim + 2 * int(dim * mlp_ratio)) + 4 * n * n * dim
        return 2 * (n - 1) * patch_size ** 2 * in_channels * dim + depth * per_block

