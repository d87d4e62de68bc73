"""GPT.from_pretrained / save_pretrained against transformers' GPT2LMHeadModel on the same
directory, and the Hugging Face tokenizer against `tokenizers`."""

from __future__ import annotations

import json

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import CheckpointError
from shapeflow.models import GPT
from shapeflow.serve.tokenizer import HFTokenizer, load_tokenizer
from tests.models.hf_tiny import SENTENCES, make_hf_dir, transformers

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "tiny-gpt2"
    model, tok = make_hf_dir(folder)
    return folder, model, tok


def _logits_sf(model, idx):
    with sf.no_grad():
        return model(sf.tensor(idx))[0].numpy()


def _logits_hf(model, idx):
    with torch.no_grad():
        return model(torch.tensor(idx)).logits.numpy()


def test_logits_equal_transformers(hf_dir):
    folder, hf, tok = hf_dir
    model = GPT.from_pretrained(folder)
    assert model.config.activation == "gelu_tanh"  # GPT-2's gelu_new
    idx = np.random.default_rng(0).integers(0, tok.get_vocab_size(), (2, 40))
    ref = _logits_hf(hf, idx)
    assert np.abs(ref).max() > 1.0  # logits that a wrong weight would change visibly
    np.testing.assert_allclose(_logits_sf(model, idx), ref, atol=2e-5, rtol=1e-5)


def test_greedy_generate_equals_transformers(hf_dir):
    folder, hf, tok = hf_dir
    model = GPT.from_pretrained(folder)
    prompt = tok.encode(SENTENCES[0]).ids[:8]
    ref = hf.generate(torch.tensor([prompt]), max_new_tokens=24, min_new_tokens=24,
                      do_sample=False, pad_token_id=0)[0].tolist()
    ours = model.generate(sf.tensor([prompt]), 24, do_sample=False)[0].tolist()
    assert ours == ref


def test_exact_gelu_config_and_save_pretrained_roundtrip(tmp_path):
    folder = tmp_path / "exact"
    hf, tok = make_hf_dir(folder, activation="gelu", n_layer=1, seed=1)
    model = GPT.from_pretrained(folder)
    assert model.config.activation == "gelu"
    idx = np.random.default_rng(1).integers(0, tok.get_vocab_size(), (1, 30))
    np.testing.assert_allclose(_logits_sf(model, idx), _logits_hf(hf, idx), atol=2e-5,
                               rtol=1e-5)
    # a shapeflow GPT (exact GELU, its own init) written in HF's layout: transformers agrees
    sf.manual_seed(3)
    ours = GPT(vocab_size=50, block_size=32, n_layer=2, n_head=2, n_embd=16)
    ours.save_pretrained(tmp_path / "saved")
    again = transformers().GPT2LMHeadModel.from_pretrained(str(tmp_path / "saved")).eval()
    idx = np.random.default_rng(2).integers(0, 50, (2, 20))
    np.testing.assert_allclose(_logits_hf(again, idx), _logits_sf(ours, idx), atol=1e-5,
                               rtol=1e-5)
    back = GPT.from_pretrained(tmp_path / "saved")
    assert back.config.activation == "gelu"
    np.testing.assert_array_equal(_logits_sf(back, idx), _logits_sf(ours, idx))
    # no biases: GPT-2 has them, zero ones compute the same
    plain = GPT(vocab_size=50, block_size=32, n_layer=1, n_head=2, n_embd=16, bias=False)
    plain.save_pretrained(tmp_path / "plain")
    again = transformers().GPT2LMHeadModel.from_pretrained(str(tmp_path / "plain")).eval()
    np.testing.assert_allclose(_logits_hf(again, idx), _logits_sf(plain, idx), atol=1e-5,
                               rtol=1e-5)


def test_pytorch_bin_and_unprefixed_names(tmp_path, hf_dir):
    """pytorch_model.bin (torch.save), keys without `transformer.` as OpenAI's GPT-2 files."""
    folder, hf, tok = hf_dir
    other = tmp_path / "bin"
    other.mkdir()
    (other / "config.json").write_text((folder / "config.json").read_text())
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()}
    torch.save(state, other / "pytorch_model.bin")
    model = GPT.from_pretrained(other)
    idx = np.random.default_rng(3).integers(0, tok.get_vocab_size(), (1, 16))
    np.testing.assert_allclose(_logits_sf(model, idx), _logits_hf(hf, idx), atol=2e-5,
                               rtol=1e-5)


def test_tokenizer_matches_tokenizers(hf_dir, tmp_path):
    folder, _, tok = hf_dir
    ours = load_tokenizer(folder)
    assert isinstance(ours, HFTokenizer) and ours.vocab_size == tok.get_vocab_size()
    assert ours.eos_token_id == tok.token_to_id("<|endoftext|>")
    text = "Hello wörld!\nThe lazy café 😀, unseen: zqxj"
    assert ours.encode(text) == tok.encode(text).ids
    assert ours.decode(ours.encode(text)) == text
    for s in SENTENCES:
        assert ours.decode(ours.encode(s)) == s
    # vocab.json + merges.txt (GPT-2's original files) give the same ids
    make_hf_dir(tmp_path / "vm", vocab_files=True, n_layer=1)
    assert not (tmp_path / "vm" / "tokenizer.json").exists()
    assert load_tokenizer(tmp_path / "vm").encode(text) == tok.encode(text).ids
    # the end-of-text token is special: decode leaves it out unless asked
    ids = ours.encode("fox") + [ours.eos_token_id]
    assert ours.decode(ids) == "fox"
    assert ours.decode(ids, skip_special_tokens=False) == "fox<|endoftext|>"


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_bad_directories_raise_checkpoint_error(hf_dir, tmp_path):
    folder = hf_dir[0]
    with pytest.raises(CheckpointError, match="no such directory") as err:
        GPT.from_pretrained(tmp_path / "absent")
    assert err.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        GPT.from_pretrained(tmp_path / "empty")
    bad = _copy(folder, tmp_path / "badjson")
    (bad / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="JSON"):
        GPT.from_pretrained(bad)
    llama = _copy(folder, tmp_path / "llama")
    cfg = json.loads((llama / "config.json").read_text())
    (llama / "config.json").write_text(json.dumps({**cfg, "model_type": "llama",
                                                   "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(CheckpointError, match="unsupported architecture 'llama'") as err:
        GPT.from_pretrained(llama)
    assert "GPT-2" in err.value.hint
    variant = _copy(folder, tmp_path / "variant")
    (variant / "config.json").write_text(json.dumps({**cfg, "activation_function": "relu"}))
    with pytest.raises(CheckpointError, match="activation_function 'relu'"):
        GPT.from_pretrained(variant)
    shapes = _copy(folder, tmp_path / "shapes")
    (shapes / "config.json").write_text(json.dumps({**cfg, "n_embd": 64}))
    with pytest.raises(CheckpointError, match="do not fit config.json") as err:
        GPT.from_pretrained(shapes)
    assert "shape [32], config.json says [64]" in str(err.value)
    noweights = _copy(folder, tmp_path / "noweights")
    (noweights / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        GPT.from_pretrained(noweights)
    torn = _copy(folder, tmp_path / "torn")
    data = (torn / "model.safetensors").read_bytes()
    (torn / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        GPT.from_pretrained(torn)
    with pytest.raises(CheckpointError, match="no tokenizer.json"):
        load_tokenizer(tmp_path / "empty")
