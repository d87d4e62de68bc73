"""shapeflow.optim: optimizers (SGD, Adam, AdamW, Adadelta, RMSprop, Adagrad, Adamax, NAdam,
RAdam, LBFGS) and learning-rate schedulers."""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "RMSprop", "Adagrad", "Adamax",
           "NAdam", "RAdam", "LBFGS", "lr_scheduler"]
