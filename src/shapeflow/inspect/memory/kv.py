"""The KV cache of autoregressive decoding: what inference keeps per generated token."""

from __future__ import annotations

from ... import dtypes as _dt
from .report import MemoryPlanError

QUANTIZED = ("int8", "fp8-e4m3", "fp8-e5m2")  # a quantized cache: data and scales
SCALE_BYTES = 4  # float32, one per token and head

_NAMES = {  # what configs call the sizes (nanoGPT, Hugging Face, Llama)
    "layers": ("n_layer", "num_hidden_layers", "n_layers", "num_layers"),
    "heads": ("n_head", "num_attention_heads", "n_heads", "num_heads"),
    "kv_heads": ("n_kv_head", "num_key_value_heads", "n_kv_heads", "kv_heads"),
    "head_dim": ("head_dim",),
    "hidden": ("n_embd", "hidden_size", "dim", "d_model"),
}


def _get(config, key):
    for name in _NAMES[key]:
        v = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
        if v is not None:
            return v
    return None


def kv_cache_bytes(model_or_config, batch: int, seq_len: int, dtype="float16",
                   kv_heads: int | None = None) -> int:
    """2 x layers x kv_heads x head_dim x seq_len x batch x bytes per element.

    `dtype` "int8", "fp8-e4m3" or "fp8-e5m2" is a quantized cache (GPT's `kv_cache_dtype`):
    one byte a value plus a float32 scale per token and head, 2 x layers x kv_heads x
    seq_len x batch x (head_dim + 4) bytes.

    Takes a GPT (its `.config`), a config object or a dict with nanoGPT or Hugging Face
    names; `kv_heads` (or the config's num_key_value_heads) gives grouped-query attention.
    """
    config = getattr(model_or_config, "config", model_or_config)
    layers, heads = _get(config, "layers"), _get(config, "heads")
    if layers is None or heads is None:
        raise MemoryPlanError("kv_cache_bytes: the config names no layer or head count",
                              hint="pass a dict with n_layer (num_hidden_layers) and n_head "
                              "(num_attention_heads), plus head_dim or n_embd")
    head_dim = _get(config, "head_dim")
    if head_dim is None:
        hidden = _get(config, "hidden")
        if hidden is None:
            raise MemoryPlanError("kv_cache_bytes: the config gives neither head_dim nor a "
                                  "hidden size (n_embd / hidden_size)")
        head_dim = hidden // heads
    kv = kv_heads or _get(config, "kv_heads") or heads
    if heads % kv:
        raise MemoryPlanError(f"kv_cache_bytes: {heads} query heads cannot share {kv} KV "
                              "heads evenly")
    if isinstance(dtype, str) and dtype.lower() in QUANTIZED:
        # one byte a value plus one float32 scale per token and head (GPT's kv_cache_dtype)
        return 2 * layers * kv * seq_len * batch * (head_dim + SCALE_BYTES)
    item = _dt.get_dtype(dtype).itemsize if not isinstance(dtype, _dt.DType) else (
        dtype.itemsize)
    return 2 * layers * kv * head_dim * seq_len * batch * item
