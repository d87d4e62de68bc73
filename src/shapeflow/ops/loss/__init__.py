"""Losses, one home: regression, binary and class-target cross-entropy, distributions'
(KL, Gaussian and Poisson NLL), margin and ranking, and the distances embeddings compare.

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
from .distance import cosine_similarity, pairwise_distance  # noqa: F401  (re-exported: importers use these)
from .margin import (  # noqa: F401  (re-exported: importers use these)
    cosine_embedding_loss,
    margin_ranking_loss,
    soft_margin_loss,
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
