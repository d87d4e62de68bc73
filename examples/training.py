"""Training: an MLP learns the 8x8 digits, is checked on held-out images, saved and reloaded.

Run it: python examples/training.py (a few seconds)
"""

import os
import tempfile

import shapeflow as sf
from shapeflow import nn, optim
from shapeflow.data import DataLoader
from shapeflow.data.datasets import digits


def accuracy(model, dataset) -> float:
    """The fraction of images whose most likely class is the label."""
    model.eval()
    with sf.no_grad():
        x, y = dataset.tensors
        acc = (model(x).argmax(-1) == y).float().mean().item()
    model.train()
    return acc


sf.manual_seed(0)
train, test = digits("train"), digits("test")
model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = optim.AdamW(model.parameters(), lr=3e-3)
loader = DataLoader(train, batch_size=32, shuffle=True, seed=0)

for epoch in range(1, 9):
    total = 0.0
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(y)
    print(f"epoch {epoch}: loss {total / len(train):.3f}, test accuracy "
          f"{accuracy(model, test):.1%}")

# Save (atomically: a crash never leaves half a file) and load into a fresh model.
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "mlp.safetensors")
    sf.save(model.state_dict(), path)
    fresh = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    fresh.load_state_dict(sf.load(path))
print(f"reloaded: test accuracy {accuracy(fresh, test):.1%}")
