"""Convolution, pooling and resampling over channels-first [N, C, *spatial] inputs.

One family a module: conv2d (im2col + matmul, and its two adjoints), convnd (1-D/3-D and
transposed convolutions built on it), pool2d / pool (fixed and adaptive windows),
resample (interpolate, pixel shuffle, fold / unfold).
"""

from .conv2d import conv2d  # noqa: F401  (re-exported: importers use these)
from .convnd import (  # noqa: F401
    conv1d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from .fractional_pool import fractional_max_pool2d, fractional_max_pool3d  # noqa: F401
from .grid_sample import affine_grid, grid_sample  # noqa: F401
from .pool import (  # noqa: F401  (the 2-D adaptive pools: for nn.functional)
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool1d,
    max_pool1d,
)
from .pool2d import avg_pool2d, max_pool2d  # noqa: F401
from .pool3d import (  # noqa: F401  (3-D pools and adaptive_max_pool1d)
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool3d,
    avg_pool3d,
    max_pool3d,
)
from .resample import fold, interpolate, pixel_shuffle, pixel_unshuffle, unfold  # noqa: F401
from .unpool import max_unpool1d, max_unpool2d, max_unpool3d  # noqa: F401
