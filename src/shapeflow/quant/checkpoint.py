"""Quantized state dicts in safetensors: data, scales and the scheme of each quantized module.

The file is an ordinary shapeflow checkpoint (io/checkpoint.py: atomic write, no pickle)
holding {"quant": {"format", "version", "modules": {name: config}}, "state_dict": ...}.
Loading rebuilds the quantized modules from their configs and loads the state dict, which
checks every key, shape and dtype before it copies anything.
"""

from __future__ import annotations

import copy

from ..errors import CheckpointError
from ..io.checkpoint import load as _load
from ..io.checkpoint import save as _save
from ..nn.module import Module
from .modules import QuantizedEmbedding, QuantizedLinear

FORMAT = "shapeflow.quant"
VERSION = 1
_KINDS = {"linear": QuantizedLinear, "embedding": QuantizedEmbedding}


def quant_config(model: Module) -> dict:
    """name -> config of every quantized module of `model`."""
    return {name: m.quant_config() for name, m in model.named_modules()
            if isinstance(m, (QuantizedLinear, QuantizedEmbedding))}


def save(model: Module, path) -> None:
    """Write a quantized model's state dict and scheme metadata to `path` (atomically)."""
    _save({"quant": {"format": FORMAT, "version": VERSION, "modules": quant_config(model)},
           # keep_vars: a tied table is one object under two keys, so the file holds it once
           "state_dict": model.state_dict(keep_vars=True)}, path)


def load(path, model: Module) -> Module:
    """Load what `save` wrote. Into a quantized `model` of the same structure: in place,
    returned; into a float model: a quantized copy (the float model is untouched). On any
    error the model is left as it was."""
    obj = _load(path)
    meta = obj.get("quant") if isinstance(obj, dict) else None
    if not (isinstance(meta, dict) and meta.get("format") == FORMAT
            and isinstance(meta.get("modules"), dict) and "state_dict" in obj):
        raise CheckpointError(f"cannot load {path}: not a quantized state dict saved by "
                              "sf.quant.save", op="load",
                              hint="plain state dicts load with model.load_state_dict")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"cannot load {path}: quantized checkpoint version "
                              f"{meta.get('version')!r} is not {VERSION}", op="load")
    configs = meta["modules"]
    target = model
    if quant_config(model) != configs:
        if quant_config(model):
            raise CheckpointError(
                f"cannot load {path}: the model is quantized differently from the file "
                f"(file: {_summary(configs)}; model: {_summary(quant_config(model))})",
                op="load", hint="load into the float model to get the file's quantization")
        target = _rebuild(model, configs, path)
    target.load_state_dict(obj["state_dict"])
    return target


def _summary(configs: dict) -> str:
    schemes = sorted({c.get("scheme") for c in configs.values()} - {None})
    return f"{len(configs)} module(s), scheme(s) {', '.join(map(str, schemes)) or 'none'}"


def _rebuild(model: Module, configs: dict, path) -> Module:
    """A copy of the float `model` with empty quantized modules where `configs` says."""
    q = copy.deepcopy(model)
    names = dict(q.named_modules())
    tied: dict = {}
    for name, config in configs.items():
        cls = _KINDS.get(config.get("kind")) if isinstance(config, dict) else None
        if cls is None or name not in names or not name:
            raise CheckpointError(f"cannot load {path}: quantized module {name!r} does not "
                                  "exist in the model or has an unknown kind", op="load")
        try:
            new = cls.from_config(config)
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"cannot load {path}: bad config for {name!r}: {e}",
                                  op="load") from None
        # float weights tied in the model (GPT's wte / lm_head) share one quantized copy,
        # as quantize() made them
        key = (id(getattr(names[name], "weight", None)), new.scheme)
        if key[0] != id(None) and key in tied:
            new.weight_qdata, new.weight_scale = tied[key]
        else:
            tied[key] = (new.weight_qdata, new.weight_scale)
        parent, _, attr = name.rpartition(".")
        setattr(q.get_submodule(parent) if parent else q, attr, new)
    return q
