"""Movement ops: views and rearrangements of data (reshape, expand, permute, ...).

One family a module; this package re-exports them, so `ops.movement.X` names stay as they were.
"""

from __future__ import annotations

# rearrangements (roll, rot90, tile, repeat_interleave, meshgrid, unfold...) and diagonals
from .arrange import (  # noqa: F401  (re-exported; the in-place ones: methods only)
    block_diag,
    broadcast_tensors,
    cartesian_prod,
    expand_as,
    meshgrid,
    repeat_interleave,
    roll,
    rot90,
    t,
    tile,
    unfold,
)

# broadcast_shapes and sum_to_size; combinations and unravel_index; unsafe_chunk/split;
# constant_pad_nd
from .broadcasting import (  # noqa: F401  (re-exported: importers use these)
    broadcast_shapes,
    sum_to_size,
)
from .combinatorics import (  # noqa: F401  (re-exported: importers use these)
    combinations,
    unravel_index,
)
from .constant_pad import (  # noqa: F401  (re-exported: importers use these)
    constant_pad_nd,
)
from .copies import (  # noqa: F401  (re-exported: importers use these)
    Clone,
    Flip,
    Repeat,
    Tril,
    Triu,
    clone,
    contiguous,
    flip,
    repeat,
    tril,
    triu,
)
from .diagonals import (  # noqa: F401  (re-exported: importers use these)
    diag,
    diag_embed,
    diagflat,
    diagonal,
    trace,
)
from .joins import (  # noqa: F401  (re-exported: importers use these)
    Cat,
    cat,
    chunk,
    concat,
    concatenate,
    promote_types,
    split,
    stack,
)
from .padding import (  # noqa: F401  (re-exported: importers use these)
    MaskedFill,
    Pad,
    masked_fill,
    masked_fill_,
    pad,
)

# logspace, tril_indices, triu_indices: made from sizes, as PyTorch's factories
from .ranges import (  # noqa: F401  (re-exported: importers use these)
    empty_permuted,
    empty_strided,
    logspace,
    tril_indices,
    triu_indices,
)

# resize_ and resize_as_ (in place, PyTorch's semantics on a tensor that owns its data)
from .resize import resize_, resize_as_  # noqa: F401  (resize_: a method only)
from .slicing import (  # noqa: F401  (re-exported: importers use these)
    Index,
    IndexBackward,
    basic_index,
    narrow,
    select,
    slice_size,
    unbind,
)

# NumPy-style stacking and splitting (hstack, tensor_split, atleast_2d, ravel, flipud...)
from .stacking import (  # noqa: F401  (re-exported: importers use these)
    atleast_1d,
    atleast_2d,
    atleast_3d,
    column_stack,
    dsplit,
    dstack,
    fliplr,
    flipud,
    hsplit,
    hstack,
    ravel,
    reshape_as,  # noqa: F401  (method only)
    split_with_sizes,
    tensor_split,
    vsplit,
    vstack,
)
from .unsafe_splits import (  # noqa: F401  (re-exported: importers use these)
    unsafe_chunk,
    unsafe_split,
)
from .views import (  # noqa: F401  (re-exported: importers use these)
    Expand,
    Permute,
    Reshape,
    View,
    _view_apply,
    broadcast_to,
    expand,
    flatten,
    infer_reshape,
    moveaxis,
    movedim,
    permute,
    reshape,
    squeeze,
    swapaxes,
    swapdims,
    transpose,
    unflatten,
    unsqueeze,
    view,
)
