"""Recomputation modes applied to the meta copy a report traces: checkpointed blocks
("full", any modules) and selective recompute (attention cores, Korthikanti et al. 2022)."""

from __future__ import annotations

import functools

from ...tensor import Tensor
from .report import MemoryPlanError

RECOMPUTE = ("none", "selective", "full")


def resolve(recompute, checkpoint) -> tuple[str, object]:
    """(recompute mode, checkpoint spec) from report()'s two arguments."""
    if recompute is None:
        return ("full" if checkpoint else "none"), checkpoint
    if recompute not in RECOMPUTE:
        raise MemoryPlanError(f"memory.report: recompute must be one of "
                              f"{', '.join(RECOMPUTE)}, got {recompute!r}")
    if recompute == "full":
        return recompute, checkpoint or True
    if recompute == "none" and checkpoint:
        raise MemoryPlanError("memory.report: recompute='none' contradicts checkpoint=, which "
                              "recomputes the modules it names", hint="drop one of the two")
    return recompute, checkpoint


def apply(model, recompute: str, checkpoint) -> None:
    """Set `model` (a meta copy) up to recompute as asked."""
    if checkpoint:
        checkpoint_modules(model, checkpoint)
    if recompute == "selective":
        cores = [m for m in model.modules() if hasattr(m, "recompute_core")]
        if not cores:
            raise MemoryPlanError(
                f"memory.report: recompute='selective' found no attention in "
                f"{type(model).__name__} that recomputes its core",
                hint="GPT's attention does (its recompute_core); or use recompute='full'")
        for m in cores:
            m.recompute_core = True


def checkpoint_modules(model, spec) -> None:
    """Wrap the forward of each module named by `spec` in sf.checkpoint."""
    from ...nn.container import ModuleList

    named = dict(model.named_modules())
    if spec is True:
        targets = [m for mod in named.values() if isinstance(mod, ModuleList) for m in mod]
    elif isinstance(spec, type):
        targets = [m for m in named.values() if isinstance(m, spec)]
    else:
        paths = [spec] if isinstance(spec, str) else list(spec)
        targets = []
        for p in paths:
            if p not in named:
                raise MemoryPlanError(f"memory.report: checkpoint names {p!r}, which is not a "
                                      "module of the model", hint="modules: " + ", ".join(
                                          n for n in list(named)[1:12]))
            mod = named[p]
            targets += list(mod) if isinstance(mod, ModuleList) else [mod]
    if not targets:
        raise MemoryPlanError("memory.report: checkpoint=True found no ModuleList of blocks "
                              "to checkpoint", hint="name the modules: checkpoint=['blocks']")
    for mod in targets:
        mod.forward = functools.partial(_checkpointed, mod.forward)


def _checkpointed(forward, *args, **kwargs):
    """forward(*args, **kwargs) under sf.checkpoint, which saves only its tensor arguments."""
    from ...recompute import checkpoint

    if not any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
        return forward(*args, **kwargs)
    return checkpoint(forward, *args, **kwargs)


def checkpoint_name(spec) -> str:
    """How the report's title names what is checkpointed."""
    if not spec:
        return ""
    if spec is True:
        return "every block"
    if isinstance(spec, type):
        return f"every {spec.__name__}"
    return ", ".join([spec] if isinstance(spec, str) else list(spec))
