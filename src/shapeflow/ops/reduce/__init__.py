"""Reductions over dims: sum, mean, prod, max/min, var/std, logsumexp, cumsum, all/any, norm.

`dim` is an int, a tuple or None (all dims), negative ok; as in PyTorch an empty tuple
also means all dims for sum, mean, prod, amax/amin, var/std, logsumexp and norm.

One family a module; this package re-exports them, so `ops.reduce.X` names stay as they were.
"""

from __future__ import annotations

from ._common import (  # noqa: F401  (re-exported: importers use these)
    Reduction,
    expand_to,
    reduce_dims,
    reduced_shape,
)
from .cumulative import (  # noqa: F401  (re-exported: importers use these)
    Cumsum,
    cumsum,
)

# dist and pdist, renorm, the trapezoidal rule, torch.gradient, histograms
from .distances import (  # noqa: F401  (re-exported: importers use these)
    dist,
    pdist,
)
from .extrema import (  # noqa: F401  (re-exported: importers use these)
    AMax,
    ArgMax,
    MaxDim,
    MaxResult,
    MinResult,
    OneHot,
    amax,
    amin,
    argmax,
    argmin,
    max,
    min,
)
from .gradient import (  # noqa: F401  (re-exported: importers use these)
    gradient,
)

# hash_tensor: an xor fingerprint of the elements' bits
from .hashing import (  # noqa: F401  (re-exported: importers use these)
    hash_tensor,
)
from .histogram import (  # noqa: F401  (re-exported: importers use these)
    histogram,
    histogramdd,
)
from .integrate import (  # noqa: F401  (re-exported: importers use these)
    cumulative_trapezoid,
    trapezoid,
    trapz,
)
from .logical import (  # noqa: F401  (re-exported: importers use these)
    AllAny,
    all,
    any,
)
from .moments import (  # noqa: F401  (re-exported: importers use these)
    Std,
    Var,
    std,
    std_mean,
    var,
    var_mean,
)

# order and NaN-aware statistics (median, quantile, mode, nansum, cov, ...)
from .nan_stats import (  # noqa: F401  (re-exported: importers use these)
    aminmax,
    bincount,
    corrcoef,
    count_nonzero,
    cov,
    median,
    mode,
    nanmean,
    nanmedian,
    nanquantile,
    nansum,
    quantile,
)
from .norm import (  # noqa: F401  (re-exported: importers use these)
    VectorNorm,
    norm,
)
from .renorm import (  # noqa: F401  (re-exported: importers use these)
    renorm,
)

# running scans (cumprod, cummax, cummin, logcumsumexp) and diff
from .scans import (  # noqa: F401  (re-exported: importers use these)
    cummax,
    cummin,
    cumprod,
    cumprod_,  # noqa: F401  (method only)
    diff,
    logcumsumexp,
)
from .sums import (  # noqa: F401  (re-exported: importers use these)
    LogSumExp,
    Mean,
    Prod,
    Sum,
    logsumexp,
    mean,
    prod,
    sum,
)
