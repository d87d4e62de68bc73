"""Movement ops: views and rearrangements of data (reshape, expand, permute, ...).

One family a module; this package re-exports them, so `ops.movement.X` names stay as they were.
"""

from __future__ import annotations

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
from .dim_index import (  # noqa: F401  (re-exported: importers use these)
    IndexAdd,
    IndexSelect,
    index_add,
    index_select,
)
from .gather_scatter import (  # noqa: F401  (re-exported: importers use these)
    Gather,
    Scatter,
    ScatterAdd,
    gather,
    scatter,
    scatter_add,
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
from .slicing import (  # noqa: F401  (re-exported: importers use these)
    Index,
    IndexBackward,
    basic_index,
    narrow,
    select,
    slice_size,
    unbind,
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

METHODS = ("reshape", "view", "expand", "broadcast_to", "permute", "transpose", "unsqueeze",
           "squeeze", "clone", "contiguous", "flatten", "unflatten", "movedim", "moveaxis",
           "swapaxes", "swapdims", "narrow", "select", "unbind", "split", "chunk", "repeat",
           "flip", "tril", "triu", "gather", "scatter_add", "scatter", "index_select",
           "index_add", "masked_fill", "masked_fill_")
__all__ = [m for m in METHODS if m != "masked_fill_"] + [
    "cat", "concat", "concatenate", "stack", "pad"]

# rearrangements (roll, rot90, tile, repeat_interleave, meshgrid, unfold...) and diagonals
from . import arrange as _arrange  # noqa: E402
from . import diagonals as _diagonals  # noqa: E402
from .arrange import *  # noqa: E402, F403
from .arrange import expand_as, unfold  # noqa: E402, F401  (methods only)
from .diagonals import *  # noqa: E402, F403

METHODS = METHODS + _arrange.METHODS + _diagonals.METHODS
__all__ += _arrange.__all__ + _diagonals.__all__

# NumPy-style stacking and splitting (hstack, tensor_split, atleast_2d, ravel, flipud...)
from . import stacking as _stacking  # noqa: E402
from .stacking import *  # noqa: E402, F403
from .stacking import reshape_as  # noqa: E402, F401  (method only)

METHODS = METHODS + _stacking.METHODS
__all__ += _stacking.__all__

# logspace, tril_indices, triu_indices: made from sizes, as PyTorch's factories
from . import ranges as _ranges  # noqa: E402
from .ranges import *  # noqa: E402, F403

__all__ += _ranges.__all__

# as_strided and the ops that write where a view would be (select/slice/diagonal_scatter, put)
from . import flat_positions as _flat_positions  # noqa: E402
from .flat_positions import *  # noqa: E402, F403

METHODS = METHODS + _flat_positions.METHODS
__all__ += _flat_positions.__all__

# broadcast_shapes and sum_to_size; combinations and unravel_index; unsafe_chunk/split;
# constant_pad_nd
from . import broadcasting as _broadcasting  # noqa: E402
from . import combinatorics as _combinatorics  # noqa: E402
from . import constant_pad as _constant_pad  # noqa: E402
from . import unsafe_splits as _unsafe_splits  # noqa: E402
from .broadcasting import *  # noqa: E402, F403
from .combinatorics import *  # noqa: E402, F403
from .constant_pad import *  # noqa: E402, F403
from .unsafe_splits import *  # noqa: E402, F403

METHODS = METHODS + _broadcasting.METHODS + _unsafe_splits.METHODS
__all__ += (_broadcasting.__all__ + _combinatorics.__all__ + _constant_pad.__all__
            + _unsafe_splits.__all__)

# resize_ and resize_as_ (in place, PyTorch's semantics on a tensor that owns its data)
from . import resize as _resize  # noqa: E402
from .resize import resize_, resize_as_  # noqa: E402, F401  (resize_: a method only)

METHODS = METHODS + _resize.METHODS
__all__ += _resize.__all__
