"""quantize(model, scheme): a copy of the model with its Linear (and Embedding) layers quantized."""

from __future__ import annotations

import copy

import numpy as np

from ..autograd import no_grad
from ..errors import ShapeError, ShapeflowError
from ..nn.linear import Linear, NonDynamicallyQuantizableLinear
from ..nn.module import Module
from ..nn.sparse import Embedding
from ..tensor import Tensor
from .modules import _FP8_MAX, QuantizedEmbedding, QuantizedLinear
from .qtensor import QuantError
from .schemes import Scheme, get_scheme


def eligible(model: Module, scheme: str | Scheme) -> list[str]:
    """Qualified names of the modules `quantize(model, scheme)` replaces, in model order."""
    s = get_scheme(scheme)
    return [name for name, m in model.named_modules() if name and _kind(m, s) is not None]


def _kind(m: Module, s: Scheme) -> str | None:
    # MultiheadAttention reads out_proj.weight itself: its Linear must stay float
    if isinstance(m, Linear) and not isinstance(m, NonDynamicallyQuantizableLinear):
        return "linear"
    if isinstance(m, Embedding) and s.embedding and not m.max_norm:
        return "embedding"
    return None


def _split(name: str) -> tuple[str, str]:
    parent, _, attr = name.rpartition(".")
    return parent, attr


def quantize(model: Module, scheme: str | Scheme, *, calibration=None, modules=None,
             percentile: float | None = None) -> Module:
    """A quantized deep copy of `model` (the model itself is untouched).

    `modules`: None for every eligible Linear/Embedding, else the qualified names (as
    `model.named_modules()` gives them) to quantize; the rest stays float. `calibration`:
    an iterable of input batches (tuples or tensors) run through the float model to fix
    static activation scales (fp8-e4m3), by max |x| or by the `percentile` of |x|.
    """
    s = get_scheme(scheme)
    if not isinstance(model, Module):
        raise QuantError(f"quantize: expected a shapeflow Module, got {type(model).__name__}",
                         op="quantize")
    all_names = dict(model.named_modules())
    targets = eligible(model, s)
    if modules is not None:
        if isinstance(modules, str):
            modules = [modules]
        wanted = list(dict.fromkeys(modules))
        for name in wanted:
            if name not in all_names:
                raise QuantError(f"quantize: the model has no module {name!r}", op="quantize",
                                 hint=f"names as model.named_modules() gives them, e.g. "
                                      f"{', '.join(repr(t) for t in targets[:3])}")
            if name not in targets:
                raise QuantError(
                    f"quantize: module {name!r} ({type(all_names[name]).__name__}) cannot be "
                    f"quantized by scheme {s.name!r}: it quantizes Linear"
                    f"{' and Embedding' if s.embedding else ''} layers", op="quantize")
        chosen = set(wanted)
        targets = [t for t in targets if t in chosen]
    if percentile is not None and not 0 < percentile <= 100:
        raise QuantError(f"quantize: percentile must be in (0, 100], got {percentile}",
                         op="quantize")

    if s.group_size is not None:
        for name in targets:
            m = all_names[name]
            cols = m.in_features if isinstance(m, Linear) else m.embedding_dim
            if cols % s.group_size:
                raise ShapeError(
                    f"quantize: {s.name} stores one scale per {s.group_size} inputs, and "
                    f"{type(m).__name__} {name!r} has {cols} (not a multiple of "
                    f"{s.group_size})", op="quantize",
                    hint="leave it float: pass modules= without it (sf.quant.eligible(model, "
                         "scheme) lists the candidates), or use int8-weight")
    q = copy.deepcopy(model)
    names = dict(q.named_modules())
    scales = {}
    if s.activations == "fp8-e4m3" and calibration is not None:
        linears = [t for t in targets if _kind(names[t], s) == "linear"]
        scales = _calibrate(q, linears, calibration, percentile, _FP8_MAX[s.activations])
    memo: dict = {}
    for name in targets:
        m = names[name]
        if _kind(m, s) == "linear":
            new = QuantizedLinear.from_float(m, s, input_scale=scales.get(name), name=name,
                                             memo=memo)
        else:
            new = QuantizedEmbedding.from_float(m, s, name=name, memo=memo)
        parent, attr = _split(name)
        setattr(q.get_submodule(parent) if parent else q, attr, new)
    return q


def _batch_args(batch, i: int) -> tuple:
    if isinstance(batch, Tensor):
        return (batch,)
    if isinstance(batch, (tuple, list)) and all(isinstance(b, Tensor) for b in batch):
        return tuple(batch)
    raise QuantError(f"quantize: calibration batch {i} is a {type(batch).__name__}; each "
                     "batch is a Tensor or a tuple of the model's input Tensors",
                     op="quantize")


def _calibrate(model: Module, names: list[str], calibration, percentile, top: float) -> dict:
    """name -> activation scale (max |input| / top, or its percentile) over the batches."""
    seen: dict[str, list] = {n: [] for n in names}

    def hook_for(name):
        def hook(module, args):
            x = args[0]
            if isinstance(x, Tensor) and x._data is not None:
                a = np.abs(np.asarray(x._data, np.float64)).ravel()
                seen[name].append(a if percentile is not None else np.array([a.max(initial=0)]))
        return hook

    handles = [model.get_submodule(n).register_forward_pre_hook(hook_for(n)) for n in names]
    count, first = 0, None
    try:
        with no_grad():
            for i, batch in enumerate(calibration):
                args = _batch_args(batch, i)
                shapes = [tuple(a.shape) for a in args]
                try:
                    model(*args)
                except ShapeflowError as e:
                    where = f" in {e.module_path}" if getattr(e, "module_path", None) else ""
                    raise ShapeError(
                        f"quantize: calibration batch {i} with input shape(s) "
                        f"{', '.join(str(list(s)) for s in shapes)} does not fit the model"
                        f"{where}: {e.message}", op="quantize",
                        hint="calibration batches must be inputs the float model accepts"
                             + (f" (batch 0 had {first})" if first else "")) from e
                first = first or ", ".join(str(list(s)) for s in shapes)
                count += 1
    finally:
        for h in handles:
            h.remove()
    if count == 0:
        raise QuantError("quantize: the calibration iterable gave no batches", op="quantize")
    out = {}
    for name, parts in seen.items():
        if not parts:
            continue  # not reached by the batches: dynamic scale at run time
        vals = np.concatenate(parts)
        amax = float(np.percentile(vals, percentile)) if percentile is not None \
            else float(vals.max())
        if not np.isfinite(amax):
            raise QuantError(f"quantize: the calibration inputs of {name!r} hold NaN/Inf",
                             op="quantize", module_path=name)
        out[name] = amax / top if amax > 0 else 1.0
    return out
