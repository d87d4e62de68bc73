"""`torch.nn.modules.linear_cross_entropy_options`'s names, as shapeflow.nn has them."""

from ._paths import file_names as _file_names

__getattr__, __dir__ = _file_names(__name__)
