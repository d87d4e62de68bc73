"""ResNet (He et al. 2016), torchvision's layout and parameter names: ResNet-18 by default.

Widths and depths are configurable, and `small_input=True` swaps the 7x7/2 stem and its
max pool for a 3x3/1 conv (as CIFAR ResNets do), so 8x8 digits keep their pixels.
"""

from __future__ import annotations

from .. import nn
from ..errors import ShapeError
from ..shape import format_shape


class BasicBlock(nn.Module):
    """conv3x3 -> BN -> ReLU -> conv3x3 -> BN, plus the (projected) input, then ReLU."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Stem, four stages of BasicBlocks (stride 2 from the second), global pool, linear head."""

    def __init__(self, layers=(2, 2, 2, 2), num_classes: int = 1000, in_channels: int = 3,
                 width: int = 64, small_input: bool = False) -> None:
        super().__init__()
        layers = tuple(layers)
        if not layers or any(n < 1 for n in layers):
            raise ValueError(f"ResNet: layers must be positive block counts, got {layers}")
        self.in_channels, self.small_input = in_channels, small_input
        self.inplanes = width
        if small_input:
            self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.Identity() if small_input else nn.MaxPool2d(3, 2, 1)
        for i, blocks in enumerate(layers):
            stage = self._make_layer(width * 2 ** i, blocks, 1 if i == 0 else 2)
            setattr(self, f"layer{i + 1}", stage)
        self.num_stages = len(layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(self.inplanes, num_classes)
        for m in self.modules():  # torchvision's initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes))
        out = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        out += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*out)

    def forward(self, x):
        if x.ndim != 4:
            raise ShapeError(f"ResNet: expected an image batch [B, C, H, W], got "
                             f"{format_shape(x.shape)}", op="ResNet",
                             hint="add a batch dim with x.unsqueeze(0)" if x.ndim == 3 else None)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(self.avgpool(x).flatten(1))
