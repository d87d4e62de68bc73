"""A compiled module: PyTorch's OptimizedModule in shapeflow (`_orig_mod`, its parameters and
state_dict keys under `_orig_mod.`), calls going through the compiled region."""

from __future__ import annotations

from ..nn.module import Module
from .compiled import CompiledFunction


class CompiledModule(Module):
    """`sf.compile(module)`: the module's call compiled; everything else is the module's."""

    def __init__(self, mod: Module, **options) -> None:
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", CompiledFunction(mod, modules=(mod,), **options))

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)

    def plan(self, *example, **sizes):
        """The memory plan of the bucket holding `sizes` (see CompiledFunction.plan)."""
        return self._compiled.plan(*example, **sizes)

    def report(self):
        """What the compiled region did: traces, plans, replays, eager calls and why."""
        return self._compiled.report()

    def __repr__(self) -> str:
        return f"CompiledModule({self._orig_mod!r})"
