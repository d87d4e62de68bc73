"""PyTorch's names and the missing-name errors for modules below the porting layer (nn,
nn.functional, nn.init, nn.modules): `_porting.attach()` fills `explain` when shapeflow is
imported, as those modules may not import _porting, a layer above them."""

from __future__ import annotations


def _plain(where: str, torch_prefix: str, name: str) -> AttributeError:
    return AttributeError(f"{where} has no attribute {name!r}")


explain = _plain  # _porting.missing_attribute once shapeflow is imported


def missing_attribute(where: str, torch_prefix: str, name: str) -> AttributeError:
    """The AttributeError for `where` lacking `name`; it says so for a name PyTorch has."""
    return explain(where, torch_prefix, name)


def torch_names_of(torch_module: str) -> frozenset[str]:
    """The public names of a PyTorch module ('torch', 'torch.nn.modules.conv'...), as stored
    in _torch_names.py; empty for one not stored there."""
    from . import _torch_names as names

    stored = {"torch": names.TORCH, "torch.Tensor": names.TENSOR, "torch.nn": names.NN,
              "torch.nn.functional": names.NN_FUNCTIONAL, "torch.nn.init": names.NN_INIT,
              "torch.nn.modules": frozenset().union(*names.NN_MODULES.values())}
    if torch_module in stored:
        return stored[torch_module]
    package, _, file = torch_module.rpartition(".")
    if package == "torch.nn.modules":
        return names.NN_MODULES.get(file, frozenset())
    if torch_module == "torch.utils.data":
        return names.UTILS_DATA[""]
    if package == "torch.utils.data":
        return names.UTILS_DATA.get(file, frozenset())
    return frozenset()
