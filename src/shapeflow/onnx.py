"""`import shapeflow.onnx` (as `import torch.onnx`): the module is shapeflow.io.onnx itself,
so `sf.onnx.export` is one function whichever way it was reached."""

import sys

from .io import onnx as _onnx

sys.modules[__name__] = _onnx  # the import binds shapeflow.onnx to what sys.modules holds
