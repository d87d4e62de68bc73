"""Activation layers, as PyTorch's: ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, ReLU6, SELU,
CELU, Hardtanh, LeakyReLU, ELU, Mish, Softplus, Softsign, Softmin, LogSoftmax, LogSigmoid,
GLU, Hardswish, Hardsigmoid, PReLU, Tanhshrink, Softshrink, Hardshrink."""

from __future__ import annotations

import warnings

from ..errors import ArgumentValueError, ShapeError
from ..factories import full
from . import functional as F
from .module import Module
from .parameter import Parameter


class ReLU(Module):
    """max(x, 0)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace) if self.inplace else F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ShapeError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace) if self.inplace else F.silu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


def _legacy_softmax_dim(ndim: int) -> int:
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """exp(x) / sum(exp(x)) along `dim`."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim(input.ndim)
        return F.softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _Inplace(Module):
    """A layer with PyTorch's `inplace` flag (accepted; the result is a new tensor)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Hardtanh(Module):
    """clamp(x, min_val, max_val), gradient 1 strictly inside."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ArgumentValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class Threshold(Module):
    """x where x > threshold, else value."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class RReLU(Module):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element in training
    (shapeflow's generator), and is (lower + upper) / 2 in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (
            ", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SELU(_Inplace):
    def forward(self, input):
        return F.selu(input)


class Mish(_Inplace):
    def forward(self, input):
        return F.mish(input)


class Hardswish(_Inplace):
    def forward(self, input):
        return F.hardswish(input)


class Hardsigmoid(_Inplace):
    def forward(self, input):
        return F.hardsigmoid(input)


class CELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (
            ", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class _Shrink(Module):
    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(_Shrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Hardshrink(_Shrink):
    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class _DimLayer(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(_DimLayer):
    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim(input.ndim)
        return F.softmin(input, dim)


class LogSoftmax(_DimLayer):
    def forward(self, input):
        dim = self.dim if self.dim is not None else _legacy_softmax_dim(input.ndim)
        return F.log_softmax(input, dim)


class GLU(Module):
    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learned slope (one, or one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), init, device=device, dtype=dtype))

    def reset_parameters(self) -> None:
        from . import init as _init

        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Hardtanh", "ReLU6", "SELU",
           "CELU", "ELU", "LeakyReLU", "Mish", "Softplus", "Softsign", "Softmin", "LogSoftmax",
           "LogSigmoid", "GLU", "Hardswish", "Hardsigmoid", "PReLU", "Tanhshrink", "Softshrink",
           "Hardshrink", "Threshold", "RReLU"]
