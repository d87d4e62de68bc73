"""Hugging Face GPT-2 directories (config.json + model.safetensors) as shapeflow GPTs.

GPT-2's layout is nanoGPT's: the same module names under `transformer.`, but its linear
layers are `Conv1D`s that store the weight as [in, out], the transpose of a Linear's. The
causal-mask buffers (`attn.bias`, `attn.masked_bias`) carry no weights and are skipped;
`lm_head` is tied to `wte`. GPT-2's "gelu_new" is the tanh approximation, so a loaded model
gets `activation="gelu_tanh"`, while shapeflow's own GPTs keep the exact GELU.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import CheckpointError
from .gpt import GPT

ARCHITECTURES = ("GPT2LMHeadModel", "GPT2Model")
# config.json's activation_function -> GPTConfig.activation (HF's ACT2FN names)
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_fast": "gelu_tanh", "gelu": "gelu"}
CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight",
          ".mlp.c_proj.weight")  # stored [in, out] by HF's Conv1D
SKIPPED = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers, not weights
HINT = "a Hugging Face GPT-2 directory holds config.json and model.safetensors " \
       "(GPT2LMHeadModel.save_pretrained writes one)"


def _fail(path, message: str, hint: str = HINT) -> CheckpointError:
    return CheckpointError(f"{path}: {message}", op="GPT.from_pretrained", hint=hint)


def read_config(path: str | os.PathLike) -> dict:
    """config.json of an HF directory, checked to be a GPT-2 this GPT computes exactly."""
    folder = Path(path)
    if not folder.is_dir():
        raise _fail(path, "not a directory" if folder.exists() else "no such directory")
    file = folder / "config.json"
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError:
        raise _fail(path, "no config.json") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _fail(file, f"not a readable JSON config ({err})") from None
    if not isinstance(config, dict):
        raise _fail(file, "config.json is not a JSON object")
    archs = config.get("architectures") or []
    if config.get("model_type") != "gpt2" and not set(archs) & set(ARCHITECTURES):
        found = config.get("model_type") or ", ".join(map(str, archs)) or "none named"
        raise _fail(path, f"unsupported architecture {found!r}",
                    hint="GPT.from_pretrained loads the GPT-2 layout (model_type 'gpt2', "
                    "GPT2LMHeadModel)")
    act = config.get("activation_function", "gelu_new")
    n_embd = config.get("n_embd", 768)
    unsupported = [
        (act not in ACTIVATIONS, f"activation_function {act!r} (supported: "
                                 f"{', '.join(ACTIVATIONS)})"),
        (config.get("n_inner") not in (None, 4 * n_embd), f"n_inner {config.get('n_inner')} "
                                                          f"(shapeflow's MLP is 4 x n_embd)"),
        (not config.get("scale_attn_weights", True), "scale_attn_weights false"),
        (config.get("scale_attn_by_inverse_layer_idx", False),
         "scale_attn_by_inverse_layer_idx true"),
        (config.get("add_cross_attention", False), "add_cross_attention true"),
        (not config.get("tie_word_embeddings", True), "tie_word_embeddings false"),
    ]
    bad = [what for cond, what in unsupported if cond]
    if bad:
        raise _fail(file, "a GPT-2 variant shapeflow's GPT does not compute: " + "; ".join(bad),
                    hint="only the GPT-2 layout with a tied lm_head and 4 x n_embd MLP loads")
    for key in ("n_layer", "n_head", "n_embd", "vocab_size"):
        if not isinstance(config.get(key, 1), int) or config.get(key, 1) <= 0:
            raise _fail(file, f"{key} must be a positive integer, got {config.get(key)!r}")
    return config


def gpt_kwargs(config: dict) -> dict:
    """GPT(**kwargs) for an HF GPT-2 config (defaults: GPT2Config's)."""
    return dict(vocab_size=config.get("vocab_size", 50257),
                block_size=config.get("n_positions", config.get("n_ctx", 1024)),
                n_layer=config.get("n_layer", 12), n_head=config.get("n_head", 12),
                n_embd=config.get("n_embd", 768), dropout=0.0, bias=True,
                activation=ACTIVATIONS[config.get("activation_function", "gelu_new")],
                layer_norm_eps=float(config.get("layer_norm_epsilon", 1e-5)))


def _weight_files(folder: Path) -> list[Path]:
    """The weight files: one safetensors, an index's shards, or pytorch_model.bin."""
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            return [folder / name for name in sorted(set(weight_map.values()))]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise _fail(index, f"not a safetensors index ({err!r})") from None
    if (folder / "pytorch_model.bin").is_file():
        return [folder / "pytorch_model.bin"]
    present = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
    raise _fail(folder, f"no model.safetensors (or pytorch_model.bin); found {present}")


def _read_weights(folder: Path) -> dict[str, np.ndarray]:
    from ..io.checkpoint import load

    arrays: dict[str, np.ndarray] = {}
    for file in _weight_files(folder):
        obj = load(str(file))  # malformed files raise CheckpointError, never a traceback
        if not isinstance(obj, dict):
            raise _fail(file, f"holds a {type(obj).__name__}, not a dict of tensors")
        for key, value in obj.items():
            arr = value.numpy() if hasattr(value, "numpy") else value
            if not isinstance(arr, np.ndarray):
                raise _fail(file, f"entry {key!r} is a {type(value).__name__}, not a tensor")
            arrays[str(key)] = arr
    return arrays


def hf_to_gpt_state(arrays: dict[str, np.ndarray], path) -> dict[str, np.ndarray]:
    """HF GPT-2 names and layouts -> shapeflow GPT state-dict keys (Conv1D transposed)."""
    state = {}
    lm_head = None
    for key, arr in arrays.items():
        name = key.removeprefix("transformer.")
        if name.endswith(SKIPPED):
            continue
        if name == "lm_head.weight":
            lm_head = arr
            continue
        if name.endswith(CONV1D):
            if arr.ndim != 2:
                raise _fail(path, f"{key} has shape {list(arr.shape)}, a Conv1D weight is 2-D")
            arr = arr.T
        state["transformer." + name] = np.ascontiguousarray(arr, dtype=np.float32)
    wte = state.get("transformer.wte.weight")
    if lm_head is not None and (wte is None or lm_head.shape != wte.shape
                                or not np.array_equal(lm_head.astype(np.float32), wte)):
        raise _fail(path, "lm_head.weight differs from transformer.wte.weight",
                    hint="shapeflow's GPT ties lm_head to the token embedding, as GPT-2 does")
    if wte is not None:
        state["lm_head.weight"] = wte
    return state


def load_hf_gpt2(path: str | os.PathLike) -> GPT:
    """A GPT with the weights of the HF GPT-2 directory at `path`, in eval mode.

    Everything is read and checked before a model is returned: a bad directory raises
    CheckpointError and leaves nothing behind."""
    config = read_config(path)
    arrays = _read_weights(Path(path))
    state = hf_to_gpt_state(arrays, path)
    # built on meta and given empty memory: no random init of weights about to be replaced
    model = GPT(**gpt_kwargs(config), device="meta").to_empty(device="cpu")
    expected = {k: tuple(t.shape) for k, t in model.state_dict().items()}
    problems = [f"missing {k}" for k in expected if k not in state]
    problems += [f"unexpected {k}" for k in state if k not in expected]
    problems += [f"{k}: shape {list(v.shape)}, config.json says {list(expected[k])}"
                 for k, v in state.items() if k in expected and v.shape != expected[k]]
    if problems:
        more = f" (+{len(problems) - 6} more)" if len(problems) > 6 else ""
        raise _fail(path, "weights do not fit config.json: " + "; ".join(problems[:6]) + more,
                    hint="the weights and config.json must come from the same GPT-2")
    from ..tensor import from_numpy

    model.load_state_dict({k: from_numpy(v) for k, v in state.items()})
    return model.eval()


def hf_config(model: GPT) -> dict:
    """config.json for `model` as transformers' GPT2Config writes it."""
    c = model.config
    act = {"gelu_tanh": "gelu_new", "gelu": "gelu"}[c.activation]
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": c.vocab_size, "n_positions": c.block_size, "n_embd": c.n_embd,
            "n_layer": c.n_layer, "n_head": c.n_head, "n_inner": None,
            "activation_function": act, "layer_norm_epsilon": c.layer_norm_eps,
            "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "attn_pdrop": c.dropout,
            "initializer_range": 0.02, "scale_attn_weights": True,
            "tie_word_embeddings": True, "dtype": "float32"}


def save_hf_gpt2(model: GPT, path: str | os.PathLike) -> None:
    """Write config.json and model.safetensors; each file is replaced atomically."""
    from safetensors.numpy import save as st_save

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for key, t in model.state_dict().items():
        if key == "lm_head.weight":  # tied: GPT-2 files keep only wte
            continue
        arr = t.float().numpy() if hasattr(t, "float") else np.asarray(t)
        if key.endswith(CONV1D):
            arr = arr.T
        tensors[key] = np.ascontiguousarray(arr, dtype=np.float32)
    if not model.config.bias:  # GPT-2 has biases: zeros compute what bias=False does
        for key, t in model.state_dict().items():
            if key.endswith(".weight") and key != "lm_head.weight" and \
                    key.rsplit(".", 2)[-2] in ("c_attn", "c_proj", "c_fc", "ln_1", "ln_2", "ln_f"):
                tensors[key[:-len("weight")] + "bias"] = np.zeros(t.shape[0], np.float32)
    _write_atomic(folder / "model.safetensors", st_save(tensors, metadata={"format": "pt"}))
    _write_atomic(folder / "config.json",
                  (json.dumps(hf_config(model), indent=2) + "\n").encode())


def _write_atomic(file: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
