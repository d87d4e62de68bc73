"""`torch.nn.modules.pooling`'s names, as shapeflow.nn has them (PyTorch's import path)."""

from ._paths import file_names as _file_names

__getattr__, __dir__ = _file_names(__name__)
