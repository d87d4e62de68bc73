"""torchvision's ResNet-18 adapted to 32x32 images (CIFAR-10), one training step each side.

The adaptation people write: a 3x3 stride-1 stem without the max pool
(`model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False); model.maxpool = nn.Identity()`),
10 classes, batch 32, SGD with momentum 0.9 and weight decay 5e-4, cross-entropy. shapeflow's
side is `shapeflow.vision.models.resnet18` (torchvision's module names, checked against
torchvision in tests/vision); PyTorch's is the same layout written out (tests/models/
twin_resnet.py: torchvision's wheel does not import next to the CPU torch), same weights.
"""

from __future__ import annotations

import numpy as np

CONFIG = dict(batch=32, size=32, num_classes=10)


def make_pair(batch: int = CONFIG["batch"], size: int = CONFIG["size"], seed: int = 0):
    """(shapeflow model, PyTorch model with the same weights, images, labels) as arrays."""
    import torch

    import shapeflow as sf
    from shapeflow.vision.models import resnet18
    from tests.models.twin_resnet import TorchResNet

    sf.manual_seed(seed)
    model = resnet18(num_classes=CONFIG["num_classes"])
    model.conv1 = sf.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = sf.nn.Identity()
    twin = TorchResNet(layers=(2, 2, 2, 2), num_classes=CONFIG["num_classes"], in_channels=3,
                       width=64, small_input=True)
    twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                          for k, v in model.state_dict().items()})
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    y = rng.integers(0, CONFIG["num_classes"], batch)
    return model, twin, x, y


def optimizer(lib, params):
    """SGD as the CIFAR recipes: lr 0.1, momentum 0.9, weight decay 5e-4."""
    extra = {"foreach": False} if lib.__name__ == "torch" else {}
    return lib.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4, **extra)


def make_step(batch: int = CONFIG["batch"], size: int = CONFIG["size"]) -> dict:
    """{"shapeflow": step, "torch": step}: one SGD training step each, for compare()."""
    import torch

    import shapeflow as sf

    model, twin, xa, ya = make_pair(batch, size)
    x, y, tx, ty = sf.tensor(xa), sf.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    opt, topt = optimizer(sf, model.parameters()), optimizer(torch, twin.parameters())

    def sf_step():
        loss = sf.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def torch_step():
        loss = torch.nn.functional.cross_entropy(twin(tx), ty)
        loss.backward()
        topt.step()
        topt.zero_grad()

    return {"shapeflow": sf_step, "torch": torch_step}
