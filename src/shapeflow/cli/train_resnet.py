"""`shapeflow train resnet`: a small ResNet (BatchNorm, residual blocks) on the bundled digits."""

from __future__ import annotations

import time

# The CLI's default: one block per stage, widths 16-32-64-128, a 3x3 stem for 8x8 images.
DIGITS_RESNET = dict(layers=(1, 1, 1, 1), num_classes=10, in_channels=1, width=16,
                     small_input=True)


def evaluate(model, dataset, batch_size: int = 256) -> float:
    """Accuracy in eval mode (BatchNorm uses its running statistics)."""
    import shapeflow as sf

    model.eval()
    x, y = dataset.tensors
    correct = 0
    with sf.no_grad():
        for i in range(0, len(y), batch_size):
            pred = model(x[i:i + batch_size]).argmax(-1)
            correct += int((pred == y[i:i + batch_size]).sum().item())
    model.train()
    return correct / len(y)


def train_resnet(epochs: int = 4, batch_size: int = 64, width: int = 16, lr: float = 3e-3,
                 seed: int = 0, save: str | None = None) -> dict:
    """Train on the 1,437 training digits, print the loss and the test accuracy, save a
    checkpoint if `save` is a path; return the losses and the accuracy."""
    import numpy as np
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    import shapeflow as sf
    from shapeflow import nn, optim
    from shapeflow.data import DataLoader
    from shapeflow.data.datasets import digits
    from shapeflow.models import ResNet

    console = Console()
    sf.manual_seed(seed)
    train, test = digits("train"), digits("test")
    config = {**DIGITS_RESNET, "width": width}
    model = ResNet(**config)
    n_params = sum(p.numel() for p in model.parameters())
    console.print(f"{len(train)} training and {len(test)} test images (8x8 digits), "
                  f"{n_params:,} parameters")
    loader = DataLoader(train, batch_size=batch_size, shuffle=True, seed=seed)
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    total = epochs * len(loader)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    criterion = nn.CrossEntropyLoss()
    losses = []
    start = time.perf_counter()
    with Progress(TextColumn("epoch {task.fields[epoch]:>3}"), BarColumn(),
                  TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("train", total=total, epoch=0, loss=float("nan"))
        for epoch in range(1, epochs + 1):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                sched.step()
                losses.append(loss.item())
                progress.update(task, advance=1, epoch=epoch, loss=losses[-1])
            epoch_loss = np.mean(losses[-len(loader):])
            progress.console.print(f"  epoch {epoch:>3}  loss {epoch_loss:.3f}")
    elapsed = time.perf_counter() - start
    acc = evaluate(model, test)
    console.print(f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f}; test accuracy "
                  f"{acc:.1%} after {epochs} epochs in {elapsed:.1f} s")
    if save:
        from .train import write_checkpoint

        write_checkpoint({"model": model.state_dict(), "config": config, "epochs": epochs,
                          "accuracy": acc}, save)
        console.print(f"saved {save} (weights with BatchNorm statistics, config)")
    return {"first_loss": losses[0], "last_loss": float(np.mean(losses[-10:])), "accuracy": acc}


def load_resnet(path: str):
    """The model from a checkpoint `shapeflow train resnet --save PATH` wrote."""
    import shapeflow as sf
    from shapeflow.models import ResNet

    ckpt = sf.load(path)
    model = ResNet(**ckpt["config"])
    model.load_state_dict(ckpt["model"])
    return model
