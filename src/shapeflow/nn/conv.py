"""Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d (PyTorch's parameters and layouts)."""

from __future__ import annotations

import math

from ..errors import ArgumentValueError, ShapeError
from ..factories import empty
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(x, n: int) -> tuple:
    if isinstance(x, (tuple, list)):
        if len(x) != n:
            raise ArgumentValueError(f"expected an int or {n} values, got {x!r}")
        return tuple(x)
    return (x,) * n


def _pair(x) -> tuple:
    return _ntuple(x, 2)


class _ConvNd(Module):
    """The parameters every convolution shares; `_n` spatial dims, `transposed` or not."""

    _n = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, output_padding=0) -> None:
        super().__init__()
        n = self._n
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
            if self.transposed:
                raise ShapeError(f"{type(self).__name__}: padding must be an int or a tuple")
        if padding_mode not in _PADDING_MODES:
            raise ShapeError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        if self.transposed and padding_mode != "zeros":
            raise ShapeError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.output_padding = _ntuple(output_padding, n)
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
        wshape = (in_channels, out_channels // groups) if self.transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(empty((*wshape, *self.kernel_size), device=device, dtype=dtype))
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
        fn = self._fn
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, self.weight, self.bias, self.stride, (0,) * self._n,
                      self.dilation, self.groups)
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                  self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over [N, C_in, L]; weight [C_out, C_in / groups, k]."""

    _n = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution over [N, C_in, H, W]; weight [C_out, C_in / groups, kH, kW]."""

    _n = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_ConvNd):
    """3-D convolution over [N, C_in, D, H, W]; weight [C_out, C_in / groups, kD, kH, kW]."""

    _n = 3
    _fn = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size) -> tuple:
        """The output_padding that gives output_size (PyTorch's rule), else the attribute."""
        if output_size is None:
            return self.output_padding
        n = self._n
        want = tuple(output_size)[-n:]
        spatial = tuple(input.shape)[-n:]
        pads = []
        for i in range(n):
            least = ((spatial[i] - 1) * self.stride[i] - 2 * self.padding[i] +
                     self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            extra = int(want[i]) - least
            top = max(self.stride[i], self.dilation[i])
            if not 0 <= extra < top:
                raise ArgumentValueError(
                    f"{type(self).__name__}: requested output size {tuple(want)} is not "
                    f"reachable from input {tuple(spatial)} (dim {i} can be {least} to "
                    f"{least + top - 1})")
            pads.append(extra)
        return tuple(pads)

    def forward(self, input, output_size=None):
        return self._fn(input, self.weight, self.bias, self.stride, self.padding,
                        self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution over [N, C_in, L]; weight [C_in, C_out / groups, k]."""

    _n = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution over [N, C_in, H, W]; weight [C_in, C_out / groups, kH, kW]."""

    _n = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution over [N, C_in, D, H, W]; weight [C_in, C_out / groups, kD,
    kH, kW]."""

    _n = 3
    _fn = staticmethod(F.conv_transpose3d)
