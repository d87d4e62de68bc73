"""Fine-tune a torchvision ResNet-18 on an ImageFolder: a plain PyTorch + torchvision program.

Usage: torchvision_train.py DATA_ROOT WEIGHTS.pth OUT_DIR. The porting test runs it as written
with PyTorch, and with shapeflow after changing its import lines only.
"""

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms, utils


def main(data_root: str, weights: str, out_dir: str) -> None:
    """Train two epochs from the given weights, report the loss and accuracy, save the model."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tf = transforms.Compose([
        transforms.Resize(80),
        transforms.CenterCrop(64),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    train_set = datasets.ImageFolder(data_root, transform=tf)
    loader = DataLoader(train_set, batch_size=4, shuffle=False, num_workers=0)
    print(f"classes {train_set.classes} images {len(train_set)}")

    model = models.resnet18(num_classes=len(train_set.classes))
    model.load_state_dict(torch.load(weights, map_location="cpu"))
    model = model.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, weight_decay=5e-4)

    step = 0
    for epoch in range(2):
        model.train()
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            if step == 0:
                torchvision.utils.save_image(images, out / "first_batch_raw.png", nrow=2)
                utils.save_image(images, out / "first_batch.png", nrow=2, normalize=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.8f}")
            step += 1

    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            probs = F.softmax(model(images.to(device)), dim=1)
            correct += (probs.argmax(dim=1) == labels.to(device)).sum().item()
    print(f"accuracy {correct / len(train_set):.6f}")
    torch.save(model.state_dict(), out / "model.pt")


if __name__ == "__main__":
    main(*sys.argv[1:4])
