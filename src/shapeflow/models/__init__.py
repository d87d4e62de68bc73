"""Reference models: an MLP, a Vision Transformer and a GPT (nanoGPT's layout)."""

from .gpt import GPT, GPTConfig
from .mlp import MLP
from .vit import ViT

__all__ = ["MLP", "ViT", "GPT", "GPTConfig"]
