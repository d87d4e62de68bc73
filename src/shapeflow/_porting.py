"""What porting from PyTorch meets at run time: names PyTorch has and shapeflow lacks (an
error that says so), and torch tensors given to shapeflow (an error naming both types).

Imported with shapeflow, whose __init__ calls `attach()` (Tensor's stand-ins); torch tensors
given to shapeflow are `torch_interop`'s. `shapeflow.compat` is the public face.
"""

from __future__ import annotations

from ._porting_hooks import torch_names_of
from .tensor import Tensor
from .torch_interop import torch_function

# ---- names PyTorch has and shapeflow does not ----------------------------------------------

# What to use instead, by PyTorch name; names not listed get a rule below or "not implemented".
ADVICE: dict[str, str] = {
    "torch.jit": "shapeflow has no TorchScript: run the Python module (sf.onnx exports a graph)",
    "torch.utils": "torch.utils.data is shapeflow.data; torch.utils.checkpoint.checkpoint is "
                   "sf.checkpoint",
    "torch.Size": "shapes are tuples (sf.Shape is a tuple): compare them with tuples",
    "torch.dtype": "shapeflow's dtype class is sf.DType",
    "torch.is_tensor": "use isinstance(x, sf.Tensor)",
    "torch.hub": "download the weights yourself; sf.load reads checkpoints and safetensors",
    "torch.testing": "compare t.numpy() with numpy.testing",
    "torch.mps": "shapeflow has no mps device (sf.backends.mps.is_available() is False)",
    "torch.Tensor.storage": "a shapeflow tensor holds a NumPy array: use t.numpy()",
    "torch.Tensor.untyped_storage": "a shapeflow tensor holds a NumPy array: use t.numpy()",
    "torch.Tensor.data_ptr": "a shapeflow tensor holds a NumPy array: t.numpy().ctypes.data",
    "torch.Tensor.pin_memory": "shapeflow has only cpu and meta: drop the call",
    "torch.Tensor.get_device": "use t.device ('cpu' or 'meta')",
    "torch.Tensor.share_memory_": "shapeflow runs in one process: drop the call",
}
_PACKAGE: dict = {}  # shapeflow's names; attach() fills it
_LEGACY_TENSOR_TYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32",
    "ShortTensor": "int16", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool",
}


def _torch_names():
    from . import _torch_names

    return _torch_names


def _advice(torch_name: str, name: str) -> str | None:
    """What to use instead of `torch_name` (torch.X or torch.Tensor.X), if shapeflow has it."""
    if torch_name in ADVICE:
        return ADVICE[torch_name]
    if torch_name == f"torch.nn.functional.{name}":
        return f"use sf.{name}" if name in _PACKAGE else None
    if torch_name.startswith("torch.nn"):
        return None  # the rules below are for torch.X and torch.Tensor.X names
    if torch_name.startswith("torch.Tensor."):
        if name.endswith("_") and hasattr(Tensor, name[:-1]):
            return f"use the out-of-place t.{name[:-1]}(...) and assign its result"
        if name in _PACKAGE:
            return f"use sf.{name}(t, ...)"
        return None
    if name in _LEGACY_TENSOR_TYPES:
        return f"use sf.tensor(data, dtype=sf.{_LEGACY_TENSOR_TYPES[name]})"
    if _is_tensor_attribute(name):
        return f"use the tensor method t.{name}(...)"
    from .nn import functional

    if hasattr(functional, name):
        return f"use shapeflow.nn.functional.{name}"
    return None


def _is_tensor_attribute(name: str) -> bool:
    try:
        getattr(Tensor, name)
    except AttributeError:
        return False
    return True


def missing_attribute(where: str, torch_prefix: str, name: str) -> AttributeError:
    """The AttributeError for `where` lacking `name`: for a name PyTorch has, what to do.

    `where` reads as Python's own message ("module 'shapeflow'", "'Tensor' object").
    For a PyTorch name the error carries no `name`, so Python adds no "Did you mean"
    (its guess, e.g. `backend` for `backends`, points at an unrelated shapeflow name).
    """
    message = f"{where} has no attribute {name!r}"
    torch_name = f"{torch_prefix}.{name}"
    if torch_name not in ADVICE and name not in torch_names_of(torch_prefix):
        return AttributeError(message)  # not a PyTorch name: Python's suggestion may help
    advice = _advice(torch_name, name)
    if advice is None:
        return AttributeError(f"{message}: not implemented in shapeflow: {torch_name}",
                              name=None)
    return AttributeError(f"{message}: shapeflow has no {torch_name}; {advice}", name=None)


