"""The optimizer step's scratch: what Adam, AdamW and SGD allocate while they update.

The update runs parameter by parameter, in place, so the step's peak is the bytes held after
backward plus the largest one parameter's temporaries. These follow optim/adam.py and
optim/sgd.py on cpu (the cpu table's `adam` and `axpy` kernels): the compiled kernels
(float32, contiguous) update with no temporary; NumPy uses one of the parameter's size up
to `BLOCK` elements, a `BLOCK` chunk above; maximize and coupled weight decay make
gradient-sized copies (NumPy reuses the temporary of `grad + param * wd` from 256 KiB on:
its temporary elision). Under mixed precision the plan also counts an fp32 copy of each
16-bit gradient, which an update of fp32 master weights reads (a convention: shapeflow has
no 16-bit step of its own to measure). Also here: how many parameter-sized state buffers an
optimizer keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

# the plan is the cpu device's: its compiled optimizer kernels and NumPy's chunk size
from ...backend.cpu import kernels
from ...backend.reference.optim import BLOCK
from .report import MemoryPlanError

ELIDE = 256 * 1024  # NumPy's NPY_MIN_ELIDE_BYTES: from here `a + b * c` reuses b * c

# what a named optimizer defaults to (torch.optim's defaults)
_NAMED = {
    "adam": ("adam", {"weight_decay": 0.0}),
    "adamw": ("adam", {"weight_decay": 1e-2, "decoupled_weight_decay": True}),
    "sgd": ("sgd", {"momentum": 0.0}),
    "momentum": ("sgd", {"momentum": 0.9}),
    "sgd-momentum": ("sgd", {"momentum": 0.9}),
}


@dataclass
class Scratch:
    """The largest temporaries of one parameter's update, and which parameter that is."""

    nbytes: int
    param: str
    why: str


def step_scratch(optimizer, named, half, numel: dict | None = None) -> Scratch | None:
    """The largest per-parameter scratch of `optimizer`'s step over `named` (name, param)
    pairs that get gradients; None without an optimizer (no step to plan). `numel`: sizes
    that replace some parameters' own (a ZeRO slice, updated as one flat parameter)."""
    rule = _rule(optimizer)
    if rule is None:
        return None
    kind, options_of = rule
    best = Scratch(0, "", "every update in place, no temporaries")
    for name, p in named:
        opts = options_of(p)
        if opts is None:
            continue  # not optimized by it
        item = 4 if half is not None else p.dtype.itemsize
        compiled = kernels.available() and item == 4 and p.dtype.is_floating_point
        n = numel[name] if numel and name in numel else p.numel()
        base = 4 * n if half is not None else 0  # the fp32 copy of a 16-bit gradient
        fn = _adam if kind == "adam" else _sgd
        nbytes, why = fn(n, item, opts, compiled, base)
        if nbytes > best.nbytes:
            best = Scratch(nbytes, name, why + (", fp32 copy of its 16-bit grad"
                                                if base else ""))
    return best


def _chunk(n: int, item: int, compiled: bool) -> int:
    """An in-place update's temporary: none compiled, else NumPy's (a chunk at most)."""
    return 0 if compiled else min(n, BLOCK) * item


def _adam(n: int, item: int, o: dict, compiled: bool, base: int) -> tuple[int, str]:
    size, extra, peak, why = n * item, base, base, []
    if o.get("maximize"):
        extra += size  # np.negative(grad)
        why.append("negated gradient")
    if o.get("weight_decay") and not o.get("decoupled_weight_decay"):
        peak = max(peak, extra + (size if size >= ELIDE else 2 * size))  # grad + param * wd
        extra = base + size
        why.append("decayed gradient")
    tmp = _chunk(n, item, compiled)
    why.append("NumPy's update temporary" if tmp else "compiled update")
    return max(peak, extra + tmp), ", ".join(why)


