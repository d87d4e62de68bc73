"""A style-transfer training step (fast-neural-style's TransformerNet) in shapeflow and PyTorch.

PyTorch's examples/fast_neural_style network: reflection padding before every convolution,
a 9x9 convolution in and out, two strided 3x3 downsamplings, five residual blocks, nearest
upsampling (x2) then a 3x3 convolution, InstanceNorm2d(affine=True) after each inner
convolution; batch 4 of 128x128 images, Adam, and an MSE loss against a fixed target (the
example's content term without its VGG). The model is written once against a torch-like
module (`torch` or `shapeflow`), so both sides run the same program, op for op.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

CONFIG = dict(batch=4, size=128)


def build(lib: ModuleType):
    """TransformerNet in `lib` (torch or shapeflow): the example's source, module for module."""
    nn = lib.nn

    class ConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super().__init__()
            self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            return self.conv2d(self.reflection_pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = nn.InstanceNorm2d(channels, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.relu(self.in1(self.conv1(x)))
            return self.in2(self.conv2(out)) + x

    class UpsampleConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            if self.upsample:
                x = nn.functional.interpolate(x, mode="nearest", scale_factor=self.upsample)
            return self.conv2d(self.reflection_pad(x))

    class TransformerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ConvLayer(3, 32, kernel_size=9, stride=1)
            self.in1 = nn.InstanceNorm2d(32, affine=True)
            self.conv2 = ConvLayer(32, 64, kernel_size=3, stride=2)
            self.in2 = nn.InstanceNorm2d(64, affine=True)
            self.conv3 = ConvLayer(64, 128, kernel_size=3, stride=2)
            self.in3 = nn.InstanceNorm2d(128, affine=True)
            self.res1 = ResidualBlock(128)
            self.res2 = ResidualBlock(128)
            self.res3 = ResidualBlock(128)
            self.res4 = ResidualBlock(128)
            self.res5 = ResidualBlock(128)
            self.deconv1 = UpsampleConvLayer(128, 64, kernel_size=3, stride=1, upsample=2)
            self.in4 = nn.InstanceNorm2d(64, affine=True)
            self.deconv2 = UpsampleConvLayer(64, 32, kernel_size=3, stride=1, upsample=2)
            self.in5 = nn.InstanceNorm2d(32, affine=True)
            self.deconv3 = ConvLayer(32, 3, kernel_size=9, stride=1)
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.in1(self.conv1(x)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.relu(self.in3(self.conv3(y)))
            y = self.res5(self.res4(self.res3(self.res2(self.res1(y)))))
            y = self.relu(self.in4(self.deconv1(y)))
            y = self.relu(self.in5(self.deconv2(y)))
            return self.deconv3(y)

    return TransformerNet()


def make_pair(batch: int = CONFIG["batch"], size: int = CONFIG["size"], seed: int = 0):
    """(shapeflow model, PyTorch model with the same weights, images, targets) as arrays."""
    import torch

    import shapeflow as sf

    sf.manual_seed(seed)
    model = build(sf)
    twin = build(torch)
    with torch.no_grad():
        twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                              for k, v in model.state_dict().items()})
    rng = np.random.default_rng(seed)
    x = rng.random((batch, 3, size, size), np.float32) * 255  # the example's 0-255 images
    target = rng.random((batch, 3, size, size), np.float32) * 255
    return model, twin, x, target


def make_step(batch: int = CONFIG["batch"], size: int = CONFIG["size"]) -> dict:
    """{"shapeflow": step, "torch": step}: one Adam training step each, for compare()."""
    import torch

    import shapeflow as sf

    model, twin, xa, ta = make_pair(batch, size)
    x, t, tx, tt = sf.tensor(xa), sf.tensor(ta), torch.tensor(xa), torch.tensor(ta)
    opt = sf.optim.Adam(model.parameters(), lr=1e-3)
    topt = torch.optim.Adam(twin.parameters(), lr=1e-3, foreach=False)

    def sf_step():
        loss = sf.nn.functional.mse_loss(model(x), t)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def torch_step():
        loss = torch.nn.functional.mse_loss(twin(tx), tt)
        loss.backward()
        topt.step()
        topt.zero_grad()

    return {"shapeflow": sf_step, "torch": torch_step}
