"""Indexing, one home: `x[index]` and `x[index] = value`, index_select / index_add, gather /
scatter and the scatter family (scatter_reduce, index_copy, index_fill, index_reduce), the
flat-position writes (put, *_scatter, as_strided), and selection by value (nonzero,
masked_select / masked_scatter, take, searchsorted, unique).

Views, reshapes and joins stay in ops/movement/, which this package builds on.
"""

from __future__ import annotations

from .dim_index import (  # noqa: F401  (re-exported: importers use these)
    IndexAdd,
    IndexSelect,
    index_add,
    index_select,
)
from .flat_positions import (  # noqa: F401  (re-exported: importers use these)
    as_strided,
    as_strided_scatter,
    diagonal_scatter,
    put,
    select_scatter,
    slice_scatter,
)
from .gather_scatter import Gather, Scatter, ScatterAdd, gather, scatter_add  # noqa: F401

# scatter_reduce's `scatter` (it takes `reduce`) is the one: gather_scatter's is its fast path
from .scatter_reduce import (  # noqa: F401  (re-exported: importers use these)
    index_add_,
    index_copy,
    index_copy_,
    index_fill,
    index_fill_,
    index_reduce,
    index_reduce_,
    put_,
    scatter,
    scatter_,
    scatter_add_,
    scatter_reduce,
    scatter_reduce_,
)
from .selection import (  # noqa: F401  (re-exported: importers use these)
    argwhere,
    bucketize,
    histc,
    masked_scatter,
    masked_scatter_,
    masked_select,
    nonzero,
    nonzero_static,
    searchsorted,
    take,
    take_along_dim,
    unique,
    unique_consecutive,
)
from .subscript import __getitem__, __setitem__, index_put, index_put_  # noqa: F401
