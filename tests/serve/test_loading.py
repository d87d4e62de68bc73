"""load_served_model: what `shapeflow serve PATH` loads, a `shapeflow train gpt` checkpoint or
a Hugging Face GPT-2 directory, and the errors for anything else."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.cli.train import train_gpt
from shapeflow.errors import CheckpointError
from shapeflow.models import GPT
from shapeflow.serve.loading import load_served_model
from shapeflow.serve.tokenizer import CharTokenizer, HFTokenizer


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A checkpoint written by `shapeflow train gpt --save` (one step of a tiny model)."""
    path = tmp_path_factory.mktemp("ckpt") / "gpt_char.safetensors"
    train_gpt(steps=1, batch_size=2, block_size=16, n_layer=1, n_embd=32, n_head=2,
              sample_tokens=1, save=str(path), val_batches=1)
    return path


def test_trained_checkpoint(trained):
    model, tokenizer, name = load_served_model(trained)
    assert name == str(trained)  # as vLLM names a served model: the path given
    assert isinstance(tokenizer, CharTokenizer) and tokenizer.eos_token_id is None
    assert not model.training
    ckpt = sf.load(str(trained))
    assert tokenizer.vocab == list(ckpt["vocab"])
    assert tokenizer.vocab_size == model.config.vocab_size
    for key, value in ckpt["model"].items():  # the trained weights, not a fresh init
        np.testing.assert_array_equal(model.state_dict()[key].detach().numpy(), value.numpy())
    ids = tokenizer.encode("To be, or not")
    assert tokenizer.decode(ids) == "To be, or not"
    out = model.generate(sf.tensor([ids]), 5, do_sample=False)
    assert out.shape == (1, len(ids) + 5)


def test_hf_directory(tmp_path):
    from tests.models.hf_tiny import make_hf_dir

    folder = tmp_path / "tiny-gpt2"
    hf, tok = make_hf_dir(folder, n_layer=1)
    model, tokenizer, name = load_served_model(str(folder) + "/")
    assert name == str(folder)
    assert isinstance(tokenizer, HFTokenizer) and isinstance(model, GPT)
    assert tokenizer.eos_token_id == tok.token_to_id("<|endoftext|>")
    import torch

    ids = tokenizer.encode("The quick brown fox")
    assert ids == tok.encode("The quick brown fox").ids
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits.numpy()
    with sf.no_grad():
        np.testing.assert_allclose(model(sf.tensor([ids]))[0].numpy(), ref, atol=2e-5,
                                   rtol=1e-5)


def test_what_cannot_be_served(tmp_path, trained):
    with pytest.raises(CheckpointError, match="no such file") as err:
        load_served_model(tmp_path / "absent.safetensors")
    assert "shapeflow train gpt --save" in err.value.hint
    (tmp_path / "folder").mkdir()
    with pytest.raises(CheckpointError, match="without config.json"):
        load_served_model(tmp_path / "folder")
    plain = tmp_path / "plain.safetensors"  # weights alone: no config, no vocabulary
    sf.save(GPT(vocab_size=8, block_size=8, n_layer=1, n_head=1, n_embd=8).state_dict(),
            str(plain))
    with pytest.raises(CheckpointError, match="not a GPT checkpoint"):
        load_served_model(plain)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}")
    with pytest.raises(CheckpointError):
        load_served_model(junk)
    ckpt = sf.load(str(trained))
    ckpt["config"] = {**ckpt["config"], "n_embd": 64}  # weights that do not fit the config
    misfit = tmp_path / "misfit.safetensors"
    sf.save(ckpt, str(misfit))
    with pytest.raises(CheckpointError, match="do not fit"):
        load_served_model(misfit)
    ckpt = sf.load(str(trained))
    ckpt["vocab"] = ckpt["vocab"] + "é€"  # more characters than embedding rows
    extra = tmp_path / "extra.safetensors"
    sf.save(ckpt, str(extra))
    with pytest.raises(CheckpointError, match="tokenizer has"):
        load_served_model(extra)
