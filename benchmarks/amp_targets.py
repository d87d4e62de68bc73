"""Issue 18's accuracy targets, run once (too slow for the suite): the bundled GPT trained
200 steps on Shakespeare in fp32 and in bf16-mixed (loss within 2%), and the demo's ViT on
the digits in fp32 and in bf16-mixed (test accuracy within 1 point).

    PYTHONPATH=src python benchmarks/amp_targets.py [--steps 200] [--epochs 40]
"""

from __future__ import annotations

import argparse
import time

from shapeflow.cli._schedule import warmup_cosine


def gpt(precision: str, steps: int) -> dict:
    from shapeflow.cli.train import train_gpt

    start = time.perf_counter()
    out = train_gpt(steps=steps, seed=0, sample_tokens=1, save=None, precision=precision)
    return out | {"seconds": time.perf_counter() - start}


def vit(precision: str, epochs: int, seed: int = 0) -> dict:
    """The demo's training (cli/demo.py), its forward and loss in `precision`."""
    import shapeflow as sf
    from shapeflow import nn, optim
    from shapeflow.cli.amp_step import AmpStep
    from shapeflow.cli.demo import DEMO_VIT, evaluate
    from shapeflow.data import DataLoader
    from shapeflow.data.datasets import digits
    from shapeflow.models import ViT

    sf.manual_seed(seed)
    train, test = digits("train"), digits("test")
    model = ViT(**DEMO_VIT)
    amp = AmpStep(precision, model)
    loader = DataLoader(train, batch_size=64, shuffle=True, seed=seed)
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05,
                      master_weights=amp.master_weights)
    total = epochs * len(loader)
    warmup = max(1, total // 20)
    sched = warmup_cosine(opt, total, warmup)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    start = time.perf_counter()
    for _ in range(epochs):
        for x, y in loader:
            with amp.autocast():
                loss = criterion(model(x), y)
            amp.backward_and_step(loss, opt, model.parameters())
            sched.step()
    seconds = time.perf_counter() - start
    with amp.autocast():
        acc = evaluate(model, test)
    return {"accuracy": acc, "last_loss": loss.item(), "seconds": seconds}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--epochs", type=int, default=40)
    args = p.parse_args(argv)
    g = {prec: gpt(prec, args.steps) for prec in ("fp32", "bf16-mixed")}
    v = {prec: vit(prec, args.epochs) for prec in ("fp32", "bf16-mixed")}
    for prec in g:
        print(f"GPT {args.steps} steps {prec}: train loss {g[prec]['last_loss']:.4f}, "
              f"validation {g[prec]['val_loss']:.4f} ({g[prec]['seconds']:.0f} s)")
    rel = abs(g["bf16-mixed"]["last_loss"] / g["fp32"]["last_loss"] - 1)
    print(f"  bf16-mixed vs fp32: {rel:.2%} (target <= 2%)")
    for prec in v:
        print(f"ViT {args.epochs} epochs {prec}: test accuracy {v[prec]['accuracy']:.2%} "
              f"({v[prec]['seconds']:.0f} s)")
    gap = abs(v["bf16-mixed"]["accuracy"] - v["fp32"]["accuracy"]) * 100
    print(f"  bf16-mixed vs fp32: {gap:.2f} points (target <= 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
