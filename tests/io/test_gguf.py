"""sf.io.export_gguf: read back with gguf's own reader, tensors and metadata as llama.cpp's
gpt2 loader expects them; the vocabulary checked by tokenizing with `tokenizers` from the
exported tokens and merges (what llama.cpp's BPE does)."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import ArgumentError, CheckpointError
from shapeflow.io.gguf import byte_to_unicode, quantize_q8_0
from shapeflow.models import GPT
from shapeflow.serve.tokenizer import CharTokenizer, load_tokenizer

gguf = pytest.importorskip("gguf")

VOCAB = "\n !',.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyzé’"


def _char_model(vocab=VOCAB, **kw):
    sf.manual_seed(0)
    return GPT(vocab_size=len(vocab), block_size=48, n_layer=2, n_head=4, n_embd=64, **kw)


def _fields(reader) -> dict:
    return {name: field.contents() for name, field in reader.fields.items()}


def _tensors(reader) -> dict[str, tuple[np.ndarray, str, list[int]]]:
    """name -> (values as float32 in numpy order, ggml type name, GGUF ne order shape)."""
    out = {}
    for t in reader.tensors:
        ne = [int(n) for n in t.shape]
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape(ne[::-1])
        out[t.name] = (values, t.tensor_type.name, ne)
    return out


def _expected(model) -> dict[str, np.ndarray]:
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    out = {"token_embd.weight": sd["transformer.wte.weight"],
           "position_embd.weight": sd["transformer.wpe.weight"],
           "output_norm.weight": sd["transformer.ln_f.weight"],
           "output_norm.bias": sd["transformer.ln_f.bias"]}
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for i in range(model.config.n_layer):
        for ours, theirs in names.items():
            for part in ("weight", "bias"):
                out[f"blk.{i}.{theirs}.{part}"] = sd[f"transformer.h.{i}.{ours}.{part}"]
    return out


@pytest.mark.parametrize("dtype, tol", [("f32", 0.0), ("f16", 1e-3), ("q8_0", 1 / 127)])
def test_tensors_read_back(tmp_path, dtype, tol):
    model = _char_model()
    path = sf.io.export_gguf(model, CharTokenizer(VOCAB), tmp_path / "m.gguf", dtype=dtype)
    reader = gguf.GGUFReader(path)
    got, want = _tensors(reader), _expected(model)
    assert set(got) == set(want)  # tied head: no output.weight, llama.cpp reuses token_embd
    c = model.config
    assert got["blk.0.attn_qkv.weight"][2] == [c.n_embd, 3 * c.n_embd]  # ne: in, out
    assert got["blk.1.ffn_down.weight"][2] == [4 * c.n_embd, c.n_embd]
    assert got["token_embd.weight"][2] == [c.n_embd, c.vocab_size]
    for name, (values, kind, _) in got.items():
        ref = want[name]
        if values.ndim == 1 or name.endswith("_norm.weight") or name.startswith("position"):
            assert kind == "F32", name  # as the converter keeps them
            np.testing.assert_array_equal(values, ref, err_msg=name)
            continue
        assert kind == dtype.upper(), name
        scale = np.abs(ref).max(axis=-1, keepdims=True) if dtype == "q8_0" else np.abs(ref)
        assert np.all(np.abs(values - ref) <= tol * scale + 1e-7), name


def test_metadata_for_llama_cpp_gpt2(tmp_path):
    model = _char_model()
    path = sf.io.export_gguf(model, CharTokenizer(VOCAB), tmp_path / "m.gguf", dtype="q8_0")
    reader = gguf.GGUFReader(path)
    f = _fields(reader)
    c = model.config
    assert f["GGUF.version"] == 3
    assert f["general.architecture"] == "gpt2"
    assert f["gpt2.context_length"] == c.block_size
    assert f["gpt2.embedding_length"] == c.n_embd
    assert f["gpt2.feed_forward_length"] == 4 * c.n_embd
    assert f["gpt2.block_count"] == c.n_layer
    assert f["gpt2.attention.head_count"] == c.n_head
    assert f["gpt2.attention.layer_norm_epsilon"] == pytest.approx(1e-5)
    assert f["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    assert f["tokenizer.ggml.model"] == "gpt2"
    b2u = byte_to_unicode()
    assert f["tokenizer.ggml.tokens"][:2] == [b2u[10], b2u[32]]  # "Ċ", "Ġ": "\n" and " "
    assert len(f["tokenizer.ggml.tokens"]) == len(VOCAB)
    assert f["tokenizer.ggml.token_type"] == [1] * len(VOCAB)
    assert len(f["tokenizer.ggml.merges"]) >= 1
    assert "tokenizer.ggml.eos_token_id" not in f  # a character vocabulary has none


def _bpe_from_gguf(fields):
    """A `tokenizers` byte-level BPE built from the file's tokens and merges alone."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, pre_tokenizers
    from tokenizers.models import BPE

    vocab = {t: i for i, t in enumerate(fields["tokenizer.ggml.tokens"])}
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"]]
    for part in (p for m in merges for p in (*m, "".join(m))):  # `tokenizers` wants an id
        vocab.setdefault(part, len(vocab))  # for every merge part (llama.cpp does not)
    tok = tokenizers.Tokenizer(BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


@pytest.mark.parametrize("vocab", [VOCAB, VOCAB[:-2]])  # with multi-byte characters, without
def test_char_vocabulary_tokenizes_as_shapeflow(tmp_path, vocab):
    chars = CharTokenizer(vocab)
    path = sf.io.export_gguf(_char_model(vocab), chars, tmp_path / "c.gguf")
    bpe = _bpe_from_gguf(_fields(gguf.GGUFReader(path)))
    text = "Hello, World!\nA café’s crème? yes;" if "é" in vocab else "Hello, World!\nNo: yes."
    text = "".join(ch for ch in text if ch in chars.stoi)
    assert bpe.encode(text).ids == chars.encode(text)  # (so no id past the vocabulary)
    assert bpe.decode(chars.encode(text)) == text


def test_hf_tokenizer_vocabulary_and_padding(tmp_path):
    from tests.models.hf_tiny import train_tokenizer

    trained = train_tokenizer()
    (tmp_path / "tiny").mkdir()
    trained.save(str(tmp_path / "tiny" / "tokenizer.json"))
    tok = load_tokenizer(tmp_path / "tiny")
    n = tok.vocab_size
    sf.manual_seed(0)
    model = GPT(vocab_size=n + 8, block_size=32, n_layer=1, n_head=2, n_embd=32)  # padded
    path = sf.io.export_gguf(model, tok, tmp_path / "h.gguf", dtype="f16")
    f = _fields(gguf.GGUFReader(path))
    tokens, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"]
    assert tokens[:n] == tok.tokens() and len(tokens) == n + 8
    eos = trained.token_to_id("<|endoftext|>")
    assert types[eos] == gguf.TokenType.CONTROL and types[n:] == [gguf.TokenType.UNUSED] * 8
    assert f["tokenizer.ggml.merges"] == tok.merges() and len(tok.merges()) > 10
    assert f["tokenizer.ggml.eos_token_id"] == eos == f["tokenizer.ggml.bos_token_id"]
    assert f["general.name"] == "tiny"
    text = "The lazy café 😀 fox"
    assert _bpe_from_gguf(f).encode(text).ids == trained.encode(text).ids


def test_q8_0_blocks_equal_ggml_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 96)).astype(np.float32)
    x[0, :32] = 0.0  # a zero block: scale 0, no division by zero
    x[1, :32] = np.arange(32) - 15.5  # values landing on .5 after scaling: rounded away
    x[2, :32] = np.linspace(-127, 127, 32) / 2
    ours = quantize_q8_0(x)
    assert ours.dtype == np.uint8 and ours.shape == (8, 96 // 32 * 34)
    np.testing.assert_array_equal(ours, gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0))
    back = gguf.quants.dequantize(ours, gguf.GGMLQuantizationType.Q8_0)
    assert np.all(np.abs(back - x) <= np.abs(x).reshape(8, 3, 32).max(-1).repeat(32, 1) / 127)


