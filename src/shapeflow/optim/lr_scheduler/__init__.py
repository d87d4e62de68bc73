"""Learning-rate schedulers with PyTorch's formulas, step for step (torch.optim.lr_scheduler):
one module per kind of schedule."""

from __future__ import annotations

from .base import LRScheduler
from .composite import SequentialLR
from .cosine import CosineAnnealingLR, CosineAnnealingWarmRestarts
from .cyclic import CyclicLR, OneCycleLR
from .decay import ConstantLR, ExponentialLR, LambdaLR, LinearLR, MultiStepLR, PolynomialLR, StepLR
from .plateau import ReduceLROnPlateau

__all__ = [
    "LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
    "ExponentialLR", "CosineAnnealingLR", "SequentialLR", "OneCycleLR", "CyclicLR",
    "CosineAnnealingWarmRestarts", "PolynomialLR", "ReduceLROnPlateau"]
