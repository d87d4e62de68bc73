"""Sequential, ModuleList and ModuleDict."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Mapping

from ..errors import DTypeError, ShapeError
from .module import Module, _addindent


def _abs_index(idx, n: int) -> int:
    idx = operator.index(idx)
    if not (-n <= idx < n):
        raise IndexError(f"index {idx} is out of range")
    return idx + n if idx < 0 else idx


class Sequential(Module):
    """Modules applied one after the other: Sequential(a, b)(x) == b(a(x)).

    Built from modules (named "0", "1", ...) or from one OrderedDict of named modules.
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_abs_index(idx, len(keys))]]

    def __setitem__(self, idx: int, module: Module) -> None:
        keys = list(self._modules)
        setattr(self, keys[_abs_index(idx, len(keys))], module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_abs_index(idx, len(keys))])
        # keep the numbering 0..n-1, as PyTorch does
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(self._modules.values())}

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ShapeError("add operator supports only objects of Sequential class, but "
                             f"{type(other).__name__} is given.")
        out = Sequential()
        for m in list(self) + list(other):
            out.append(m)
        return out

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, sequential) -> Sequential:
        for m in sequential:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not (-n <= index <= n):
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(mods)}
        return self

    def pop(self, key) -> Module:
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered so their parameters are seen (no forward of its own)."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_abs_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_abs_index(idx, len(self))))
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(self._modules.values())}

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other) -> ModuleList:
        out = ModuleList()
        for m in list(self) + list(other):
            out.append(m)
        return out

    def insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = {}
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise DTypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def pop(self, key) -> Module:
        v = self[key]
        del self[key]
        return v

    def __repr__(self) -> str:
        """PyTorch's repr, which folds runs of equal modules into `(0-2): 3 x Linear(...)`."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks = [[0, 0, reprs[0]]]
        for i, r in enumerate(reprs[1:], 1):
            if r == blocks[-1][2]:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = []
        for start, end, r in blocks:
            line = f"({start}): {r}" if start == end else \
                f"({start}-{end}): {end - start + 1} x {r}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules (insertion-ordered), registered so their parameters are seen."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        if isinstance(modules, (Mapping, ModuleDict)):
            for key, module in modules.items():
                self[key] = module
        else:
            for j, m in enumerate(modules):
                if len(m) != 2:
                    raise ShapeError(f"ModuleDict update sequence element #{j} has length "
                                     f"{len(m)}; 2 is required")
                self[m[0]] = m[1]
