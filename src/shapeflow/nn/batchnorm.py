"""BatchNorm1d/2d/3d and InstanceNorm1d/2d: per-channel normalization, running estimates."""

from __future__ import annotations

from .. import dtypes
from ..errors import ShapeError
from ..factories import ones, zeros
from ..ops.base import effect, reads_data
from ..shape import format_shape
from ..tensor import tensor
from . import functional as F
from . import init
from .module import Module
from .normalization import add_affine, reset_affine


class _NormBase(Module):
    """Parameters and buffers under PyTorch's names: weight, bias, running_mean,
    running_var, num_batches_tracked."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        add_affine(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 tensor(0, dtype=dtypes.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        reset_affine(self)

    def _check_input_dim(self, input) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims: tuple = ()
    _layout = ""

    def _check_input_dim(self, input) -> None:
        if input.ndim not in self._dims:
            name = type(self).__name__
            want = " or ".join(f"{d}-D" for d in self._dims)
            hint = None
            if input.ndim == self._dims[0] - 1:
                hint = "add a batch dim with x.unsqueeze(0)"
            elif input.ndim in (3, 4, 5):
                hint = f"{('BatchNorm1d', 'BatchNorm2d', 'BatchNorm3d')[input.ndim - 3]} " \
                    f"takes a {input.ndim}-D input"
            raise ShapeError(f"{name}: expected {want} input {self._layout}, got "
                             f"{input.ndim}-D input {format_shape(input.shape)}", op=name,
                             hint=hint)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            effect(_count_batch, nbt, (nbt,))
            if self.momentum is None:  # the cumulative moving average: 1 / batches seen,
                reads_data("BatchNorm(momentum=None)'s batch count")  # a host value
                factor = 1.0 / float(nbt._data) if nbt._data is not None else 0.0
        # batch stats in training, and in eval when no running stats are kept
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            bn_training, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over [N, C] or [N, C, L] (statistics per channel C)."""

    _dims = (2, 3)
    _layout = "[N, C] or [N, C, L]"


class BatchNorm2d(_BatchNorm):
    """Batch normalization over [N, C, H, W] (statistics per channel C)."""

    _dims = (4,)
    _layout = "[N, C, H, W]"


class BatchNorm3d(_BatchNorm):
    """Batch normalization over [N, C, D, H, W] (statistics per channel C)."""

    _dims = (5,)
    _layout = "[N, C, D, H, W]"


class _InstanceNorm(_NormBase):
    """Statistics per sample and channel; running estimates only if track_running_stats."""

    _dims: tuple = ()
    _layout = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        name = type(self).__name__
        if input.ndim not in self._dims:
            raise ShapeError(f"{name}: expected {self._dims[0]}-D (unbatched) or "
                             f"{self._dims[1]}-D input {self._layout}, got {input.ndim}-D input "
                             f"{format_shape(input.shape)}", op=name)
        unbatched = input.ndim == self._dims[0]
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.1, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over [N, C, L] (or [C, L]): statistics per sample and channel."""

    _dims = (2, 3)
    _layout = "[N, C, L]"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over [N, C, H, W] (or [C, H, W])."""

    _dims = (3, 4)
    _layout = "[N, C, H, W]"


def _count_batch(nbt) -> None:
    """num_batches_tracked += 1, in place (sf.compile's replay repeats it per step)."""
    if nbt._data is not None:
        nbt._data += 1
    nbt._version[0] += 1
