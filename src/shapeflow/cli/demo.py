"""`shapeflow demo`: the three ideas on one small model, end to end in about a minute."""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from ..inspect.units import format_bytes
from ._progress import progress_bar
from ._schedule import warmup_cosine

DEMO_VIT = dict(image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=64, depth=2,
                heads=4, mlp_ratio=2, dropout=0.0)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `demo` subcommand on an argparse subparsers object."""
    d = subparsers.add_parser("demo",
                              help="shape chain, train a ViT on digits, memory, checkpoint")
    d.add_argument("--epochs", type=int, default=40)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default=None, help="where to write the checkpoint")
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow demo` with parsed arguments; the exit status."""
    from ._inputs import check_positive

    check_positive(epochs=args.epochs)
    return run_demo(epochs=args.epochs, seed=args.seed, out=args.out)


def evaluate(model, dataset, batch_size: int = 512) -> float:
    """Top-1 accuracy of model on a TensorDataset."""
    from ..autograd.grad_mode import no_grad
    from ..data import DataLoader

    model.eval()
    correct = 0
    with no_grad():
        for x, y in DataLoader(dataset, batch_size=batch_size):
            correct += int((model(x).numpy().argmax(-1) == y.numpy()).sum())
    model.train()
    return correct / len(dataset)


def run_demo(epochs: int = 40, seed: int = 0, out: str | None = None) -> int:
    """Print the chain, train, report memory, round-trip a checkpoint; 0 on success."""
    from rich.console import Console  # here, not at import: `shapeflow --help` stays quick

    import shapeflow as sf
    from shapeflow import nn, optim
    from shapeflow.data import DataLoader
    from shapeflow.data.datasets import digits
    from shapeflow.models import ViT

    console = Console()
    sf.manual_seed(seed)
    train, test = digits("train"), digits("test")
    model = ViT(**DEMO_VIT)

    console.rule("[bold]1. The shape chain, before any data exists")
    chain = sf.summary(model, sf.empty("B", 1, 8, 8, device="meta")).chain()
    for line in chain.splitlines():
        console.print("  " + line)

    console.rule("[bold]2. Training the ViT on 8x8 digits")
    n_params = sum(p.numel() for p in model.parameters())
    _say(console, f"{len(train)} training and {len(test)} test images, {n_params:,} parameters")
    loader = DataLoader(train, batch_size=64, shuffle=True, seed=seed)
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    total = epochs * len(loader)
    warmup = max(1, total // 20)
    sched = warmup_cosine(opt, total, warmup)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    start = time.perf_counter()
    with progress_bar(console, "  epoch {task.fields[epoch]:>3}") as progress:
        task = progress.add_task("train", total=total, epoch=1, loss=None)
        for epoch in range(1, epochs + 1):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                sched.step()
                progress.update(task, advance=1, epoch=epoch, loss=loss.item())
    elapsed = time.perf_counter() - start
    acc = evaluate(model, test)
    _say(console, f"test accuracy {acc:.1%} after {epochs} epoch{'s' * (epochs > 1)} in "
         f"{elapsed:.1f} s")

    console.rule("[bold]3. Why training needs more memory than inference")
    _print_memory(console, model)

    console.rule("[bold]4. Save, reload, check")
    with tempfile.TemporaryDirectory(prefix="shapeflow-") as scratch:  # gone when done
        path = out or os.path.join(scratch, "vit_digits.safetensors")
        sf.save(model.state_dict(), path)
        size = os.path.getsize(path)
        restored = ViT(**DEMO_VIT)
        restored.load_state_dict(sf.load(path))
    acc2 = evaluate(restored, test)
    same = "the same" if acc2 == acc else "DIFFERENT"
    where = path if out else "a temporary file (--out PATH keeps it)"
    _say(console, f"saved {size:,} bytes to {where}; reloaded accuracy {acc2:.1%}: {same}")
    run_demo.last_accuracy = acc
    return 0 if acc2 == acc else 1


def _print_memory(console, model) -> None:
    """The report for one training step of the demo's batch, and what inference needs."""
    import shapeflow as sf
    from shapeflow.nn import functional as F

    x = sf.empty(64, 1, 8, 8, device="meta")
    y = sf.empty(64, dtype=sf.int64, device="meta")
    rep = sf.memory.report(model, x, loss_fn=F.cross_entropy, target=y, optimizer="adamw")
    console.print(rep, highlight=False)  # its tables fit the console's width
    _say(console, f"training peak {format_bytes(rep.peak)} vs inference peak "
         f"{format_bytes(rep.inference_peak)}: gradients, AdamW's two moments and the "
         f"{format_bytes(rep.activations)} backward keeps")


def _say(console, text: str) -> None:
    """A line of prose, indented under its heading (wrapped lines too)."""
    from rich.padding import Padding

    console.print(Padding(text, (0, 0, 0, 2), expand=False), highlight=False)
