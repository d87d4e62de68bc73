"""`export_gguf`: a GPT and its tokenizer as a GGUF v3 file that llama.cpp runs.

The layout is llama.cpp's `gpt2` architecture, as its convert_hf_to_gguf.py writes a GPT-2:
tensor names `token_embd`, `position_embd`, `blk.N.attn_norm` ... `output_norm`, every
weight in PyTorch's Linear layout [out, in] (GGUF's ne reversed), no `output.weight` (the
head is tied: llama.cpp reuses `token_embd`). Norms, biases and the position embedding stay
float32 in every dtype, as the converter keeps them; "f16" and "q8_0" apply to the other
matrices (q8_0: blocks of 32 with a float16 scale, falling back to f16 for a row length
that is no multiple of 32, as the converter does).

The vocabulary is byte-level BPE ("gpt2"): a Hugging Face GPT-2 tokenizer goes as it is; a
character vocabulary (`shapeflow train gpt`) goes as one token per character, spelled in
GPT-2's byte-to-unicode alphabet ("Ġ" is a space, "Ċ" a newline) so llama.cpp maps text to
the same ids, with merges that rebuild only its multi-byte characters. llama.cpp's gpt2
loader wants at least one merge: a vocabulary without multi-byte characters gets one that
can never apply. Having no end-of-text token, such a vocabulary leaves llama.cpp at its gpt2
default eos id (11): stop on a token count there. llama.cpp's gpt2 runs the tanh GELU; a
model trained with the exact one (shapeflow's default) differs there by up to ~1e-3 per
activation.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, CheckpointError, ShapeflowError

DTYPES = ("f32", "f16", "q8_0")
QK8_0 = 32  # values per q8_0 block
ARCH = "gpt2"


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable unicode characters."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {b: chr(b if b in keep else next(extra)) for b in range(256)}


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """ggml's Q8_0 of a float array whose last dim is a multiple of 32: per block of 32, a
    float16 scale d = max|x| / 127 then 32 int8 round(x / d); uint8 [..., n / 32 * 34]."""
    blocks = x.astype(np.float32).reshape(-1, QK8_0)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127.0
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, 0.0, 1.0 / d).astype(np.float32)
    v = blocks * inv
    a = np.abs(v)  # roundf: halves away from zero (np.round takes them to even)
    q = (np.sign(v) * (np.floor(a) + np.floor(2 * (a - np.floor(a))))).astype(np.int8)
    out = np.concatenate([d.astype(np.float16).view(np.uint8), q.view(np.uint8)], axis=1)
    return out.reshape(*x.shape[:-1], x.shape[-1] // QK8_0 * (2 + QK8_0))


def _quantize(arr: np.ndarray, dtype: str):
    """(array to write, its GGML type) for one tensor of the file."""
    import gguf

    T = gguf.GGMLQuantizationType
    if dtype == "f16":
        return arr.astype(np.float16), T.F16
    if dtype == "q8_0" and arr.shape[-1] % QK8_0 == 0:
        try:
            from gguf.quants import quantize
            return quantize(arr, T.Q8_0), T.Q8_0
        except (ImportError, NotImplementedError):  # an older gguf: ggml's reference here
            return quantize_q8_0(arr), T.Q8_0
    if dtype == "q8_0":
        return arr.astype(np.float16), T.F16
    return arr.astype(np.float32), T.F32


def gguf_tensors(model) -> dict[str, np.ndarray]:
    """llama.cpp's gpt2 tensors of a shapeflow GPT, float32 in [out, in] layout; a model
    without biases gets zero ones (what it computes), since llama.cpp requires them."""
    sd = {k: t.detach().float().numpy() for k, t in model.state_dict().items()}
    c = model.config

    def get(key: str, shape: tuple[int, ...]) -> np.ndarray:
        return np.ascontiguousarray(sd[key]) if key in sd else np.zeros(shape, np.float32)

    out = {"token_embd.weight": get("transformer.wte.weight", ()),
           "position_embd.weight": get("transformer.wpe.weight", ())}
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for i in range(c.n_layer):
        for ours, theirs in names.items():
            w = get(f"transformer.h.{i}.{ours}.weight", ())
            out[f"blk.{i}.{theirs}.weight"] = w
            out[f"blk.{i}.{theirs}.bias"] = get(f"transformer.h.{i}.{ours}.bias", w.shape[:1])
    w = get("transformer.ln_f.weight", ())
    out["output_norm.weight"] = w
    out["output_norm.bias"] = get("transformer.ln_f.bias", w.shape)
    return out


def vocabulary(tokenizer, vocab_size: int) -> tuple[list[str], list[int], list[str], dict]:
    """(tokens, token types, merges, special ids) for the tokenizer, padded to the model's
    vocab_size with unused "[PADn]" tokens as the converter pads GPT-2's."""
    import gguf

    TT = gguf.TokenType
    special: dict[str, int] = {}
    if hasattr(tokenizer, "merges") and hasattr(tokenizer, "tokens"):  # HFTokenizer
        tokens = tokenizer.tokens()
        specials = tokenizer.special_ids()
        types = [int(TT.CONTROL if i in specials else TT.NORMAL) for i in range(len(tokens))]
        merges = tokenizer.merges()
        model = "gpt2"
    elif hasattr(tokenizer, "vocab"):  # CharTokenizer: one token per character
        b2u = byte_to_unicode()
        spelled = ["".join(b2u[b] for b in ch.encode("utf-8")) for ch in tokenizer.vocab]
        tokens, types = spelled, [int(TT.NORMAL)] * len(spelled)
        merges = []
        for s in spelled:  # rebuild each multi-byte character left to right
            merges += [f"{s[:k]} {s[k]}" for k in range(1, len(s))]
        merges = list(dict.fromkeys(merges)) or ["ĠĠ ĠĠ"]  # "ĠĠ" is never a symbol: inert
        model = "gpt2"
    else:
        raise ArgumentError(f"export_gguf: tokenizer {type(tokenizer).__name__} is neither a "
                            "CharTokenizer nor an HFTokenizer", op="export_gguf")
    if len(tokens) > vocab_size:
        raise ArgumentError(f"export_gguf: the tokenizer has {len(tokens)} tokens, the model "
                            f"{vocab_size} embedding rows", op="export_gguf",
                            hint="export the tokenizer the model was trained with")
    for i in range(len(tokens), vocab_size):
        tokens.append(f"[PAD{i}]")
        types.append(int(TT.UNUSED))
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None:
        special = {"bos": eos, "eos": eos}  # GPT-2's <|endoftext|> is both
    return tokens, types, merges, {"model": model, **special}


