"""shapeflow.nn: Module and Parameter, layers, losses, init and gradient utilities.

PyTorch's user surface (`nn.Linear`, `nn.Module.state_dict`, `nn.init.kaiming_uniform_`...);
layers compute with `shapeflow.nn.functional`.
"""

from . import functional, init, utils
from .activation import GELU, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv2d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear, NonDynamicallyQuantizableLinear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module, RemovableHandle, StateDictError
from .normalization import LayerNorm, RMSNorm
from .parameter import Parameter
from .pooling import AvgPool2d, MaxPool2d
from .rnn import GRU, LSTM, RNN, RNNBase
from .rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .sparse import Embedding
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "RemovableHandle", "StateDictError",
    "Identity", "Linear", "NonDynamicallyQuantizableLinear", "Embedding", "LayerNorm", "RMSNorm",
    "Dropout", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Flatten", "Unflatten",
    "Sequential", "ModuleList", "ModuleDict", "Conv2d", "MaxPool2d", "AvgPool2d",
    "MultiheadAttention", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
    "GRUCell", "Transformer", "TransformerEncoder", "TransformerEncoderLayer",
    "TransformerDecoder", "TransformerDecoderLayer", "CrossEntropyLoss", "MSELoss", "L1Loss",
    "BCEWithLogitsLoss", "NLLLoss",
]

_EINOPS_LAYERS = ("Rearrange", "Reduce")  # from einops_layers, which imports einops


def __getattr__(name: str):
    if name in _EINOPS_LAYERS:
        from . import einops_layers

        return getattr(einops_layers, name)
    raise AttributeError(f"module 'shapeflow.nn' has no attribute {name!r}")
