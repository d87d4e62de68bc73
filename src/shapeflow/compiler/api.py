"""sf.compile and its companions: the entry points a ported torch.compile line meets."""

from __future__ import annotations

import contextlib
import functools
import types

from .compiled import LIVE, CompiledFunction, CompileReport
from .errors import ReplayError

BACKENDS = ("inductor", "shapeflow", "eager")  # "eager": run as written (PyTorch's debug one)
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",
            mode: str | None = None, options: dict | None = None, disable: bool = False,
            buckets: dict | None = None):
    """Compile a module or function (or, with no model, a decorator that does).

    `dynamic`: None (dims whose size changes become symbolic), True (every dim symbolic),
    False (none), or names per dim ('B,L': dim 0 is B, dim 1 is L); `buckets`: {name: upper
    bounds} (default powers of two); `fullgraph=True` raises at a graph break instead of
    running that call eagerly. `mode` and `options` are accepted as PyTorch's; on the CPU
    every mode replays the same way."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options, disable=disable,
                                 buckets=buckets)
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ReplayError(f"sf.compile: unknown backend {backend!r}",
                          hint=f"shapeflow compiles with {', '.join(map(repr, BACKENDS))}")
    if mode not in MODES:
        raise ReplayError(f"sf.compile: unknown mode {mode!r}",
                          hint=f"one of {', '.join(repr(m) for m in MODES[1:])}")
    if options is not None and not isinstance(options, dict):
        raise ReplayError(f"sf.compile: options must be a dict, got {type(options).__name__}")
    if dynamic is not None and not isinstance(dynamic, (bool, str, tuple, list)):
        raise ReplayError(f"sf.compile: dynamic must be None, a bool or dim names, got "
                          f"{dynamic!r}")
    from ..nn.module import Module
    from .module import CompiledModule

    if disable or backend == "eager":
        return model
    if isinstance(model, Module):
        return CompiledModule(model, dynamic=dynamic, buckets=buckets, fullgraph=fullgraph)
    if not callable(model):
        raise ReplayError(f"sf.compile: expected a Module or a function, got "
                          f"{type(model).__name__}")
    found = _captured(model)
    compiled = CompiledFunction(model, dynamic=dynamic, buckets=buckets, fullgraph=fullgraph,
                                **found)
    functools.update_wrapper(compiled, model, updated=())
    return compiled


_MAX_FUNCTIONS = 64  # helper functions followed from a compiled one


def _captured(fn) -> dict:
    """Modules, tensors, optimizers and LR schedulers fn reaches through its closure, its
    globals, its default arguments and bound self (and that object's attributes), and so do
    the functions of its own module that it reaches that way: the modules' parameters and
    buffers are the region's state, read afresh at each call; a training step's optimizer
    and scheduler calls are made as written at each replay."""
    from ..nn.module import Module
    from ..optim.lr_scheduler import LRScheduler
    from ..optim.optimizer import Optimizer
    from ..tensor import Tensor

    found = []
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        found.append(owner)
        if not isinstance(owner, Module):  # a trainer object: its model and optimizer
            found += list(getattr(owner, "__dict__", {}).values())
    functions = [getattr(fn, "__func__", fn)]
    seen_functions: set[int] = set()
    while functions:  # fn, and the plain functions it calls through its closure or globals
        target = functions.pop()
        if id(target) in seen_functions or len(seen_functions) >= _MAX_FUNCTIONS:
            continue
        seen_functions.add(id(target))
        reached = list(getattr(target, "__defaults__", None) or ()) + \
            list((getattr(target, "__kwdefaults__", None) or {}).values())
        for cell in getattr(target, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                reached.append(cell.cell_contents)
        code = getattr(target, "__code__", None)
        glob = getattr(target, "__globals__", {})
        if code is not None:
            names = set(code.co_names)
            for const in code.co_consts:  # names read by nested functions and comprehensions
                if isinstance(const, types.CodeType):
                    names |= set(const.co_names)
            reached += [glob[n] for n in names if n in glob]
        found += reached
        functions += [x for x in reached if isinstance(x, types.FunctionType)
                      and x.__module__ == target.__module__]  # the user's own helpers
    def unique(kind) -> list:
        seen, out = set(), []
        for x in found:
            if isinstance(x, kind) and id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        return out

    return {"modules": unique(Module), "state": unique(Tensor),
            "optimizers": unique(Optimizer), "schedulers": unique(LRScheduler)}


def explain(compiled) -> CompileReport:
    """What a compiled module or function did: traces, plans, replays, breaks and why."""
    inner = compiled if isinstance(compiled, CompiledFunction) else \
        getattr(compiled, "_compiled", None)
    if not isinstance(inner, CompiledFunction):
        raise ReplayError(f"explain: expected what sf.compile returned, got "
                          f"{type(compiled).__name__}")
    return inner.report()


def reset() -> None:
    """Forget every compiled region's traces, plans and bound shapes (torch._dynamo.reset):
    each traces again at its next call."""
    for compiled in list(LIVE):
        compiled.reset()


def disable(fn=None, recursive: bool = True):
    """torch.compiler.disable: run fn eagerly (in shapeflow: fn as it is)."""
    return (lambda f: f) if fn is None else fn

