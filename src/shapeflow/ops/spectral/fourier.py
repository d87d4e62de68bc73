"""`sf.fft`, as torch.fft: discrete Fourier transforms of one, two or n dims (fft,
rfft and hfft families with their inverses), `n` / `s` (cut or zero-pad each dim first),
`dim` and `norm` ("backward": inverse scaled by 1/n; "ortho": both by 1/sqrt(n);
"forward": forward by 1/n), with gradients; fftshift, ifftshift, fftfreq and rfftfreq.

Real input gives complex64 (float32) or complex128 (float64); integers and bools are taken as
the default float first. Each function is made of the three primitives of transforms.py.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import dtypes as _dt
from ...errors import ArgumentError, DTypeRuntimeError, ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..elementwise.casts import cast
from ..elementwise.complex_parts import conj
from .transforms import _c2c as c2c
from .transforms import _c2r as c2r
from .transforms import _r2c as r2c
from .transforms import pad_to

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn",
           "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(op: str, norm: str | None) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ArgumentError(f"{op}: Invalid normalization mode: {norm!r}", op=op,
                            hint='use "backward", "ortho" or "forward"')
    return norm


def _check_out(op: str, out) -> None:
    if out is not None:
        raise ArgumentError(f"{op}: out= is not supported", op=op,
                            hint="assign the result instead")


def _float_input(op: str, x: Tensor, allow_complex: bool) -> Tensor:
    """x as a float32/float64 or complex tensor (ints and bools: the default float)."""
    dt = x.dtype
    if dt.is_complex:
        if not allow_complex:
            raise DTypeRuntimeError(f"{op} expects a real input tensor, but got {dt}", op=op,
                                    operands=[("input", describe(x))],
                                    hint="take real(x) or use the complex transform fft")
        return x
    if dt.is_integer or dt.is_bool:
        return cast(x, _dt.get_default_dtype())
    if dt not in (_dt.float32, _dt.float64):
        raise DTypeRuntimeError(f"{op}: unsupported dtype {dt} (float32 and float64 only)",
                                op=op, operands=[("input", describe(x))],
                                hint="cast with .float() first")
    return x


def _as_complex(x: Tensor) -> Tensor:
    return x if x.dtype.is_complex else cast(x, _dt.to_complex(x.dtype))


def _dims_and_sizes(op: str, x: Tensor, s, dim) -> tuple[list[int], list[int | None]]:
    """The transformed dims (non-negative, unique) and each one's requested size (None:
    keep), by torch.fft's rules: no dim means the last len(s) dims, or all of them."""
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(s, int):
        s = (s,)
    if dim is None:
        dims = list(range(x.ndim - len(s), x.ndim)) if s is not None else list(range(x.ndim))
        if s is not None and len(s) > x.ndim:
            raise ShapeRuntimeError(f"{op}: got shape with {len(s)} values but input tensor "
                                    f"only has {x.ndim} dimensions.", op=op,
                                    operands=[("input", describe(x))])
    else:
        dims = [normalize_dim(d, x.ndim, op) for d in dim]
        if len(set(dims)) != len(dims):
            raise ShapeRuntimeError(f"{op}: FFT dims must be unique", op=op,
                                    operands=[("input", describe(x))])
    if s is None:
        sizes: list[int | None] = [None] * len(dims)
    else:
        if len(s) != len(dims):
            raise ShapeRuntimeError(f"{op}: When given, dim and shape arguments must have the "
                                    f"same length (got {len(dims)} dims and {len(s)} sizes)",
                                    op=op)
        sizes = [None if n == -1 else n for n in s]
        for n in sizes:
            if n is not None and n < 1:
                raise ShapeRuntimeError(f"{op}: Invalid number of data points ({n}) "
                                        f"specified", op=op, hint="give sizes of at least 1")
    return dims, sizes


def _resized(op: str, x: Tensor, dims, sizes) -> Tensor:
    for d, n in zip(dims, sizes):
        if n is None:
            if x.shape[d] < 1:
                raise ShapeRuntimeError(f"{op}: Invalid number of data points (0) specified",
                                        op=op, operands=[("input", describe(x))])
            continue
        x = pad_to(x, d, n)
    return x