def export_gguf(model, tokenizer, path: str | os.PathLike, dtype: str = "f32") -> Path:
    """Write `model` (a shapeflow GPT) and `tokenizer` as GGUF for llama.cpp's gpt2
    architecture; dtype "f32", "f16" or "q8_0". The file is replaced atomically."""
    if dtype not in DTYPES:
        raise ArgumentError(f"export_gguf: dtype must be one of {', '.join(DTYPES)}, got "
                            f"{dtype!r}", op="export_gguf")
    c = getattr(model, "config", None)
    if c is None or not hasattr(c, "n_layer") or not hasattr(model, "transformer"):
        raise ArgumentError(f"export_gguf: expected a shapeflow GPT, got {type(model).__name__}",
                            op="export_gguf")
    try:
        import gguf
    except ImportError:
        raise ShapeflowError("export_gguf needs the 'gguf' package", op="export_gguf",
                             hint="pip install 'shapeflow[gguf]'") from None
    tokens, types, merges, special = vocabulary(tokenizer, c.vocab_size)
    tensors = gguf_tensors(model)
    path = Path(path)
    if not path.parent.is_dir():
        raise CheckpointError(f"cannot write {path}: its folder does not exist",
                              op="export_gguf", hint="create the folder first")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, ARCH)
        w.add_name(getattr(tokenizer, "name", None) or "shapeflow-gpt")
        w.add_context_length(c.block_size)
        w.add_embedding_length(c.n_embd)
        w.add_feed_forward_length(4 * c.n_embd)
        w.add_block_count(c.n_layer)
        w.add_head_count(c.n_head)
        w.add_layer_norm_eps(float(getattr(c, "layer_norm_eps", 1e-5)))
        ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[dtype]
        w.add_file_type(int(ftype))
        if dtype == "q8_0":
            w.add_quantization_version(gguf.GGML_QUANT_VERSION)
        w.add_tokenizer_model(special["model"])
        w.add_tokenizer_pre("gpt-2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        if "eos" in special:
            w.add_bos_token_id(special["bos"])
            w.add_eos_token_id(special["eos"])
        w.add_add_bos_token(False)  # GPT-2 adds no bos
        for name, arr in tensors.items():
            # norms, biases and the position table stay float32, as the converter keeps them
            keep = arr.ndim == 1 or name.endswith("_norm.weight") or name.startswith("position")
            data, qtype = _quantize(arr, "f32" if keep else dtype)
            w.add_tensor(name, data, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise CheckpointError(f"cannot write {path}: {err.strerror or err}", op="export_gguf",
                              hint="check that its folder is writable and has space") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
