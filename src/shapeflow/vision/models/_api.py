"""torchvision's model registry and weights entries: `Weights`, `WeightsEnum`, `get_model`,
`list_models`, `get_model_builder`, `get_model_weights`, `get_weight`.

Weights entries carry torchvision's url, transforms and meta. Nothing is downloaded: a
weights file is read from torch hub's cache folder when it is already there, and otherwise
loading one raises a CheckpointError that says where to put it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from functools import partial
from inspect import signature
from types import ModuleType
from typing import Any, get_args

from ...errors import CheckpointError

__all__ = ["WeightsEnum", "Weights", "get_model", "get_model_builder", "get_model_weights",
           "get_weight", "list_models"]


@dataclass
class Weights:
    """One set of pretrained weights: where torchvision serves it, its preprocessing, its meta."""

    url: str
    transforms: Callable
    meta: dict[str, Any]

    def __eq__(self, other: Any) -> bool:
        # a deep copy of a partial is a new object that compares unequal: compare its parts,
        # so that copying or unpickling an enum member finds the member again
        if not isinstance(other, Weights):
            return NotImplemented
        if self.url != other.url or self.meta != other.meta:
            return False
        a, b = self.transforms, other.transforms
        if isinstance(a, partial) and isinstance(b, partial):
            return a.func == b.func and a.args == b.args and a.keywords == b.keywords
        return a == b


def hub_dir() -> str:
    """torch hub's folder, as torch.hub.get_dir finds it ($TORCH_HOME, else the XDG cache)."""
    torch_home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "torch")
    return os.path.join(os.path.expanduser(torch_home), "hub")


class WeightsEnum(Enum):
    """Base of every model's weights enum (`ResNet18_Weights.DEFAULT`); values are Weights."""

    @classmethod
    def verify(cls, obj: Any) -> Any:
        """None, a member, or a member's name ("DEFAULT", "ResNet18_Weights.IMAGENET1K_V1")."""
        if obj is None:
            return None
        if type(obj) is str:
            name = obj.replace(cls.__name__ + ".", "")
            if name not in cls.__members__:
                raise ValueError(f"{cls.__name__} has no weights {obj!r}; choose one of "
                                 f"{', '.join(cls.__members__)}")
            return cls[name]
        if not isinstance(obj, cls):
            raise TypeError(f"Invalid Weight class provided; expected {cls.__name__} but "
                            f"received {obj.__class__.__name__}.")
        return obj

    @property
    def cache_path(self) -> str:
        """Where torch hub keeps this file once downloaded (read from there, never fetched)."""
        return os.path.join(hub_dir(), "checkpoints", os.path.basename(self.url))

    def get_state_dict(self, progress: bool = True, check_hash: bool = True) -> dict[str, Any]:
        """The weights from torch hub's cache; a CheckpointError when the file is not there."""
        path = self.cache_path
        if not os.path.exists(path):
            raise CheckpointError(
                f"{self!r}: pretrained weights cannot be downloaded here (shapeflow makes no "
                f"network access); {os.path.basename(path)} is not in the cache at {path}",
                op="get_state_dict", operands=[("url", self.url)],
                hint=f"fetch {self.url} on a machine with network access and copy it to "
                f"{path} (or load it yourself: model.load_state_dict(sf.load(file))), or "
                "build the model with weights=None")
        from ...io import load  # io sits in this layer; imported when a file is really read

        return load(path)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}.{self._name_}"

    @property
    def url(self) -> str:
        """Where torchvision serves the file."""
        return self.value.url

    @property
    def transforms(self) -> Callable:
        """The preprocessing the weights expect: call it to build the transform."""
        return self.value.transforms

    @property
    def meta(self) -> dict[str, Any]:
        """Categories, num_params, metrics, recipe, as torchvision lists them."""
        return self.value.meta


BUILTIN_MODELS: dict[str, Callable] = {}


def register_model(name: str | None = None) -> Callable[[Callable], Callable]:
    """Decorator: register a model builder under `name` (default: the function's name)."""
    def wrapper(fn: Callable) -> Callable:
        key = name if name is not None else fn.__name__
        if key in BUILTIN_MODELS:
            raise ValueError(f"An entry is already registered under the name '{key}'.")
        BUILTIN_MODELS[key] = fn
        return fn

    return wrapper


def list_models(module: ModuleType | None = None, include: Iterable[str] | str | None = None,
                exclude: Iterable[str] | str | None = None) -> list[str]:
    """Sorted names of the registered models, filtered by module and fnmatch patterns."""
    every = {k for k, fn in BUILTIN_MODELS.items()
             if module is None or fn.__module__.rsplit(".", 1)[0] == module.__name__}
    models = every
    if include:
        patterns = [include] if isinstance(include, str) else include
        models = set().union(*(fnmatch.filter(every, p) for p in patterns))
    if exclude:
        patterns = [exclude] if isinstance(exclude, str) else exclude
        for p in patterns:
            models = models - set(fnmatch.filter(every, p))
    return sorted(models)


def get_model_builder(name: str) -> Callable:
    """The builder function registered under `name` (case-insensitive)."""
    try:
        return BUILTIN_MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"Unknown model {name.lower()}; known: "
                         f"{', '.join(sorted(BUILTIN_MODELS))}") from None


def get_model(name: str, **config: Any):
    """Build the registered model `name` with `config` (weights=, num_classes=, ...)."""
    return get_model_builder(name)(**config)


def get_model_weights(name: Callable | str) -> type[WeightsEnum]:
    """The weights enum of a builder (or of the builder registered under `name`)."""
    fn = get_model_builder(name) if isinstance(name, str) else name
    ann = signature(fn).parameters["weights"].annotation if "weights" in signature(
        fn).parameters else None
    if isinstance(ann, str):  # postponed annotations: "ResNet18_Weights | None"
        module = sys.modules[fn.__module__]
        ann = getattr(module, ann.split("|")[0].strip(), None)
    for t in (ann, *get_args(ann)):
        if isinstance(t, type) and issubclass(t, WeightsEnum):
            return t
    raise ValueError(f"The WeightsEnum class of {getattr(fn, '__name__', fn)} couldn't be "
                     "retrieved: its `weights` parameter names no WeightsEnum.")


def get_weight(name: str) -> WeightsEnum:
    """A weights entry by its full name, e.g. "ResNet50_Weights.IMAGENET1K_V2"."""
    try:
        enum_name, value_name = name.split(".")
    except ValueError:
        raise ValueError(f"Invalid weight name provided: '{name}'.") from None
    package = sys.modules[__name__.rpartition(".")[0]]  # every model's enums are exported there
    enum = getattr(package, enum_name, None)
    if not (isinstance(enum, type) and issubclass(enum, WeightsEnum)):
        raise ValueError(f"The weight enum '{enum_name}' for the specific method couldn't be "
                         "retrieved.")
    return enum[value_name]
