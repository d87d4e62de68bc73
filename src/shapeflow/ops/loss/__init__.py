"""Losses, one home: regression, binary and class-target cross-entropy, distributions'
(KL, Gaussian and Poisson NLL), margin and ranking (hinge, multi-class, triplet), and the
distances embeddings compare.

One kind a module; this package re-exports their names (`ops.loss.X`). Each function's
sf / F names are its `@public(...)` declaration (ops/registry.py).
"""

from __future__ import annotations

from .binary import (  # noqa: F401  (re-exported: importers use these)
    BCEWithLogits,
    BinaryCrossEntropy,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
)
from .cross_entropy import (  # noqa: F401  (re-exported: importers use these)
    CrossEntropy,
    CrossEntropyBackward,
    NllLoss,
    NllLossBackward,
    cross_entropy,
    nll_loss,
)
from .ctc import CtcLoss, CtcLossBackward, ctc_loss  # noqa: F401  (re-exported)
from .distance import cosine_similarity, pairwise_distance  # noqa: F401  (re-exported: importers use these)
from .linear_cross_entropy import (  # noqa: F401  (re-exported: importers use these)
    LinearCrossEntropyOptions,
    linear_cross_entropy,
)
from .margin import (  # noqa: F401  (re-exported: importers use these)
    cosine_embedding_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    soft_margin_loss,
)
from .multiclass_margin import (  # noqa: F401  (re-exported: importers use these)
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
)
from .probabilistic import (  # noqa: F401  (re-exported: importers use these)
    gaussian_nll_loss,
    kl_div,
    poisson_nll_loss,
)
from .regression import (  # noqa: F401  (re-exported: importers use these)
    huber_loss,
    l1_loss,
    mse_loss,
    smooth_l1_loss,
)
from .triplet import (  # noqa: F401  (re-exported: importers use these)
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