def _sgd(n: int, item: int, o: dict, compiled: bool, base: int) -> tuple[int, str]:
    size, owned, why = n * item, base, []
    tmp = _chunk(n, item, compiled)  # axpy_'s
    peak = base
    if o.get("maximize"):
        owned += size
        why.append("negated gradient")
    if o.get("weight_decay"):
        if owned == base:
            owned += size  # grad.copy() before adding the decay into it
        peak = max(peak, owned + tmp)
        why.append("decayed gradient")
    if o.get("momentum"):
        if o.get("dampening"):
            peak = max(peak, owned + tmp)  # axpy_(buf, grad)
        if o.get("nesterov"):
            if owned == base:
                owned += size
            peak = max(peak, owned + tmp)
            why.append("Nesterov gradient")
        else:
            owned = base  # the update reads the momentum buffer; our copies are dropped
    why.append("NumPy's update temporary" if tmp else "compiled update")
    return max(peak, owned + tmp), ", ".join(why)


def _rule(optimizer):
    """(kind, param -> options or None) for an optimizer name, class or instance."""
    from ...optim.adam import Adam
    from ...optim.optimizer import Optimizer
    from ...optim.sgd import SGD

    if optimizer is None:
        return None
    if isinstance(optimizer, str):
        kind, opts = _NAMED.get(optimizer.lower(), (None, None))
        if kind is None:
            return None
        return kind, lambda p: opts
    if isinstance(optimizer, type):
        kind = "adam" if issubclass(optimizer, Adam) else "sgd" if issubclass(
            optimizer, SGD) else None
        if kind is None:
            return None
        defaults = _class_defaults(optimizer)
        return kind, lambda p: defaults
    if isinstance(optimizer, Optimizer):
        kind = "adam" if isinstance(optimizer, Adam) else "sgd" if isinstance(
            optimizer, SGD) else None
        if kind is None:
            return None
        groups = {id(p): g for g in optimizer.param_groups for p in g["params"]}
        return kind, lambda p: groups.get(id(p))
    return None


def _class_defaults(cls) -> dict:
    """The keyword defaults of an optimizer class's __init__ (AdamW: weight_decay 1e-2)."""
    import inspect

    params = inspect.signature(cls.__init__).parameters
    opts = {k: v.default for k, v in params.items() if v.default is not inspect.Parameter.empty}
    if "decoupled_weight_decay" not in opts:
        from ...optim.adam import AdamW

        opts["decoupled_weight_decay"] = issubclass(cls, AdamW)
    return opts


# ---- the state it keeps ----------------------------------------------------------------
OPTIMIZER_STATES = {"none": 0, "sgd": 0, "momentum": 1, "sgd-momentum": 1, "adam": 2,
                    "adamw": 2}


def optimizer_states(optimizer, model, named):
    """name, param -> number of parameter-sized state buffers the optimizer keeps."""
    from ...optim.optimizer import Optimizer

    if optimizer is None:
        return lambda name, p: 0
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key not in OPTIMIZER_STATES:
            raise MemoryPlanError(f"memory.report: unknown optimizer {optimizer!r}",
                                  hint=f"use one of {', '.join(OPTIMIZER_STATES)}, or pass "
                                  "an Optimizer")
        n = OPTIMIZER_STATES[key]
        return lambda name, p: n
    if isinstance(optimizer, type) and issubclass(optimizer, Optimizer):
        params = [p for _, p in named if p.requires_grad]
        if not params:
            return lambda name, p: 0
        optimizer = optimizer(params)
    if isinstance(optimizer, Optimizer):
        by_name = {}
        for name, p in named:
            try:
                by_name[name] = len(optimizer.state_per_param(optimizer._group_of(p)))
            except ValueError:
                by_name[name] = 0  # not optimized by it: no state
        return lambda name, p: by_name.get(name, 0)
    raise MemoryPlanError(f"memory.report: optimizer must be an Optimizer, its class, or a "
                          f"name, got {type(optimizer).__name__}")


def optimizer_name(optimizer) -> str:
    """The optimizer's name as the report prints it."""
    if optimizer is None:
        return "none"
    if isinstance(optimizer, str):
        return optimizer.lower()
    return optimizer.__name__ if isinstance(optimizer, type) else type(optimizer).__name__

