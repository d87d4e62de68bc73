"""Reference models: an MLP, a Vision Transformer, a GPT (nanoGPT's layout), a ResNet, a
CharLSTM."""

from .char_lstm import CharLSTM
from .gpt import GPT, GPTConfig
from .mlp import MLP
from .resnet import ResNet
from .vit import ViT

__all__ = ["MLP", "ViT", "GPT", "GPTConfig", "ResNet", "CharLSTM"]
