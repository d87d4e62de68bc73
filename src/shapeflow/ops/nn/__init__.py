"""Neural-network primitives: linear, softmax, norms, embedding, dropout, losses, attention.

Each is one fused primitive (one NumPy kernel forward, a minimal `saved` set). Backward
takes one of two paths: during an ordinary backward (grad mode off) it calls private
NumPy kernels (`*_backward` ops, fast and memory-lean); under
`create_graph=True` it writes the same gradient with differentiable Tensor ops, so a
gradient of a gradient is exact. Row-wise kernels work on blocks of rows that stay in
cache (`_common._blocks`), which is about twice as fast as whole-array passes.

One family a module; this package re-exports them, so `ops.nn.X` names stay as they were.
"""

from __future__ import annotations

from .activation import (  # noqa: F401  (re-exported: importers use these)
    Elu,
    LeakyRelu,
    elu,
    leaky_relu,
)
from .activations_extra import (  # noqa: F401  (re-exported: importers use these)
    Hardtanh,
    celu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
)
from .attention import (  # noqa: F401  (re-exported: importers use these)
    Attention,
    scaled_dot_product_attention,
)
from .batch_norm import (  # noqa: F401  (re-exported: importers use these)
    BatchNorm,
    BatchNormBackward,
    batch_norm,
)
from .cross_entropy import (  # noqa: F401  (re-exported: importers use these)
    CrossEntropy,
    CrossEntropyBackward,
    NllLoss,
    NllLossBackward,
    cross_entropy,
    nll_loss,
)
from .dropout import (  # noqa: F401  (re-exported: importers use these)
    Dropout,
    MaskScale,
    dropout,
)
from .embedding import (  # noqa: F401  (re-exported: importers use these)
    Embedding,
    EmbeddingBackward,
    OneHot,
    embedding,
    one_hot,
)
from .group_norm import (  # noqa: F401  (re-exported: importers use these)
    group_norm,
    instance_norm,
    normalize,
)
from .linear import (  # noqa: F401  (re-exported: importers use these)
    Linear,
    linear,
)
from .loss import (  # noqa: F401  (re-exported: importers use these)
    BCEWithLogits,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    l1_loss,
    mse_loss,
)
from .loss_extra import cosine_similarity, pairwise_distance
from .norm import (  # noqa: F401  (re-exported: importers use these)
    LayerNorm,
    NormBackward,
    NormWeightBackward,
    RMSNorm,
    layer_norm,
    rms_norm,
)
from .softmax import (  # noqa: F401  (re-exported: importers use these)
    LogSoftmax,
    Softmax,
    SoftmaxBackward,
    log_softmax,
    softmax,
)

METHODS = ("softmax", "log_softmax", "hardshrink")
__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm", "embedding", "dropout",
           "selu", "celu", "prelu", "hardshrink",  # the activations torch has at top level
           "cosine_similarity", "pairwise_distance"]  # as torch.*, same signatures as F.*
