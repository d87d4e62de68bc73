"""MobileNetV2 (Sandler et al. 2018) as torchvision builds it: `features` (a stem conv, inverted
residual blocks, a 1x1 conv to 1280), global average pool, `classifier` (dropout, linear),
with torchvision's module names."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ... import nn
from ._api import Weights, WeightsEnum, register_model
from ._meta import _IMAGENET_CATEGORIES
from ._misc import Conv2dNormActivation
from ._presets import ImageClassification
from ._utils import _make_divisible, _ovewrite_named_param, handle_legacy_interface

__all__ = ["MobileNetV2", "InvertedResidual", "MobileNet_V2_Weights", "mobilenet_v2"]


class InvertedResidual(nn.Module):
    """1x1 expand (ReLU6) -> 3x3 depthwise (ReLU6) -> 1x1 linear project, plus the input when
    the shape allows (stride 1, same width)."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.stride = stride
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:  # pointwise expansion
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=nn.ReLU6))
        layers += [
            Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim,
                                 norm_layer=norm_layer, activation_layer=nn.ReLU6),  # depthwise
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),  # pointwise, linear (no ReLU)
            norm_layer(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """Stem conv 3x3/2 -> inverted residual stages (t, c, n, s) -> 1x1 conv -> pool -> fc."""

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 inverted_residual_setting: list[list[int]] | None = None,
                 round_nearest: int = 8, block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None,
                 dropout: float = 0.2) -> None:
        super().__init__()
        if block is None:
            block = InvertedResidual
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        input_channel, last_channel = 32, 1280
        if inverted_residual_setting is None:
            inverted_residual_setting = [
                # t (expansion), c (channels), n (blocks), s (first block's stride)
                [1, 16, 1, 1],
                [6, 24, 2, 2],
                [6, 32, 3, 2],
                [6, 64, 4, 2],
                [6, 96, 3, 1],
                [6, 160, 3, 2],
                [6, 320, 1, 1],
            ]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError("inverted_residual_setting should be non-empty or a 4-element "
                             f"list, got {inverted_residual_setting}")
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features: list[nn.Module] = [Conv2dNormActivation(
            3, input_channel, stride=2, norm_layer=norm_layer, activation_layer=nn.ReLU6)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(input_channel, output_channel, s if i == 0 else 1,
                                      expand_ratio=t, norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1,
                                             norm_layer=norm_layer, activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Linear(self.last_channel, num_classes))

        for m in self.modules():  # torchvision's initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(x.flatten(1))

    def forward(self, x):
        return self._forward_impl(x)


_COMMON_META = {"num_params": 3504872, "min_size": (1, 1), "categories": _IMAGENET_CATEGORIES}
# torchvision's text, byte for byte (its meta compares equal)
_NEW_RECIPE_DOCS = """
                These weights improve upon the results of the original paper by using a modified version of TorchVision's
                `new training recipe
                <https://pytorch.org/blog/how-to-train-state-of-the-art-models-using-torchvision-latest-primitives/>`_.
            """  # noqa: E501


class MobileNet_V2_Weights(WeightsEnum):
    """ImageNet-1K weights of mobilenet_v2: the paper's recipe (V1) and a newer one (V2)."""

    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v2-b0353104.pth",
        transforms=partial(ImageClassification, crop_size=224),
        meta={**_COMMON_META,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/classification"
                        "#mobilenetv2",
              "_metrics": {"ImageNet-1K": {"acc@1": 71.878, "acc@5": 90.286}},
              "_ops": 0.301, "_file_size": 13.555,
              "_docs": "These weights reproduce closely the results of the paper using a simple "
                       "training recipe."})
    IMAGENET1K_V2 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v2-7ebf99e0.pth",
        transforms=partial(ImageClassification, crop_size=224, resize_size=232),
        meta={**_COMMON_META,
              "recipe": "https://github.com/pytorch/vision/issues/3995#new-recipe-with-reg-tuning",
              "_metrics": {"ImageNet-1K": {"acc@1": 72.154, "acc@5": 90.822}},
              "_ops": 0.301, "_file_size": 13.598, "_docs": _NEW_RECIPE_DOCS})
    DEFAULT = IMAGENET1K_V2


@register_model()
@handle_legacy_interface(lambda: MobileNet_V2_Weights.IMAGENET1K_V1)
def mobilenet_v2(*, weights: MobileNet_V2_Weights | None = None, progress: bool = True,
                 **kwargs: Any) -> MobileNetV2:
    """MobileNetV2 (width_mult, round_nearest, dropout ...); weights=None, an entry or its name."""
    weights = MobileNet_V2_Weights.verify(weights)
    state = None
    if weights is not None:
        _ovewrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
        # read first: a missing file fails before any parameter is drawn
        state = weights.get_state_dict(progress=progress, check_hash=True)
    model = MobileNetV2(**kwargs)
    if state is not None:
        model.load_state_dict(state)
    return model
