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
from .norm import (  # noqa: F401  (re-exported: importers use these)
    VectorNorm,
    norm,
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

METHODS = ("sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var",
           "std", "logsumexp", "cumsum", "all", "any", "norm")
__all__ = [*METHODS, "std_mean", "var_mean"]

# running scans (cumprod, cummax, cummin, logcumsumexp) and diff
from . import scans as _scans  # noqa: E402
from .scans import *  # noqa: E402, F403
from .scans import cumprod_  # noqa: E402, F401  (method only)

METHODS = METHODS + _scans.METHODS
__all__ += _scans.__all__

# order and NaN-aware statistics (median, quantile, mode, nansum, cov, ...)
from . import nan_stats as _nan_stats  # noqa: E402
from .nan_stats import *  # noqa: E402, F403

METHODS = METHODS + _nan_stats.METHODS
__all__ += _nan_stats.__all__

# dist and pdist, renorm, the trapezoidal rule, torch.gradient, histograms
from . import distances as _distances  # noqa: E402
from . import gradient as _gradient  # noqa: E402
from . import histogram as _histogram  # noqa: E402
from . import integrate as _integrate  # noqa: E402
from . import renorm as _renorm  # noqa: E402
from .distances import *  # noqa: E402, F403
from .gradient import *  # noqa: E402, F403
from .histogram import *  # noqa: E402, F403
from .integrate import *  # noqa: E402, F403
from .renorm import *  # noqa: E402, F403

METHODS = METHODS + _renorm.METHODS + ("dist", "histogram")
__all__ += (_distances.__all__ + _gradient.__all__ + _histogram.__all__ + _integrate.__all__
            + _renorm.__all__)

# hash_tensor: an xor fingerprint of the elements' bits
from . import hashing as _hashing  # noqa: E402
from .hashing import *  # noqa: E402, F403

METHODS = METHODS + _hashing.METHODS
__all__ += _hashing.__all__
