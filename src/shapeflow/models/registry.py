"""Reference models by name (`vit`, `gpt`, `mlp`, `resnet`, `lstm`) or any `module:factory`
entry point."""

from __future__ import annotations

import importlib

from ..errors import ShapeflowError

# Default configurations: the published base sizes, cheap to trace on the meta device.
DEFAULTS = {
    "mlp": ("MLP", dict(in_features=784, hidden=[256, 256], out_features=10), "B,784"),
    "vit": ("ViT", dict(image_size=224, patch_size=16, in_channels=3, num_classes=1000, dim=768,
                        depth=12, heads=12), "B,3,224,224"),
    "gpt": ("GPT", dict(vocab_size=50304, block_size=1024, n_layer=12, n_head=12, n_embd=768),
            "B,L"),
    "resnet": ("ResNet", dict(layers=(2, 2, 2, 2), num_classes=1000, in_channels=3, width=64),
               "B,3,H,W"),  # ResNet-18
    "lstm": ("CharLSTM", dict(vocab_size=65, embed_dim=64, hidden_size=256, num_layers=2),
             "B,L"),
}


def build_model(name: str, device=None, **overrides):
    """A model from a short name or `package.module:factory` (called with the overrides).

    Built under `with device:`, so a meta model never allocates its weights on cpu first.
    """
    if device is None:
        return _build(name, overrides)
    from ..device import get_device

    device = get_device(device)
    with device:
        model = _build(name, overrides)
    return model.to(device)  # a no-op unless a factory ignores the default device


def _build(name: str, overrides: dict):
    if name in DEFAULTS:
        from . import GPT, MLP, CharLSTM, ResNet, ViT

        cls_name, kwargs, _ = DEFAULTS[name]
        cls = {"MLP": MLP, "ViT": ViT, "GPT": GPT, "ResNet": ResNet, "CharLSTM": CharLSTM}[
            cls_name]
        model = cls(**{**kwargs, **overrides})
    elif ":" in name:
        mod_name, factory = name.split(":", 1)
        try:
            factory_fn = getattr(importlib.import_module(mod_name), factory)
        except (ImportError, AttributeError) as e:
            raise ShapeflowError(f"cannot load model factory {name!r}: {e}") from None
        model = factory_fn(**overrides)
    else:
        raise ShapeflowError(f"unknown model {name!r}",
                             hint="use mlp, vit, gpt, resnet, lstm, or an entry point "
                             "package.module:factory")
    return model


def default_input(name: str) -> str | None:
    return DEFAULTS[name][2] if name in DEFAULTS else None


def parse_input(spec: str, dtype=None, device="meta"):
    """`"B,3,224,224"` -> an empty meta tensor with the symbol B; token ids for `B,L` specs."""
    from .. import dtypes
    from ..factories import empty

    sizes = []
    for tok in spec.replace(" ", "").split(","):
        sizes.append(int(tok) if tok.lstrip("-").isdigit() else tok)
    return empty(*sizes, dtype=dtype or dtypes.float32, device=device)
