"""`torch.utils.data._utils.collate`: `default_collate` (and kin) as shapeflow.data has them."""

from .._paths import file_names as _file_names

__getattr__, __dir__ = _file_names(__name__, "torch.utils.data._utils.collate",
                                   ("default_collate", "default_convert", "collate"))
