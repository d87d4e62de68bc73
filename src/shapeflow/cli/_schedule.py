"""The learning-rate schedule the bundled training recipes share: linear warmup, then cosine."""

from __future__ import annotations

from .. import optim


def warmup_cosine(opt: optim.Optimizer, total: int, warmup: int) -> optim.lr_scheduler.SequentialLR:
    """From 10% of the rate up to it over `warmup` steps, then a cosine down over the rest."""
    return optim.lr_scheduler.SequentialLR(opt, [
        optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warmup),
        optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, total - warmup)),
    ], milestones=[warmup])
