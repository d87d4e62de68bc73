"""Neural-network primitives: linear, softmax, embedding, dropout, attention, recurrences.

Each is one fused primitive (one NumPy kernel forward, a minimal `saved` set). Backward
takes one of two paths: during an ordinary backward (grad mode off) it calls private
NumPy kernels (`*_backward` ops, fast and memory-lean); under
`create_graph=True` it writes the same gradient with differentiable Tensor ops, so a
gradient of a gradient is exact. Row-wise kernels work on blocks of rows that stay in
cache (`_common._blocks`), which is about twice as fast as whole-array passes.

One family a module; this package re-exports them, so `ops.nn.X` names stay as they were.
Activations, losses and norms have packages of their own: ops/activation/, ops/loss/,
ops/norm/.
"""

from __future__ import annotations

from . import feature_mixing  # noqa: F401  (bilinear, channel_shuffle: F names it declares)
from .attention import (  # noqa: F401  (re-exported: importers use these)
    Attention,
    scaled_dot_product_attention,
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
from .embedding_bag import embedding_bag  # noqa: F401  (its F name)
from .linear import (  # noqa: F401  (re-exported: importers use these)
    Linear,
    linear,
)
from .multi_head_attention import multi_head_attention_forward  # noqa: F401  (its F name)
from .native_norms import native_batch_norm  # noqa: F401  (and its two siblings)
from .softmax import (  # noqa: F401  (re-exported: importers use these)
    LogSoftmax,
    Softmax,
    SoftmaxBackward,
    log_softmax,
    softmax,
)