# ---- the transforms' implementations: impl(op, x, s, dim, norm) ------------------------

def _c2c_public(op: str, x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    norm = _norm(op, norm)
    dims, sizes = _dims_and_sizes(op, x, s, dim)
    x = _as_complex(_float_input(op, x, True))
    return c2c(_resized(op, x, dims, sizes), tuple(dims), norm, forward)


def _fft_public(op: str, x: Tensor, s, dim, norm) -> Tensor:
    return _c2c_public(op, x, s, dim, norm, True)


def _ifft_public(op: str, x: Tensor, s, dim, norm) -> Tensor:
    return _c2c_public(op, x, s, dim, norm, False)


def _rfft_public(op: str, x: Tensor, s, dim, norm) -> Tensor:
    """Real input, onesided output: the last dim's half spectrum, the others in full."""
    norm = _norm(op, norm)
    dims, sizes = _dims_and_sizes(op, x, s, dim)
    if not dims:
        raise ShapeRuntimeError(f"{op} must transform at least one axis", op=op)
    x = _resized(op, _float_input(op, x, False), dims, sizes)
    out = r2c(x, dims[-1], norm)  # the last dim onesided, then the others in full
    return c2c(out, tuple(dims[:-1]), norm, True) if len(dims) > 1 else out


def _irfft_public(op: str, x: Tensor, s, dim, norm) -> Tensor:
    """rfft's inverse: real output from the half spectrum of the last dim."""
    norm = _norm(op, norm)
    dims, sizes = _dims_and_sizes(op, x, s, dim)
    if not dims:
        raise ShapeRuntimeError(f"{op} must transform at least one axis", op=op)
    x = _as_complex(_float_input(op, x, True))
    last = dims[-1]
    n = sizes[-1] if sizes[-1] is not None else 2 * (x.shape[last] - 1)
    if n < 1:
        raise ShapeRuntimeError(f"{op}: Invalid number of data points ({n}) specified", op=op,
                                operands=[("input", describe(x))])
    x = _resized(op, x, dims[:-1], sizes[:-1])
    x = pad_to(x, last, n // 2 + 1)
    if len(dims) > 1:
        x = c2c(x, tuple(dims[:-1]), norm, False)
    return c2r(x, last, norm, n)


# hfft(x) is irfft(conj(x)) with the norm's direction swapped; ihfft(x) is conj(rfft(x)),
# swapped likewise

def _hfft_public(op: str, x: Tensor, s, dim, norm) -> Tensor:
    norm = _norm(op, norm)
    x = _as_complex(_float_input(op, x, True))
    return _irfft_public(op, conj(x), s, dim, _SWAP[norm])


def _ihfft_public(op: str, x: Tensor, s, dim, norm) -> Tensor:
    norm = _norm(op, norm)
    return conj(_rfft_public(op, x, s, dim, _SWAP[norm]))


# ---- the public functions: torch.fft's two signatures, each written once ----------------

_ONE_DIM = "one"  # (input, n=None, dim=-1, norm=None): fft, rfft, ...


def _declare(name: str, impl: Callable[..., Tensor], dims, doc: str) -> Callable[..., Tensor]:
    """torch.fft's function `name` over impl: with dims=_ONE_DIM the 1-D signature
    (n, dim=-1), otherwise the s signature whose dim defaults to `dims` ((-2, -1) or None)."""
    if dims is _ONE_DIM:
        def transform(input: Tensor, n: int | None = None, dim: int = -1,  # noqa: A002
                      norm: str | None = None, *, out=None) -> Tensor:
            _check_out(name, out)
            return impl(name, input, None if n is None else (n,), (dim,), norm)
    else:
        def transform(input: Tensor, s=None, dim=dims, norm: str | None = None, *,  # noqa: A002
                      out=None) -> Tensor:
            _check_out(name, out)
            return impl(name, input, s, dim, norm)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = doc
    return transform


def _family(impl: Callable[..., Tensor], base: str, docs: tuple[str, str, str]) -> tuple:
    """One family's three functions: `base` (1-D), `base`2 and `base`n, over impl."""
    return tuple(_declare(name, impl, dims, doc) for name, dims, doc in zip(
        (base, base + "2", base + "n"), (_ONE_DIM, (-2, -1), None), docs))


fft, fft2, fftn = _family(_fft_public, "fft", (
    "The one-dimensional discrete Fourier transform along dim.",
    "The two-dimensional discrete Fourier transform (over the last two dims).",
    "The n-dimensional discrete Fourier transform (all dims unless s or dim say)."))
ifft, ifft2, ifftn = _family(_ifft_public, "ifft", (
    "The one-dimensional inverse discrete Fourier transform along dim.",
    "The two-dimensional inverse discrete Fourier transform.",
    "The n-dimensional inverse discrete Fourier transform."))
rfft, rfft2, rfftn = _family(_rfft_public, "rfft", (
    "The transform of real input along dim: its n // 2 + 1 non-negative frequencies.",
    "rfft over the last of the two dims, the full transform over the other.",
    "rfft over the last transformed dim, the full transform over the others."))
irfft, irfft2, irfftn = _family(_irfft_public, "irfft", (
    "The inverse of rfft: n real values (2 * (size - 1) by default) along dim.",
    "The inverse of rfft2.", "The inverse of rfftn."))
hfft, hfft2, hfftn = _family(_hfft_public, "hfft", (
    "The transform of a Hermitian-symmetric signal given by its half: n real values.",
    "hfft over two dims.", "hfft over n dims (the last one Hermitian)."))
ihfft, ihfft2, ihfftn = _family(_ihfft_public, "ihfft", (
    "The inverse of hfft: the n // 2 + 1 half of a real signal's inverse transform.",
    "The inverse of hfft2.", "The inverse of hfftn."))


# ---- shifts and frequencies -------------------------------------------------------------

def _shift(op: str, x: Tensor, dim, sign: int) -> Tensor:
    from ..movement import roll

    if dim is None:
        dims = tuple(range(x.ndim))
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(normalize_dim(d, x.ndim, op) for d in dims)
    if not dims:
        return x
    shifts = tuple(sign * (x.shape[d] // 2) for d in dims)
    return roll(x, shifts, dims)


def fftshift(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """The zero frequency moved to the middle of each dim (all dims by default)."""
    return _shift("fftshift", input, dim, 1)


def ifftshift(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """The inverse of fftshift (they differ for odd sizes)."""
    return _shift("ifftshift", input, dim, -1)


def _freq_dtype(op: str, dtype):
    dt = _dt.get_default_dtype() if dtype is None else _dt.get_dtype(dtype)
    if not dt.is_floating_point:
        raise DTypeRuntimeError(f"{op}: expected a floating-point dtype, got {dt}", op=op)
    return dt


def fftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None,
            requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """The sample frequencies of an n-point transform: [0, 1, ..., -2, -1] / (d n)."""
    from ...factories import arange, check_layout

    _check_out("fftfreq", out)
    check_layout(layout, "fftfreq")
    dt = _freq_dtype("fftfreq", dtype)
    k = arange(n, dtype=_dt.int64, device=device)
    k = k - (k >= (n + 1) // 2).to(_dt.int64) * n  # the upper half counts down from -n/2
    out_ = (k.to(dt) * (1.0 / (d * n))) if n else k.to(dt)
    return out_.requires_grad_(requires_grad) if requires_grad else out_


def rfftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """The sample frequencies of rfft's output: [0, 1, ..., n // 2] / (d n)."""
    from ...factories import arange, check_layout

    _check_out("rfftfreq", out)
    check_layout(layout, "rfftfreq")
    dt = _freq_dtype("rfftfreq", dtype)
    k = arange(n // 2 + 1, dtype=_dt.int64, device=device).to(dt)
    out_ = k * (1.0 / (d * n)) if n else k
    return out_.requires_grad_(requires_grad) if requires_grad else out_

