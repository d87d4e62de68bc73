"""ResNet (He et al. 2016) as torchvision builds it: ResNet-18/34 of BasicBlocks, ResNet-50 of
Bottlenecks (stride on the 3x3 conv: "ResNet v1.5"), with torchvision's module names, so a
torchvision state dict loads key for key."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ... import nn
from ...errors import ShapeError
from ._api import Weights, WeightsEnum, register_model
from ._meta import _IMAGENET_CATEGORIES
from ._presets import ImageClassification
from ._utils import _ovewrite_named_param, handle_legacy_interface

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "ResNet18_Weights", "ResNet34_Weights",
           "ResNet50_Weights", "resnet18", "resnet34", "resnet50"]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1,
            dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution, padded to keep the size at stride 1, no bias (a BN follows)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution without bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """conv3x3 -> BN -> ReLU -> conv3x3 -> BN, plus the (downsampled) input, then ReLU."""

    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None, groups: int = 1, base_width: int = 64,
                 dilation: int = 1, norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (strided, grouped) -> 1x1 expand (x4), plus the input, then ReLU."""

    expansion: int = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None, groups: int = 1, base_width: int = 64,
                 dilation: int = 1, norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    """7x7/2 stem and 3x3/2 max pool, four stages (layer1..4), global average pool, fc."""

    def __init__(self, block: type[BasicBlock | Bottleneck], layers: list[int],
                 num_classes: int = 1000, zero_init_residual: bool = False, groups: int = 1,
                 width_per_group: int = 64, replace_stride_with_dilation: list[bool] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:  # per stage 2..4: dilate instead of stride 2
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element tuple, "
                             f"got {replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        dilate = replace_stride_with_dilation
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=dilate[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=dilate[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=dilate[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():  # torchvision's initialization (the fc keeps Linear's own)
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        # each residual branch starts at zero, so each block starts as the identity
        # (Goyal et al. 2017: +0.2-0.3% top-1)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block: type[BasicBlock | Bottleneck], planes: int, blocks: int,
                    stride: int = 1, dilate: bool = False) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                         dilation=self.dilation, norm_layer=norm_layer)
                   for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        if x.ndim != 4:
            raise ShapeError(f"ResNet: expected an image batch [B, 3, H, W], got "
                             f"{x.ndim} dims {list(x.shape)}", op="ResNet",
                             hint="add a batch dim with x.unsqueeze(0)" if x.ndim == 3 else None)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))

    def forward(self, x):
        return self._forward_impl(x)


def _resnet(block: type[BasicBlock | Bottleneck], layers: list[int],
            weights: WeightsEnum | None, progress: bool, **kwargs: Any) -> ResNet:
    state = None
    if weights is not None:
        _ovewrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
        # read first: a missing file fails before any parameter is drawn
        state = weights.get_state_dict(progress=progress, check_hash=True)
    model = ResNet(block, layers, **kwargs)
    if state is not None:
        model.load_state_dict(state)
    return model


_COMMON_META = {"min_size": (1, 1), "categories": _IMAGENET_CATEGORIES}
_RECIPE = "https://github.com/pytorch/vision/tree/main/references/classification#resnet"
_PAPER_DOCS = ("These weights reproduce closely the results of the paper using a simple training "
               "recipe.")
# torchvision's text, byte for byte (its meta compares equal)
_NEW_RECIPE_DOCS = """
                These weights improve upon the results of the original paper by using TorchVision's `new training recipe
                <https://pytorch.org/blog/how-to-train-state-of-the-art-models-using-torchvision-latest-primitives/>`_.
            """  # noqa: E501


class ResNet18_Weights(WeightsEnum):
    """ImageNet-1K weights of resnet18 (torchvision's entries)."""

    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/resnet18-f37072fd.pth",
        transforms=partial(ImageClassification, crop_size=224),
        meta={**_COMMON_META, "num_params": 11689512, "recipe": _RECIPE,
              "_metrics": {"ImageNet-1K": {"acc@1": 69.758, "acc@5": 89.078}},
              "_ops": 1.814, "_file_size": 44.661, "_docs": _PAPER_DOCS})
    DEFAULT = IMAGENET1K_V1


class ResNet34_Weights(WeightsEnum):
    """ImageNet-1K weights of resnet34 (torchvision's entries)."""

    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/resnet34-b627a593.pth",
        transforms=partial(ImageClassification, crop_size=224),
        meta={**_COMMON_META, "num_params": 21797672, "recipe": _RECIPE,
              "_metrics": {"ImageNet-1K": {"acc@1": 73.314, "acc@5": 91.420}},
              "_ops": 3.664, "_file_size": 83.275, "_docs": _PAPER_DOCS})
    DEFAULT = IMAGENET1K_V1


class ResNet50_Weights(WeightsEnum):
    """ImageNet-1K weights of resnet50: the paper's recipe (V1) and torchvision's new one (V2)."""

    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/resnet50-0676ba61.pth",
        transforms=partial(ImageClassification, crop_size=224),
        meta={**_COMMON_META, "num_params": 25557032, "recipe": _RECIPE,
              "_metrics": {"ImageNet-1K": {"acc@1": 76.130, "acc@5": 92.862}},
              "_ops": 4.089, "_file_size": 97.781, "_docs": _PAPER_DOCS})
    IMAGENET1K_V2 = Weights(
        url="https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
        transforms=partial(ImageClassification, crop_size=224, resize_size=232),
        meta={**_COMMON_META, "num_params": 25557032,
              "recipe": "https://github.com/pytorch/vision/issues/3995#issuecomment-1013906621",
              "_metrics": {"ImageNet-1K": {"acc@1": 80.858, "acc@5": 95.434}},
              "_ops": 4.089, "_file_size": 97.79,
              "_docs": _NEW_RECIPE_DOCS})
    DEFAULT = IMAGENET1K_V2


@register_model()
@handle_legacy_interface(lambda: ResNet18_Weights.IMAGENET1K_V1)
def resnet18(*, weights: ResNet18_Weights | None = None, progress: bool = True,
             **kwargs: Any) -> ResNet:
    """ResNet-18 (BasicBlocks 2-2-2-2); weights=None, a ResNet18_Weights entry or its name."""
    weights = ResNet18_Weights.verify(weights)
    return _resnet(BasicBlock, [2, 2, 2, 2], weights, progress, **kwargs)


@register_model()
@handle_legacy_interface(lambda: ResNet34_Weights.IMAGENET1K_V1)
def resnet34(*, weights: ResNet34_Weights | None = None, progress: bool = True,
             **kwargs: Any) -> ResNet:
    """ResNet-34 (BasicBlocks 3-4-6-3); weights=None, a ResNet34_Weights entry or its name."""
    weights = ResNet34_Weights.verify(weights)
    return _resnet(BasicBlock, [3, 4, 6, 3], weights, progress, **kwargs)


@register_model()
@handle_legacy_interface(lambda: ResNet50_Weights.IMAGENET1K_V1)
def resnet50(*, weights: ResNet50_Weights | None = None, progress: bool = True,
             **kwargs: Any) -> ResNet:
    """ResNet-50 (Bottlenecks 3-4-6-3); weights=None, a ResNet50_Weights entry or its name."""
    weights = ResNet50_Weights.verify(weights)
    return _resnet(Bottleneck, [3, 4, 6, 3], weights, progress, **kwargs)
