"""`torch.utils.data.dataset`'s names, as shapeflow.data has them (PyTorch's import path)."""

from ._paths import file_names as _file_names

__getattr__, __dir__ = _file_names(__name__, "torch.utils.data.dataset")
