"""The names of one `torch.nn.modules.<file>`, read from shapeflow.nn when asked for.

Each file module here is `__getattr__, __dir__ = _file_names(__name__)`: a class PyTorch
defines in that file resolves to shapeflow.nn's (classes added to shapeflow.nn later appear
without edits here), one shapeflow lacks raises the porting message.
"""

from __future__ import annotations

import importlib

from ..._porting_hooks import missing_attribute, torch_names_of

# torch's private bases that ported code subclasses or checks (isinstance(m, _BatchNorm)),
# by torch file: {name: the shapeflow.nn module that defines it}
PRIVATE: dict[str, dict[str, str]] = {
    "batchnorm": {"_NormBase": "batchnorm", "_BatchNorm": "batchnorm"},
    "instancenorm": {"_InstanceNorm": "batchnorm"},
    "conv": {"_ConvNd": "conv", "_ConvTransposeNd": "conv"},
    "dropout": {"_DropoutNd": "dropout"},
    "loss": {"_Loss": "loss", "_WeightedLoss": "loss"},
    "module": {"_IncompatibleKeys": "module"},
}
_MISSING = object()


def lookup(file: str, name: str):
    """shapeflow's object for torch.nn.modules.<file>.<name>, or _MISSING."""
    nn = importlib.import_module("shapeflow.nn")
    if name in PRIVATE.get(file, {}):
        home = importlib.import_module(f"shapeflow.nn.{PRIVATE[file][name]}")
        return getattr(home, name, _MISSING)
    if name not in torch_names_of(f"torch.nn.modules.{file}"):
        return _MISSING
    try:
        return getattr(nn, name)
    except AttributeError:
        return _MISSING


def available(file: str) -> list[str]:
    """The names of torch.nn.modules.<file> that shapeflow has (`from ... import *`)."""
    names = torch_names_of(f"torch.nn.modules.{file}")
    return sorted(n for n in names if lookup(file, n) is not _MISSING)


def file_names(module_name: str):
    """(__getattr__, __dir__) for the module `shapeflow.nn.modules.<file>`."""
    file = module_name.rpartition(".")[2]

    def __getattr__(name: str):
        if name == "__all__":
            return available(file)
        found = lookup(file, name)
        if found is _MISSING:
            raise missing_attribute(f"module {module_name!r}", f"torch.nn.modules.{file}",
                                    name)
        return found

    def __dir__() -> list[str]:
        import sys

        own = [n for n in vars(sys.modules[module_name]) if n not in ("__getattr__", "__dir__")]
        return sorted(set(own) | set(available(file)) | set(PRIVATE.get(file, ())))

    return __getattr__, __dir__
