"""The three transforms every `sf.fft` function is made of: complex-to-complex over dims,
real-to-complex (the onesided half of the last dim's spectrum) and complex-to-real (its
inverse, from the half spectrum), each with PyTorch's `norm` ("backward", "ortho",
"forward").

Their gradients follow PyTorch's convention (dL/dx + i dL/dy): the adjoint of each
transform is the transform the other way with the dual norm (backward <-> forward).
Float32 input computes in complex64, float64 in complex128, as NumPy 2's pocketfft does.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...tensor import Tensor
from ..base import Op, apply

DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


class FFT(Op):
    """Complex-to-complex transform over `dims` (forward: e^{-2 pi i k n / N})."""

    name = "fft_c2c"

    def __init__(self, dims: tuple[int, ...], norm: str, forward: bool) -> None:
        self.dims, self.norm, self.forward_ = dims, norm, forward

    def infer(self, x):
        return x.shape, x.dtype

    def forward(self, x):
        fft = self.device.xp.fft
        fn = fft.fftn if self.forward_ else fft.ifftn
        if not self.dims or x.size == 0:
            return x.copy()
        return fn(x, axes=self.dims, norm=self.norm).astype(x.dtype, copy=False)

    def backward(self, g):
        return (_c2c(g, self.dims, DUAL[self.norm], not self.forward_),)


class RFFT(Op):
    """Real-to-complex transform along `dim`: its n // 2 + 1 non-negative frequencies."""

    name = "fft_r2c"

    def __init__(self, dim: int, norm: str) -> None:
        self.dim, self.norm = dim, norm

    def infer(self, x):
        self.n = x.shape[self.dim]
        shape = list(x.shape)
        shape[self.dim] = self.n // 2 + 1
        return tuple(shape), _dt.to_complex(x.dtype)

    def forward(self, x):
        out = self.device.xp.fft.rfft(x, axis=self.dim, norm=self.norm)
        return out.astype(_dt.to_complex(_dt.from_numpy_dtype(x.dtype)).np, copy=False)

    def backward(self, g):
        # the adjoint: the half spectrum zero-padded to n, transformed back, its real part
        from ..elementwise.complex_parts import real

        return (real(_c2c(pad_to(g, self.dim, self.n), (self.dim,), DUAL[self.norm],
                         False)),)


class IRFFT(Op):
    """Complex-to-real transform along `dim`: n real values from the n // 2 + 1 lowest
    frequencies of a Hermitian spectrum (imaginary parts at 0 and n / 2 ignored)."""

    name = "fft_c2r"

    def __init__(self, dim: int, norm: str, n: int) -> None:
        self.dim, self.norm, self.n = dim, norm, n

    def infer(self, x):
        shape = list(x.shape)
        shape[self.dim] = self.n
        return tuple(shape), _dt.to_real(x.dtype)

    def forward(self, x):
        out = self.device.xp.fft.irfft(x, n=self.n, axis=self.dim, norm=self.norm)
        return out.astype(_dt.to_real(_dt.from_numpy_dtype(x.dtype)).np, copy=False)

    def backward(self, g):
        # the onesided transform of g with the dual norm, the bins that stand for two
        # (all but 0 and n / 2) doubled
        from ...factories import ones

        half = _r2c(g, self.dim, DUAL[self.norm])
        m = half.shape[self.dim]
        w = ones(m, dtype=_dt.to_real(half.dtype), device=g.device) * 2.0
        if m:
            w[0] = 1.0
            if self.n % 2 == 0:
                w[m - 1] = 1.0
        shape = [1] * half.ndim
        shape[self.dim] = m
        return (half * w.reshape(shape),)


def _c2c(x: Tensor, dims: tuple[int, ...], norm: str, forward: bool) -> Tensor:
    """The complex transform of complex x over dims (non-negative)."""
    return apply(FFT(tuple(dims), norm, forward), x)


def _r2c(x: Tensor, dim: int, norm: str) -> Tensor:
    """The onesided transform of real x along dim (non-negative)."""
    return apply(RFFT(dim, norm), x)


def _c2r(x: Tensor, dim: int, norm: str, n: int) -> Tensor:
    """n real values along dim from the half spectrum x (of length n // 2 + 1 there)."""
    return apply(IRFFT(dim, norm, n), x)


def pad_to(x: Tensor, dim: int, n: int) -> Tensor:
    """x cut or zero-padded at the end of dim to length n (as `s` / `n` in torch.fft)."""
    size = x.shape[dim]
    if n == size:
        return x
    if n < size:
        return x.narrow(dim, 0, n)
    from ...factories import zeros
    from ..movement import cat

    shape = list(x.shape)
    shape[dim] = n - size
    return cat([x, zeros(*shape, dtype=x.dtype, device=x.device)], dim)
