"""A tiny Hugging Face GPT-2 directory made on the spot (random weights, a byte-level BPE
trained on a few sentences): what `GPT.from_pretrained` and the serving loader read.
Nothing is downloaded."""

from __future__ import annotations

import pytest

from tests.vision.torchvision_oracle import import_torchvision

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, this is shapeflow serving a GPT-2.",
    "A paged KV cache keeps keys and values in blocks.\nNew lines too!",
    "Unicode: héllo wörld, naïve café, 😀 and ünïcödé.",
]


def transformers():
    """transformers, importable next to the CPU torch (its vision imports need the shim)."""
    pytest.importorskip("transformers")
    import_torchvision()  # transformers imports torchvision when it is installed
    import transformers

    return transformers


def train_tokenizer(vocab_size: int = 320):
    """A byte-level BPE with <|endoftext|>, trained on SENTENCES."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer()
    tok.train_from_iterator(SENTENCES * 4, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    return tok


def make_hf_dir(folder, *, n_layer: int = 2, n_head: int = 4, n_embd: int = 32,
                n_positions: int = 64, activation: str = "gelu_new", seed: int = 0,
                init: float = 0.2, vocab_files: bool = False):
    """Write config.json, model.safetensors and tokenizer.json (or vocab.json + merges.txt)
    into `folder`; returns (transformers model in eval mode, the tokenizers Tokenizer)."""
    tf = transformers()
    import torch

    tok = train_tokenizer()
    folder.mkdir(parents=True, exist_ok=True)
    if vocab_files:
        tok.save_model(str(folder))
    else:
        tok.save(str(folder / "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    config = tf.GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                           n_positions=n_positions, vocab_size=tok.get_vocab_size(),
                           activation_function=activation, initializer_range=init,
                           bos_token_id=eos, eos_token_id=eos)
    torch.manual_seed(seed)
    model = tf.GPT2LMHeadModel(config)
    with torch.no_grad():  # non-zero biases and norms: a test that loses one must fail
        for name, p in model.named_parameters():
            if name.endswith("bias") or "ln_" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(folder))
    return model.eval(), tok
