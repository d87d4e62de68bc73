"""Autograd: grad modes, the backward engine, gradcheck."""

from .checks import gradcheck
from .engine import backward, grad
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "no_grad", "enable_grad", "inference_mode", "is_grad_enabled",
           "set_grad_enabled", "gradcheck"]
