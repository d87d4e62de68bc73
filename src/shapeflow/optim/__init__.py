"""shapeflow.optim: optimizers (SGD, Adam, AdamW, Adadelta) and learning-rate schedulers."""

from . import lr_scheduler
from .adadelta import Adadelta
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "lr_scheduler"]
