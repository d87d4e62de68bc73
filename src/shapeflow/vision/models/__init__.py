"""torchvision.models' classifiers with torchvision's names: resnet18/34/50, vgg11/16 (and
_bn), mobilenet_v2, their weights enums, and get_model / list_models.

Module and parameter names match torchvision's, so a torchvision state dict loads key for key
(`model.load_state_dict(tv_model.state_dict())`). Pretrained weights are never downloaded.
"""

from . import mobilenetv2, resnet, vgg
from ._api import (
    Weights,
    WeightsEnum,
    get_model,
    get_model_builder,
    get_model_weights,
    get_weight,
    list_models,
)
from .mobilenetv2 import MobileNet_V2_Weights, MobileNetV2, mobilenet_v2
from .resnet import (
    ResNet,
    ResNet18_Weights,
    ResNet34_Weights,
    ResNet50_Weights,
    resnet18,
    resnet34,
    resnet50,
)
from .vgg import (
    VGG,
    VGG11_BN_Weights,
    VGG11_Weights,
    VGG16_BN_Weights,
    VGG16_Weights,
    vgg11,
    vgg11_bn,
    vgg16,
    vgg16_bn,
)

__all__ = ["Weights", "WeightsEnum", "get_model", "get_model_builder", "get_model_weights",
           "get_weight", "list_models", "ResNet", "ResNet18_Weights", "ResNet34_Weights",
           "ResNet50_Weights", "resnet18", "resnet34", "resnet50", "VGG", "VGG11_Weights",
           "VGG11_BN_Weights", "VGG16_Weights", "VGG16_BN_Weights", "vgg11", "vgg11_bn", "vgg16",
           "vgg16_bn", "MobileNetV2", "MobileNet_V2_Weights", "mobilenet_v2", "mobilenetv2",
           "resnet", "vgg"]
