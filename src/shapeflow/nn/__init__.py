"""shapeflow.nn: Module and Parameter, layers, losses, init and gradient utilities.

PyTorch's user surface (`nn.Linear`, `nn.Module.state_dict`, `nn.init.kaiming_uniform_`...);
layers compute with `shapeflow.nn.functional`.
"""

from . import functional, init, parallel, utils
from .activation import *  # noqa: F403  (ReLU, GELU, ReLU6, SELU, CELU, PReLU, GLU, Mish...)
from .activation import __all__ as _ACTIVATIONS
from .attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d
from .channel_shuffle import ChannelShuffle
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .dropout import (
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
)
from .flatten import Flatten, Unflatten
from .linear import Bilinear, Identity, Linear, NonDynamicallyQuantizableLinear
from .local_response_norm import LocalResponseNorm
from .loss import *  # noqa: F403  (CrossEntropyLoss, BCELoss, KLDivLoss, ... PairwiseDistance)
from .loss import __all__ as _LOSSES
from .module import Module, RemovableHandle, StateDictError
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .padding import *  # noqa: F403  (ReflectionPad1d ... ZeroPad3d)
from .padding import __all__ as _PADDING
from .parameter import Parameter
from .parameter_container import ParameterDict, ParameterList
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    FractionalMaxPool2d,
    FractionalMaxPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from .resample import Fold, PixelShuffle, PixelUnshuffle, Unfold, Upsample
from .rnn import GRU, LSTM, RNN, RNNBase
from .rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .sparse import Embedding, EmbeddingBag
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "functional", "init", "parallel", "utils",
    "Module", "Parameter", "RemovableHandle", "StateDictError",
    "Identity", "Linear", "NonDynamicallyQuantizableLinear", "Embedding", "LayerNorm", "RMSNorm",
    "Dropout", "Flatten", "Unflatten",
    "Sequential", "ModuleList", "ModuleDict", "Conv2d", "MaxPool2d", "AvgPool2d",
    "MultiheadAttention",
    *_ACTIVATIONS, *_LOSSES, "ParameterList", "ParameterDict",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Conv1d", "ConvTranspose1d", "ConvTranspose2d",
    "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "Conv3d", "Upsample", "PixelShuffle",
    "PixelUnshuffle", "Unfold", "Fold", "LocalResponseNorm",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
    "GRUCell", "Transformer", "TransformerEncoder", "TransformerEncoderLayer",
    "TransformerDecoder", "TransformerDecoderLayer",
    "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", *_PADDING,
    "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "EmbeddingBag",
    "Bilinear", "ChannelShuffle", "FractionalMaxPool2d", "FractionalMaxPool3d",
]

_EINOPS_LAYERS = ("Rearrange", "Reduce")  # from einops_layers, which imports einops


def __getattr__(name: str):
    if name in _EINOPS_LAYERS:
        from . import einops_layers

        return getattr(einops_layers, name)
    if name == "modules":  # torch.nn.modules' file paths (nn.modules.conv.Conv2d); imported
        import importlib  # by name: `from . import modules` would ask this function again

        return importlib.import_module(f"{__name__}.modules")
    from .._porting_hooks import missing_attribute  # says so for a name PyTorch has

    raise missing_attribute("module 'shapeflow.nn'", "torch.nn", name)
