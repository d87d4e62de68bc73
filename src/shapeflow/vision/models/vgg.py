"""VGG (Simonyan & Zisserman 2014) as torchvision builds it: `features` (3x3 convs and 2x2 max
pools), a 7x7 adaptive average pool, and a three-layer `classifier`; VGG-11 and VGG-16, each
with and without BatchNorm, with torchvision's module names."""

from __future__ import annotations

from functools import partial
from typing import Any

from ... import nn
from ._api import Weights, WeightsEnum, register_model
from ._meta import _IMAGENET_CATEGORIES
from ._presets import ImageClassification
from ._utils import _ovewrite_named_param, handle_legacy_interface

__all__ = ["VGG", "VGG11_Weights", "VGG11_BN_Weights", "VGG16_Weights", "VGG16_BN_Weights",
           "vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "make_layers", "cfgs"]


class VGG(nn.Module):
    """features -> AdaptiveAvgPool2d((7, 7)) -> flatten -> classifier (4096, 4096, classes)."""

    def __init__(self, features: nn.Module, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes))
        if init_weights:  # torchvision's initialization
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(x.flatten(1))


def make_layers(cfg: list[str | int], batch_norm: bool = False) -> nn.Sequential:
    """The `features` Sequential of a config: ints are 3x3 conv widths, "M" a 2x2 max pool."""
    layers: list[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        conv2d = nn.Conv2d(in_channels, int(v), kernel_size=3, padding=1)
        layers += ([conv2d, nn.BatchNorm2d(int(v)), nn.ReLU(inplace=True)] if batch_norm
                   else [conv2d, nn.ReLU(inplace=True)])
        in_channels = int(v)
    return nn.Sequential(*layers)


# the paper's configurations: A is VGG-11, B VGG-13, D VGG-16, E VGG-19
cfgs: dict[str, list[str | int]] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512,
          512, 512, "M"],
}


def _vgg(cfg: str, batch_norm: bool, weights: WeightsEnum | None, progress: bool,
         **kwargs: Any) -> VGG:
    state = None
    if weights is not None:
        kwargs["init_weights"] = False  # the loaded weights replace every value anyway
        if weights.meta["categories"] is not None:
            _ovewrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
        # read first: a missing file fails before 130M parameters are drawn
        state = weights.get_state_dict(progress=progress, check_hash=True)
    model = VGG(make_layers(cfgs[cfg], batch_norm=batch_norm), **kwargs)
    if state is not None:
        model.load_state_dict(state)
    return model


_COMMON_META = {
    "min_size": (32, 32),
    "categories": _IMAGENET_CATEGORIES,
    "recipe": "https://github.com/pytorch/vision/tree/main/references/classification"
              "#alexnet-and-vgg",
    "_docs": """These weights were trained from scratch by using a simplified training recipe.""",
}


# torchvision's text, byte for byte (its meta compares equal)
_FEATURES_DOCS = """
                These weights can't be used for classification because they are missing values in the `classifier`
                module. Only the `features` module has valid values and can be used for feature extraction. The weights
                were trained using the original input standardization method as described in the paper.
            """  # noqa: E501


def _imagenet(url: str, num_params: int, acc1: float, acc5: float, ops: float,
              file_size: float) -> Weights:
    return Weights(url=url, transforms=partial(ImageClassification, crop_size=224),
                   meta={**_COMMON_META, "num_params": num_params,
                         "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}},
                         "_ops": ops, "_file_size": file_size})


class VGG11_Weights(WeightsEnum):
    """ImageNet-1K weights of vgg11 (torchvision's entries)."""

    IMAGENET1K_V1 = _imagenet("https://download.pytorch.org/models/vgg11-8a719046.pth",
                              132863336, 69.020, 88.628, 7.609, 506.84)
    DEFAULT = IMAGENET1K_V1


class VGG11_BN_Weights(WeightsEnum):
    """ImageNet-1K weights of vgg11_bn (torchvision's entries)."""

    IMAGENET1K_V1 = _imagenet("https://download.pytorch.org/models/vgg11_bn-6002323d.pth",
                              132868840, 70.370, 89.810, 7.609, 506.881)
    DEFAULT = IMAGENET1K_V1


class VGG16_Weights(WeightsEnum):
    """ImageNet-1K weights of vgg16, and SSD's feature-only weights (no classifier values)."""

    IMAGENET1K_V1 = _imagenet("https://download.pytorch.org/models/vgg16-397923af.pth",
                              138357544, 71.592, 90.382, 15.47, 527.796)
    IMAGENET1K_FEATURES = Weights(
        # ported from https://github.com/amdegroot/ssd.pytorch/
        url="https://download.pytorch.org/models/vgg16_features-amdegroot-88682ab5.pth",
        transforms=partial(ImageClassification, crop_size=224, mean=(0.48235, 0.45882, 0.40784),
                           std=(1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0)),
        meta={**_COMMON_META, "num_params": 138357544, "categories": None,
              "recipe": "https://github.com/amdegroot/ssd.pytorch#training-ssd",
              "_metrics": {"ImageNet-1K": {"acc@1": float("nan"), "acc@5": float("nan")}},
              "_ops": 15.47, "_file_size": 527.802,
              "_docs": _FEATURES_DOCS})
    DEFAULT = IMAGENET1K_V1


class VGG16_BN_Weights(WeightsEnum):
    """ImageNet-1K weights of vgg16_bn (torchvision's entries)."""

    IMAGENET1K_V1 = _imagenet("https://download.pytorch.org/models/vgg16_bn-6c64b313.pth",
                              138365992, 73.360, 91.516, 15.47, 527.866)
    DEFAULT = IMAGENET1K_V1


@register_model()
@handle_legacy_interface(lambda: VGG11_Weights.IMAGENET1K_V1)
def vgg11(*, weights: VGG11_Weights | None = None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-11 (config "A"); weights=None, a VGG11_Weights entry or its name."""
    return _vgg("A", False, VGG11_Weights.verify(weights), progress, **kwargs)


@register_model()
@handle_legacy_interface(lambda: VGG11_BN_Weights.IMAGENET1K_V1)
def vgg11_bn(*, weights: VGG11_BN_Weights | None = None, progress: bool = True,
             **kwargs: Any) -> VGG:
    """VGG-11 with BatchNorm after each conv; weights=None, a VGG11_BN_Weights entry or name."""
    return _vgg("A", True, VGG11_BN_Weights.verify(weights), progress, **kwargs)


@register_model()
@handle_legacy_interface(lambda: VGG16_Weights.IMAGENET1K_V1)
def vgg16(*, weights: VGG16_Weights | None = None, progress: bool = True, **kwargs: Any) -> VGG:
    """VGG-16 (config "D"); weights=None, a VGG16_Weights entry or its name."""
    return _vgg("D", False, VGG16_Weights.verify(weights), progress, **kwargs)


@register_model()
@handle_legacy_interface(lambda: VGG16_BN_Weights.IMAGENET1K_V1)
def vgg16_bn(*, weights: VGG16_BN_Weights | None = None, progress: bool = True,
             **kwargs: Any) -> VGG:
    """VGG-16 with BatchNorm after each conv; weights=None, a VGG16_BN_Weights entry or name."""
    return _vgg("D", True, VGG16_BN_Weights.verify(weights), progress, **kwargs)
