"""The PyTorch twin of sf.models.ResNet: torchvision's layout and names, written out
(torchvision is not installed here). The model tests and the benchmark use it."""

import torch
import torch.nn as tnn


class TorchBlock(tnn.Module):
    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.relu = tnn.ReLU()
        self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = tnn.Sequential(tnn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                             tnn.BatchNorm2d(planes))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + idt)


class TorchResNet(tnn.Module):
    """torchvision's resnet layout, written out (torchvision is not installed here)."""

    def __init__(self, layers, num_classes, in_channels, width, small_input):
        super().__init__()
        self.conv1 = tnn.Conv2d(in_channels, width, 3, 1, 1, bias=False) if small_input else \
            tnn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = tnn.BatchNorm2d(width)
        self.relu = tnn.ReLU()
        self.maxpool = tnn.Identity() if small_input else tnn.MaxPool2d(3, 2, 1)
        inplanes = width
        for i, n in enumerate(layers):
            planes = width * 2 ** i
            blocks = [TorchBlock(inplanes, planes, 1 if i == 0 else 2)]
            blocks += [TorchBlock(planes, planes, 1) for _ in range(1, n)]
            setattr(self, f"layer{i + 1}", tnn.Sequential(*blocks))
            inplanes = planes
        self.n = len(layers)
        self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
        self.fc = tnn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(self.n):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))
