"""Conv2d."""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..factories import empty
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _pair(x) -> tuple:
    if isinstance(x, (tuple, list)):
        return tuple(x)
    return (x, x)


class Conv2d(Module):
    """2-D convolution over [N, C_in, H, W]; weight [C_out, C_in / groups, kH, kW]."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__()
        if groups <= 0:
            raise ShapeError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ShapeError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ShapeError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ShapeError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _pair(stride)):
                raise ShapeError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ShapeError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.transposed = False
        self.output_padding = (0, 0)
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            pads = []
            for d, k in zip(self.dilation, self.kernel_size):
                total = d * (k - 1) if self.padding == "same" else 0
                left = total // 2
                pads = [left, total - left] + pads
            self._reversed_padding_repeated_twice = pads
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding)
                                                     for _ in range(2)]
        self.weight = Parameter(empty((out_channels, in_channels // groups, *self.kernel_size),
                                      device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty((out_channels,), device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return F.conv2d(padded, self.weight, self.bias, self.stride, (0, 0), self.dilation,
                            self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s