def test_atomic_write_and_bad_arguments(tmp_path):
    model, chars = _char_model(), CharTokenizer(VOCAB)
    path = tmp_path / "m.gguf"
    sf.io.export_gguf(model, chars, path)
    before = path.read_bytes()
    with pytest.raises(ArgumentError, match="dtype"):
        sf.io.export_gguf(model, chars, path, dtype="q4_0")
    with pytest.raises(ArgumentError, match="tokens"):  # more tokens than embedding rows
        sf.io.export_gguf(_char_model(VOCAB[:10]), chars, path)
    with pytest.raises(ArgumentError, match="GPT"):
        sf.io.export_gguf(sf.nn.Linear(2, 2), chars, path)
    with pytest.raises(CheckpointError, match="folder"):
        sf.io.export_gguf(model, chars, tmp_path / "absent" / "m.gguf")
    assert path.read_bytes() == before  # untouched by the failures
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]  # no temp files left
    sf.io.export_gguf(model, chars, path, dtype="f16")  # replaced whole
    assert gguf.GGUFReader(path).fields["general.file_type"].contents() == 1


def test_model_without_biases_exports_zero_biases(tmp_path):
    model = _char_model(bias=False)
    path = sf.io.export_gguf(model, CharTokenizer(VOCAB), tmp_path / "nb.gguf")
    got = _tensors(gguf.GGUFReader(path))
    assert not got["blk.0.attn_qkv.bias"][0].any() and not got["output_norm.bias"][0].any()
    assert got["blk.0.attn_qkv.bias"][2] == [3 * model.config.n_embd]


