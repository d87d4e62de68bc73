"""shapeflow.optim: optimizers (SGD, Adam, AdamW) and learning-rate schedulers."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