class _MissingTensorAttribute:
    """Stands on Tensor for a PyTorch name shapeflow lacks: reading it raises, saying so.

    A class attribute, not Tensor.__getattr__: a __getattr__ would take CPython's fast
    attribute reads away from every tensor (measured: 2-3x slower `t.shape`).
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj, objtype=None):
        raise missing_attribute("'Tensor' object", "torch.Tensor", self.name)


def install_tensor_names(cls) -> None:
    """Give `cls` an explaining stand-in for each torch.Tensor name it does not have."""
    for name in _torch_names().TENSOR:
        try:
            getattr(cls, name)
        except AttributeError:
            setattr(cls, name, _MissingTensorAttribute(name))


def tensor_dir(self) -> list[str]:
    """dir(t) without the stand-ins: only what works."""
    import inspect

    cls = type(self)
    return sorted(n for n in object.__dir__(self) if not isinstance(
        inspect.getattr_static(cls, n, None), _MissingTensorAttribute))


def torch_names_source() -> str:
    """The text of _torch_names.py, from the installed torch."""
    import importlib
    import pkgutil
    import textwrap

    import torch

    version = torch.__version__.split("+")[0]
    # submodules from the package's files, not dir(torch): that lists only those imported
    modules = {m.name for m in pkgutil.iter_modules(torch.__path__) if m.name[0] != "_"}
    top = sorted(set(torch.__all__) | modules)
    tensor = sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))

    def block(names):
        return "\n".join(textwrap.wrap(" ".join(names), 96, break_on_hyphens=False))

    def words(names) -> str:
        return f'_words("""\n{block(sorted(names))}\n""")'

    import torch.nn.init  # noqa: F401  (not imported by torch.nn)
    import torch.nn.modules

    files = {m.name: importlib.import_module(f"torch.nn.modules.{m.name}")
             for m in pkgutil.iter_modules(torch.nn.modules.__path__) if m.name[0] != "_"}
    nn_modules = "".join(f'    "{name}": {words(mod.__all__)},\n'
                         for name, mod in sorted(files.items()) if mod.__all__)
    data = {f: importlib.import_module("torch.utils.data" + (f and f".{f}")).__all__
            for f in ("", "dataloader", "dataset", "distributed", "sampler")}
    utils_data = "".join(f'    "{f}": {words(n for n in names if n[0] != "_")},\n'
                         for f, names in data.items())

    return (f'"""Public names of PyTorch {version}: whether a name shapeflow lacks is one '
            'PyTorch has.\n\nGenerated from the installed torch by `python -m shapeflow.compat '
            '--torch-names`;\ntests/test_porting.py checks it against the torch installed '
            'there.\n"""\n\n\ndef _words(text: str) -> frozenset[str]:\n'
            '    return frozenset(text.split())\n\n\n'
            f'TORCH_VERSION = "{version}"\n\n# torch.__all__ and torch\'s submodules\n'
            f'TORCH = _words("""\n{block(top)}\n""")\n\n'
            f'# dir(torch.Tensor), public names\nTENSOR = _words("""\n{block(tensor)}\n""")\n'
            f'\n# public names of torch.nn, torch.nn.functional, torch.nn.init\n'
            f'NN = {words(_public_names(torch.nn))}\n\n'
            f'NN_FUNCTIONAL = {words(_public_names(torch.nn.functional))}\n\n'
            f'NN_INIT = {words(_public_names(torch.nn.init))}\n\n'
            f'# torch.nn.modules.<file>.__all__, by file\nNN_MODULES = {{\n{nn_modules}}}\n'
            f'\n# torch.utils.data(.<file>).__all__, by file ("" the package)\n'
            f'UTILS_DATA = {{\n{utils_data}}}\n')


def _public_names(module) -> list[str]:
    """A torch module's own public names: no `math` or `Optional` it merely imports."""
    import inspect
    import pkgutil

    names = {m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))
             if m.name[0] != "_"}
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if inspect.ismodule(value):
            if value.__name__.startswith(module.__name__ + "."):
                names.add(name)
        elif callable(value) and (getattr(value, "__module__", None) or "torch").split(
                ".")[0] == "torch":
            names.add(name)
    return sorted(names)


def attach(package: dict) -> None:
    """Tensor's porting aids: torch functions refusing it, dir() and the missing names.

    `package` is shapeflow's namespace (its __init__ calls this), for advice like `sf.X`.
    """
    global _PACKAGE
    _PACKAGE = package  # the live namespace: names defined after this call count too
    from . import _porting_hooks

    _porting_hooks.explain = missing_attribute  # for nn's modules, below this layer
    Tensor.__torch_function__ = classmethod(torch_function)
    Tensor.__dir__ = tensor_dir
    install_tensor_names(Tensor)  # last: only names nothing else gave Tensor