def _llama(path, n_ctx=64, **kw):
    llama_cpp = pytest.importorskip("llama_cpp")  # llama-cpp-python: not a test dependency
    return llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=1, n_batch=n_ctx, verbose=False,
                           **kw)


def test_llama_cpp_runs_the_file(tmp_path):
    """The exported file in llama.cpp (llama-cpp-python, when installed): its tokenizer gives
    shapeflow's ids, its logits agree (its GELU reads a half-precision table: ~1e-2 at
    most), greedy decoding gives shapeflow's tokens; f16 and q8_0 within their error."""
    pytest.importorskip("llama_cpp")
    chars = CharTokenizer(VOCAB)
    sf.manual_seed(1)
    model = GPT(vocab_size=len(VOCAB), block_size=64, n_layer=2, n_head=4, n_embd=64,
                activation="gelu_tanh")
    with sf.no_grad():
        for p in model.parameters():  # larger weights: logits of a few units, clear argmax
            if p.ndim == 2:
                p.mul_(6)
    llm = _llama(sf.io.export_gguf(model, chars, tmp_path / "l.gguf"), logits_all=True)
    text = "Hello, World!\nA café’s tea? yes;  two  spaces\n\nend"
    assert llm.tokenize(text.encode(), add_bos=False, special=False) == chars.encode(text)
    assert llm.detokenize(chars.encode(text)).decode() == text
    prompt = chars.encode("The fox, and ")
    with sf.no_grad():
        ours = model(sf.tensor([prompt]))[0].numpy()[0]
    assert np.abs(ours).max() > 2.0
    llm.eval(prompt)
    np.testing.assert_allclose(np.asarray(llm.scores[: len(prompt)]), ours, atol=2e-2)
    llm.reset()
    got = []
    for tok in llm.generate(prompt, top_k=1, temp=0.0):
        got.append(tok)
        if len(got) == 20:
            break
    want = model.generate(sf.tensor([prompt]), 20, do_sample=False)[0].tolist()[len(prompt):]
    assert got == want
    for dtype, atol in (("f16", 5e-2), ("q8_0", 0.3)):
        low = _llama(sf.io.export_gguf(model, chars, tmp_path / f"{dtype}.gguf", dtype=dtype),
                     logits_all=True)
        low.eval(prompt)
        np.testing.assert_allclose(np.asarray(low.scores[: len(prompt)]), ours, atol=atol)


def test_llama_cpp_tokenizes_as_the_hf_tokenizer(tmp_path):
    pytest.importorskip("llama_cpp")
    from tests.models.hf_tiny import train_tokenizer

    (tmp_path / "t").mkdir()
    train_tokenizer().save(str(tmp_path / "t" / "tokenizer.json"))
    tok = load_tokenizer(tmp_path / "t")
    model = GPT(vocab_size=tok.vocab_size + 8, block_size=32, n_layer=1, n_head=2, n_embd=32)
    llm = _llama(sf.io.export_gguf(model, tok, tmp_path / "h.gguf"), n_ctx=32)
    for text in ("The lazy café 😀 fox", "Hello world,\n\n  this is  ünïcödé!", "zq 12 don't"):
        ids = tok.encode(text)
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == ids
        assert llm.detokenize(ids).decode() == text
    assert llm.token_eos() == tok.eos_token_id
