"""ParameterList and ParameterDict: Parameters held in a list or dict, registered by key."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ..errors import ArgumentError, DTypeError, ShapeError
from ..tensor import Tensor
from .container import _abs_index
from .module import Module
from .parameter import Parameter


def _as_parameter(value):
    """As PyTorch: a plain Tensor becomes a Parameter; other objects are kept as attributes."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe(key, value, typename: bool = False) -> str:
    if isinstance(value, Tensor):
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        size = "x".join(str(s) for s in value.shape)
        dtype = str(value.dtype)
        dtype = dtype if "." in dtype else f"shapeflow.{dtype}"
        if typename:  # PyTorch's ParameterDict prints torch.typename ("torch.FloatTensor")
            dtype = value.type()
        return f"  ({key}): {kind} containing: [{dtype} of size {size}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


class ParameterList(Module):
    """A list of Parameters registered under "0", "1", ... (state_dict keys as PyTorch's)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = ParameterList()
            for i in range(self._size)[idx]:
                out.append(self[i])
            return out
        return getattr(self, str(_abs_index(idx, self._size)))

    def __setitem__(self, idx: int, param) -> None:
        setattr(self, str(_abs_index(idx, self._size)), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, parameters: Iterable) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value) -> ParameterList:
        """Add value at the end (a Tensor becomes a Parameter)."""
        new_idx = self._size
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Append every value of an iterable."""
        if isinstance(values, Tensor) or not isinstance(values, Iterable):
            raise DTypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        """One line per entry: kind, dtype and size, as PyTorch prints them."""
        return "\n".join(_describe(k, p) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise ArgumentError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of Parameters registered under their keys (state_dict keys as PyTorch's)."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key) -> str:
        if not isinstance(key, str):
            raise DTypeError("Index given to ParameterDict cannot be used as a key as it is not "
                            f"a string (type is '{type(key).__name__}'). Open an issue on "
                            "github if you need non-string keys.")
        return key

    def __getitem__(self, key: str):
        attr = self._key_to_attr(key)
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, attr)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, self._key_to_attr(key), _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key) -> bool:
        return key in self._keys

    def __or__(self, other: ParameterDict) -> ParameterDict:
        out = self.copy()
        out.update(other)
        return out

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters (not copies of them)."""
        return ParameterDict({k: self[k] for k in self._keys})

    def setdefault(self, key: str, default=None):
        """self[key], first set to default if key is absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for k in list(self._keys):
            del self[k]

    def pop(self, key: str):
        """Remove key and return its parameter."""
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        """Remove and return the last (key, parameter) pair."""
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        k = next(reversed(self._keys))
        return k, self.pop(k)

    def get(self, key: str, default=None):
        """self[key] if present, else default."""
        return self[key] if key in self._keys else default

    def fromkeys(self, keys: Iterable, default=None) -> ParameterDict:
        """A new ParameterDict with each key set to default."""
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self):
        """(key, parameter) pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The parameters, in insertion order."""
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Add or replace entries from a mapping or an iterable of (key, value) pairs."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for key, value in list(parameters.items()):
                self[key] = value
            return
        if isinstance(parameters, Mapping):  # as PyTorch: a plain mapping goes in sorted
            for key, value in sorted(parameters.items()):
                self[key] = value
            return
        if not isinstance(parameters, Iterable):
            raise DTypeError("ParametersDict.update should be called with an iterable of "
                            "key/value pairs, but got " + type(parameters).__name__)
        for j, pair in enumerate(parameters):
            if not isinstance(pair, Iterable) or len(pair) != 2:
                raise ShapeError(f"ParameterDict update sequence element #{j} should be an "
                                 f"iterable of length 2")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        """One line per entry: kind, dtype and size, as PyTorch prints them."""
        return "\n".join(_describe(k, p, typename=True) for k, p in self.items())

    def __call__(self, *args, **kwargs):
        raise ArgumentError("ParameterDict should not be called.")


__all__ = ["ParameterList", "ParameterDict"]
