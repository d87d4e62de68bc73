"""torchvision.ops.misc's Conv2dNormActivation: conv, norm, activation as one Sequential
(children named 0, 1, 2, so that state dict keys match torchvision's)."""

from __future__ import annotations

from collections.abc import Callable

from ... import nn


class Conv2dNormActivation(nn.Sequential):
    """Conv2d -> norm_layer -> activation_layer; "same" padding and no conv bias by default."""

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: int | tuple[int, int] = 3, stride: int | tuple[int, int] = 1,
                 padding: int | tuple[int, int] | str | None = None, groups: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU,
                 dilation: int | tuple[int, int] = 1, inplace: bool | None = True,
                 bias: bool | None = None) -> None:
        if padding is None:  # keeps H and W at stride 1, for odd kernels
            if isinstance(kernel_size, int) and isinstance(dilation, int):
                padding = (kernel_size - 1) // 2 * dilation
            else:
                k = (kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
                d = (dilation,) * 2 if isinstance(dilation, int) else tuple(dilation)
                padding = tuple((k[i] - 1) // 2 * d[i] for i in range(2))
        if bias is None:  # a norm layer's shift makes the conv's bias redundant
            bias = norm_layer is None
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                            dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer(**({} if inplace is None else {"inplace": inplace})))
        super().__init__(*layers)
        self.out_channels = out_channels
