"""Identity, Linear and Bilinear."""

from __future__ import annotations

import math

from ..errors import ArgumentValueError
from ..factories import empty
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Identity(Module):
    """Returns its input unchanged (any constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


def _weight_and_bias(layer: Module, shape: tuple, bias: bool, device, dtype) -> None:
    """layer.weight of `shape` and layer.bias [shape[0]] (or a None bias), then the layer's
    reset_parameters(): the parameters of Linear and Bilinear."""
    layer.weight = Parameter(empty(shape, device=device, dtype=dtype))
    if bias:
        layer.bias = Parameter(empty((shape[0],), device=device, dtype=dtype))
    else:
        layer.register_parameter("bias", None)
    layer.reset_parameters()


class Linear(Module):
    """y = x W^T + b, with W of shape [out_features, in_features]."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in_features), bias, device, dtype)

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """y_k = x1^T W_k x2 + b_k, with W of shape [out_features, in1_features, in2_features]."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in1_features, in2_features), bias, device, dtype)

    def reset_parameters(self) -> None:
        """PyTorch's default: weight and bias U(+-1/sqrt(in1_features))."""
        if self.in1_features <= 0:
            raise ArgumentValueError(f"in1_features must be > 0, but got (in1_features="
                             f"{self.in1_features})")
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj (PyTorch's name, so reprs and checkpoints match)."""
