"""Quantized state dicts in safetensors: data, scales and the scheme of each quantized module.

The file is an ordinary shapeflow checkpoint (io/checkpoint.py: atomic write, no pickle)
holding {"quant": {"format", "version", "modules": {name: config}}, "state_dict": ...}.
Loading checks every config field against what `quantize()` makes and against the tensors
in the file (shapes, dtypes, finite positive scales) before it allocates or changes anything,
then rebuilds the quantized modules from their configs and loads the state dict, which
checks every key, shape and dtype before it copies anything.
"""

from __future__ import annotations

import copy

import numpy as np

from ..errors import CheckpointError
from ..io.checkpoint import load as _load
from ..io.checkpoint import save as _save
from ..io.header import short
from ..nn.module import Module
from ..tensor import Tensor
from .convert import _kind
from .modules import QuantizedEmbedding, QuantizedLinear, _layout
from .qtensor import scale_dtype
from .schemes import SCHEMES, Scheme

FORMAT = "shapeflow.quant"
VERSION = 1
_KINDS = {"linear": QuantizedLinear, "embedding": QuantizedEmbedding}
# per kind: the config fields naming the weight's (rows, cols), and all its config fields
_DIMS = {"linear": ("out_features", "in_features"),
         "embedding": ("num_embeddings", "embedding_dim")}
_FIELDS = {"linear": {"kind", "scheme", "in_features", "out_features", "bias", "static_input"},
           "embedding": {"kind", "scheme", "num_embeddings", "embedding_dim", "padding_idx"}}


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
    version = meta.get("version")
    if type(version) is not int or version != VERSION:
        raise CheckpointError(f"cannot load {path}: quantized checkpoint version "
                              f"{short(version)} is not {VERSION}", op="load")
    configs, state = meta["modules"], obj["state_dict"]
    if not (isinstance(state, dict) and all(isinstance(k, str) for k in state)):
        raise CheckpointError(f"cannot load {path}: its state_dict is not a dict of "
                              "name -> tensor", op="load")
    # everything checked before anything is allocated from the file's claims
    for name, config in configs.items():
        _check_module(path, name, config, state)
    target = model
    mine = quant_config(model)
    if mine != configs:
        if mine:
            raise CheckpointError(
                f"cannot load {path}: the model is quantized differently from the file "
                f"({_difference(configs, mine)}; file: {_summary(configs)}; model: "
                f"{_summary(mine)})",
                op="load", hint="load into the float model to get the file's quantization")
        _check_fits(path, model, configs)
        target = _rebuild(model, configs, path)
    target.load_state_dict(state)
    return target


def _bad(path, name: str, what: str) -> CheckpointError:
    return CheckpointError(f"cannot load {path}: quantized module {name!r}: {what}", op="load")


def _check_module(path, name, config, state: dict) -> None:
    """The config of module `name` is one quantize() makes, and the file's tensors fit it."""
    if not name:
        raise _bad(path, name, "the model itself cannot be a quantized module")
    if not isinstance(config, dict):
        raise _bad(path, name, f"its config is {short(config)}, not an object")
    kind = config.get("kind")
    if not (isinstance(kind, str) and kind in _FIELDS):
        raise _bad(path, name, f"field 'kind' is {short(kind)}, not one of {', '.join(_FIELDS)}")
    fields = _FIELDS[kind]
    for key in config:
        if key not in fields:
            raise _bad(path, name, f"unknown field {short(key)} in a {kind} config")
    missing = sorted(fields - config.keys())
    if missing:
        raise _bad(path, name, f"field {missing[0]!r} missing from its {kind} config")
    scheme = config["scheme"]
    if not (isinstance(scheme, str) and scheme in SCHEMES):
        raise _bad(path, name, f"field 'scheme' is {short(scheme)}, not a scheme quantize() "
                               f"knows ({', '.join(SCHEMES)})")
    s = SCHEMES[scheme]
    rows_field, cols_field = _DIMS[kind]
    for key in (rows_field, cols_field):
        if type(config[key]) is not int or config[key] < 0:
            raise _bad(path, name, f"field {key!r} is {short(config[key])}, not an integer >= 0")
    rows, cols = config[rows_field], config[cols_field]
    for key in ("bias", "static_input") if kind == "linear" else ():
        if type(config[key]) is not bool:
            raise _bad(path, name, f"field {key!r} is {short(config[key])}, not true/false")
    if kind == "linear" and config["static_input"] and s.activations != "fp8-e4m3":
        raise _bad(path, name, f"field 'static_input' is true under scheme {s.name}, which "
                               "has no static input scale (only fp8-e4m3 calibrates one)")
    pad = config.get("padding_idx")
    if pad is not None and not (type(pad) is int and 0 <= pad < rows):
        raise _bad(path, name, f"field 'padding_idx' is {short(pad)}, not None or a row "
                               f"index below {rows_field}={rows}")
    if s.group_size is not None and cols % s.group_size:
        raise _bad(path, name, f"field {cols_field!r} is {cols}, not a multiple of "
                               f"{s.group_size}: {s.name} stores one scale per "
                               f"{s.group_size} inputs, and quantize() refuses such a layer")
    _check_tensors(path, name, config, s, state)


