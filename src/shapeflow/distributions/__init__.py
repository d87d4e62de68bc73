"""shapeflow.distributions: PyTorch's torch.distributions on shapeflow tensors.

Parameters broadcast, `rsample` carries gradients to them (Gamma, Beta and Dirichlet through
implicit reparameterization), `log_prob`, `entropy` and `kl_divergence` are autograd graphs,
and samples come from shapeflow's generator (`sf.manual_seed` makes them reproducible).
"""

from __future__ import annotations

from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftmaxTransform,
    TanhTransform,
    Transform,
)
from .uniform import Uniform

__all__ = ["AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform",
           "Dirichlet", "Distribution", "Exponential", "ExpTransform", "Gamma", "Independent",
           "Laplace", "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical",
           "PowerTransform", "SigmoidTransform", "SoftmaxTransform", "TanhTransform",
           "Transform", "TransformedDistribution", "Uniform", "constraints", "kl_divergence",
           "register_kl", "transforms"]
