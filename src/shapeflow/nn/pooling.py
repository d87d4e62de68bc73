"""Max, average, adaptive and fractional pools over [N, C, L], [N, C, H, W] and
[N, C, D, H, W]."""

from __future__ import annotations

from ..errors import ArgumentValueError
from . import functional as F
from .module import Module


class MaxPool2d(Module):
    """The maximum over each kernel_size window (stride defaults to kernel_size)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        if self.return_indices:
            return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                ceil_mode=self.ceil_mode, return_indices=True)
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean over each kernel_size window (stride defaults to kernel_size)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool1d(MaxPool2d):
    """The maximum over each kernel_size window of [N, C, L] (stride defaults to kernel)."""

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """The mean over each kernel_size window of [N, C, L] (stride defaults to kernel)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average [N, C, L] over output_size windows that tile L (as evenly as they can)."""

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average [N, C, H, W] over output_size windows (None keeps that dim's size)."""

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveMaxPool2d(_AdaptivePool):
    """Maximum of [N, C, H, W] over output_size windows (None keeps that dim's size)."""

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class MaxPool3d(MaxPool2d):
    """The maximum over each kernel_size window of [N, C, D, H, W] (stride defaults to
    kernel_size)."""

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(AvgPool2d):
    """The mean over each kernel_size window of [N, C, D, H, W] (stride defaults to
    kernel_size)."""

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average [N, C, D, H, W] over output_size windows (None keeps that dim's size)."""

    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Maximum of [N, C, L] over output_size windows that tile L (as evenly as they can)."""

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """Maximum of [N, C, D, H, W] over output_size windows (None keeps that dim's size)."""

    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _MaxUnpool(Module):
    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """MaxPool1d's partial inverse: its values back at its indices, zeros elsewhere."""

    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxUnpool2d(_MaxUnpool):
    """MaxPool2d's partial inverse: its values back at its indices, zeros elsewhere."""

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxUnpool3d(_MaxUnpool):
    """MaxPool3d's partial inverse: its values back at its indices, zeros elsewhere."""

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class _FractionalMaxPool(Module):
    """Max over kernel_size windows at pseudo-random starts (Graham's fractional pooling)."""

    nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None,
                 return_indices: bool = False, _random_samples=None) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _ntuple(kernel_size, self.nd)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else _ntuple(output_size, self.nd)
        self.output_ratio = None if output_ratio is None else _ntuple(output_ratio, self.nd)
        if output_size is None and output_ratio is None:
            raise ArgumentValueError(f"{name} requires specifying either an output size, or a "
                                     "pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ArgumentValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ArgumentValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        fn = F.fractional_max_pool2d if self.nd == 2 else F.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio,
                  self.return_indices, _random_samples=self._random_samples)


def _ntuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class FractionalMaxPool2d(_FractionalMaxPool):
    """Fractional max pooling of [N, C, H, W] to output_size (or input size * output_ratio)."""

    nd = 2


class FractionalMaxPool3d(_FractionalMaxPool):
    """Fractional max pooling of [N, C, D, H, W] to output_size (or size * output_ratio)."""

    nd = 3