def _check_tensors(path, name: str, config: dict, s: Scheme, state: dict) -> None:
    """Each tensor of module `name` present, of the dtype and shape its config gives, with
    finite positive scales (and, for fp8, no NaN codes)."""
    kind = config["kind"]
    rows_field, cols_field = _DIMS[kind]
    qshape, qnp, sshape = _layout(s, (config[rows_field], config[cols_field]))
    want = {"weight_qdata": (qshape, qnp),
            "weight_scale": (sshape, scale_dtype(s.weight, s.group_size))}
    for flag, attr, shape in (("bias", "bias", (config.get(rows_field),)),
                              ("static_input", "input_scale", ())):
        if kind == "linear" and config[flag]:
            want[attr] = (shape, np.float32)
        elif kind == "linear" and f"{name}.{attr}" in state:
            raise _bad(path, name, f"field {flag!r} is false, but the file holds tensor "
                                   f"'{name}.{attr}'")
    for attr, (shape, dtype) in want.items():
        key = f"{name}.{attr}"
        t = state.get(key)
        if not isinstance(t, Tensor):
            raise _bad(path, name, f"tensor {key!r} missing" if t is None else
                       f"{key!r} is a {type(t).__name__}, not a tensor")
        if t.dtype.np != np.dtype(dtype):
            raise _bad(path, name, f"tensor {key!r} is {t.dtype}, scheme {s.name} stores it "
                                   f"as {np.dtype(dtype).name}")
        if tuple(t.shape) != tuple(shape):
            raise _bad(path, name, f"tensor {key!r} is {list(t.shape)}, but the config "
                                   f"('{rows_field}'={config[rows_field]}, "
                                   f"'{cols_field}'={config[cols_field]}, scheme {s.name}) "
                                   f"makes it {list(shape)}")
        data = t._data
        if data is None:
            continue
        if attr in ("weight_scale", "input_scale"):
            ok = np.isfinite(data) & (data > 0)
            if not ok.all():
                at = tuple(int(i) for i in np.argwhere(~ok)[0])
                raise _bad(path, name, f"tensor {key!r} holds {int((~ok).sum())} scale(s) "
                                       f"that are NaN, infinite, zero or negative (first "
                                       f"{data[at]} at {list(at)}); quantize() makes only "
                                       "finite positive scales")
        elif attr == "weight_qdata" and s.weight == "fp8-e4m3" and ((data & 0x7F) == 0x7F).any():
            raise _bad(path, name, f"tensor {key!r} holds fp8 NaN codes, which quantize() "
                                   "never makes (it clamps to the largest finite value)")


def _check_fits(path, model: Module, configs: dict) -> None:
    """Each quantized module of the file replaces a float one quantize() would replace,
    of the same sizes (else the rebuilt model would fail at its first forward)."""
    names = dict(model.named_modules())
    for name, config in configs.items():
        m = names.get(name)
        if m is None:
            raise _bad(path, name, "the model has no such module")
        kind = config["kind"]
        if _kind(m, SCHEMES[config["scheme"]]) != kind:
            raise _bad(path, name, f"field 'kind' is {kind!r}, but the model's module is a "
                                   f"{type(m).__name__}, which quantize() does not make one")
        if kind == "linear":
            have = {"in_features": m.in_features, "out_features": m.out_features,
                    "bias": m.bias is not None}
        else:
            have = {"num_embeddings": m.num_embeddings, "embedding_dim": m.embedding_dim,
                    "padding_idx": m.padding_idx}
        for key, value in have.items():
            if config[key] != value:
                raise _bad(path, name, f"field {key!r} is {short(config[key])}, but the "
                                       f"model's {type(m).__name__} has {short(value)}")


def _difference(file: dict, model: dict) -> str:
    """The first way two quant configs differ, naming the module and field."""
    for name in sorted(file.keys() | model.keys()):
        if name not in model or name not in file:
            return f"module {name!r} is quantized only in the {'file' if name in file else 'model'}"
        for key in sorted(file[name].keys() | model[name].keys()):
            if file[name].get(key) != model[name].get(key):
                return (f"module {name!r} field {key!r}: file {short(file[name].get(key))}, "
                        f"model {short(model[name].get(key))}")
    return "no difference"


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
