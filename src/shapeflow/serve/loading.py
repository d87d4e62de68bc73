"""What `shapeflow serve PATH` serves: a checkpoint of `shapeflow train gpt --save` (weights,
config and its character vocabulary) or a Hugging Face GPT-2 directory."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CheckpointError
from .tokenizer import CharTokenizer, HFTokenizer, load_tokenizer

HINT = ("serve a checkpoint written by `shapeflow train gpt --save PATH`, or a Hugging Face "
        "GPT-2 directory (config.json, model.safetensors, tokenizer.json)")


def load_served_model(path: str | os.PathLike):
    """(model in eval mode, tokenizer, name) for `path`; the name is the path as given, as
    vLLM names a served model. Anything unreadable raises CheckpointError."""
    name = os.fspath(path).rstrip("/") or os.fspath(path)
    p = Path(path)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise CheckpointError(f"{path}: a directory without config.json", op="serve",
                                  hint=HINT)
        from ..models.gpt import GPT

        tokenizer = load_tokenizer(p)  # first: it is the quick one to fail
        model = GPT.from_pretrained(p)
        _check_vocab(path, model, tokenizer)
        return model, tokenizer, name
    if not p.exists():
        raise CheckpointError(f"{path}: no such file or directory", op="serve", hint=HINT)
    model, tokenizer = _load_trained(p)
    return model, tokenizer, name


def _load_trained(path: Path):
    """(GPT, CharTokenizer) from a `shapeflow train gpt` checkpoint, checked before built."""
    from ..io.checkpoint import load
    from ..models.gpt import GPT

    ckpt = load(str(path))  # malformed files raise CheckpointError
    keys = ("model", "config", "vocab")
    if not isinstance(ckpt, dict) or any(k not in ckpt for k in keys):
        found = sorted(map(str, ckpt)) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"{path}: not a GPT checkpoint of `shapeflow train gpt` (it needs "
                              f"{', '.join(keys)}; found {found})", op="serve", hint=HINT)
    config, vocab = ckpt["config"], ckpt["vocab"]
    if not isinstance(config, dict) or not isinstance(vocab, str | list):
        raise CheckpointError(f"{path}: config must be a dict and vocab a str", op="serve",
                              hint=HINT)
    try:
        model = GPT(**config)
        model.load_state_dict(ckpt["model"])
    except (TypeError, ValueError, RuntimeError) as err:  # ShapeError, StateDictError...
        raise CheckpointError(f"{path}: the weights do not fit its config ({err})", op="serve",
                              hint=HINT) from None
    tokenizer = CharTokenizer(vocab, name="char")
    _check_vocab(path, model, tokenizer)
    return model.eval(), tokenizer


def _check_vocab(path, model, tokenizer: CharTokenizer | HFTokenizer) -> None:
    """Every token id the tokenizer makes must have an embedding row."""
    if tokenizer.vocab_size > model.config.vocab_size:
        raise CheckpointError(f"{path}: the tokenizer has {tokenizer.vocab_size} tokens, the "
                              f"model's embedding {model.config.vocab_size} rows", op="serve",
                              hint="the tokenizer and the weights must belong together")
