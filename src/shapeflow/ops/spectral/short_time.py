"""The short-time Fourier transform (`sf.stft`) and its inverse (`sf.istft`), as torch's:
windowed frames every hop_length samples, each transformed; istft adds the inverse frames
back, weighted by the window, and divides by the window's squared overlap (its envelope).

Both are composites: the frames are an unfold view, the overlap-add is unfold's gradient
(movement's Fold), the transforms are sf.fft's primitives, so gradients (input and window)
and the meta device come from them.
"""

from __future__ import annotations

import warnings

from ... import dtypes as _dt
from ...errors import ArgumentError, DTypeRuntimeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..base import apply
from ..elementwise.complex_views import view_as_real
from ..movement.arrange import Fold
from ..movement.padding import pad as _pad
from ..registry import public
from .transforms import _c2c, _c2r, _r2c, pad_to

_PAD_MODES = ("reflect", "constant", "replicate", "circular")
_WARNED: set[str] = set()  # PyTorch gives the missing-window warning once per process


def _warn_once(op: str, message: str) -> None:
    if op not in _WARNED:
        _WARNED.add(op)
        warnings.warn(message, UserWarning, stacklevel=3)


def _call(op: str, x: Tensor, n_fft: int, hop: int, win: int, window) -> str:
    """The call as PyTorch's messages show it: stft([2, 100] float32 cpu, n_fft=16, ...)."""
    w = "None" if window is None else describe(window)
    return f"{op}({describe(x)}, n_fft={n_fft}, hop_length={hop}, win_length={win}, window={w})"


def _sizes(n_fft: int, hop_length: int | None, win_length: int | None) -> tuple[int, int]:
    return (n_fft // 4 if hop_length is None else hop_length,
            n_fft if win_length is None else win_length)


def _padded_window(op: str, window: Tensor | None, n_fft: int, win: int, real_dtype,
                   device) -> Tensor | None:
    """The window centred in n_fft samples (zeros either side); None for all ones."""
    if window is not None and (window.ndim != 1 or window.shape[0] != win):
        raise ShapeRuntimeError(f"{op}: expected a 1D window tensor of size equal to "
                                f"win_length={win}, but got window with size "
                                f"{list(window.shape)}", op=op,
                                operands=[("window", describe(window))],
                                hint="give a window of win_length samples")
    if win == n_fft:
        return window
    if window is None:
        from ...factories import ones

        window = ones(win, dtype=real_dtype, device=device)
    left = (n_fft - win) // 2
    return _pad(window, (left, n_fft - win - left))


def _norm(normalized: bool) -> str:
    return "ortho" if normalized else "backward"


@public(method=True)
def stft(input: Tensor, n_fft: int, hop_length: int | None = None,  # noqa: A002
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Tensor:
    """The transform of windows of n_fft samples every hop_length: [B?, N, frames] complex
    (N = n_fft // 2 + 1 when onesided), or its real view [B?, N, frames, 2] when
    return_complex=False (deprecated, as in PyTorch)."""
    op = "stft"
    x = input
    hop, win = _sizes(n_fft, hop_length, win_length)
    if center and align_to_window is not None:
        raise ArgumentError("stft align_to_window should only be set when center = false",
                            op=op)
    complex_window = window is not None and window.dtype.is_complex
    if return_complex is None:
        if not (x.dtype.is_complex or complex_window):
            raise ArgumentError("stft requires the return_complex parameter be given for real "
                                "inputs, and will further require that return_complex=True in "
                                "a future PyTorch release.", op=op,
                                hint="pass return_complex=True (view_as_real gives the old "
                                     "layout)")
        return_complex = True
    elif not return_complex and not x.dtype.is_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch "
                      "release, stft will return complex tensors for all inputs, and "
                      "return_complex=False will raise an error.\nNote: you can still call "
                      "torch.view_as_real on the complex output to recover the old return "
                      "format.", UserWarning, stacklevel=2)
    if x.dtype not in (_dt.float32, _dt.float64, _dt.complex64, _dt.complex128):
        raise DTypeRuntimeError(f"{_call(op, x, n_fft, hop, win, window)}: expected a tensor "
                                f"of floating point or complex values", op=op,
                                operands=[("input", describe(x))],
                                hint="cast with .float() first")
    if x.ndim not in (1, 2):
        raise ShapeRuntimeError(f"{_call(op, x, n_fft, hop, win, window)}: expected a 1D or "
                                f"2D tensor", op=op, operands=[("input", describe(x))],
                                hint="flatten the batch dims into one first")
    if pad_mode not in _PAD_MODES:
        raise ArgumentError(f"stft: Unrecognised padding mode {pad_mode}", op=op,
                            hint="use 'reflect', 'constant', 'replicate' or 'circular'")
    if window is None:
        _warn_once(op, "A window was not provided. A rectangular window will be applied, "
                   "which is known to cause spectral leakage. Other windows such as "
                   "sf.hann_window or sf.hamming_window are recommended. To use a "
                   "rectangular window without this warning, pass window=sf.ones(n_fft).")
    batched = x if x.ndim == 2 else x.unsqueeze(0)
    if center:  # pads as F.pad does a [1, B, L] signal, so each frame t centres on t * hop
        half = n_fft // 2
        batched = _pad(batched.unsqueeze(0), (half, half), pad_mode).squeeze(0)
    length = batched.shape[-1]
    if not 0 < n_fft <= length:
        raise ShapeRuntimeError(f"{_call(op, x, n_fft, hop, win, window)}: expected "
                                f"0 < n_fft < {length}, but got n_fft={n_fft}", op=op,
                                operands=[("input", describe(x))])
    if hop <= 0:
        raise ArgumentError(f"{_call(op, x, n_fft, hop, win, window)}: expected hop_length > "
                            f"0, but got hop_length={hop}", op=op)
    if not 0 < win <= n_fft:
        raise ArgumentError(f"{_call(op, x, n_fft, hop, win, window)}: expected 0 < "
                            f"win_length <= n_fft, but got win_length={win}", op=op)
    w = _padded_window(op, window, n_fft, win, _dt.to_real(x.dtype), x.device)
    if not center and align_to_window:  # the frames start where the (shorter) window does
        side = (n_fft - win) // 2
        batched = _pad(batched.unsqueeze(0), (side, side), pad_mode).squeeze(0)
    frames = batched.unfold(-1, n_fft, hop)  # [B, frames, n_fft], a view
    if w is not None:
        frames = frames * w
    is_complex = frames.dtype.is_complex
    onesided = not is_complex if onesided is None else onesided
    norm = _norm(normalized)
    if onesided:
        if is_complex:
            raise ArgumentError("Cannot have onesided output if window or input is complex",
                                op=op, hint="pass onesided=False")
        out = _r2c(frames, 2, norm)
    else:
        out = _c2c(frames if is_complex else frames.to(_dt.to_complex(frames.dtype)), (2,),
                   norm, True)
    out = out.transpose(1, 2)
    if input.ndim == 1:
        out = out.squeeze(0)
    return out if return_complex else view_as_real(out)


@public(method=True)
def istft(input: Tensor, n_fft: int, hop_length: int | None = None,  # noqa: A002
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """The signal [B?, length] whose stft is input (complex [B?, N, frames]): the least-squares
    estimate, each inverse frame windowed, overlap-added and divided by the window envelope."""
    op = "istft"
    x = input
    hop, win = _sizes(n_fft, hop_length, win_length)
    if not x.dtype.is_complex:
        raise DTypeRuntimeError("istft requires a complex-valued input tensor matching the "
                                "output from stft with return_complex=True.", op=op,
                                operands=[("input", describe(x))],
                                hint="view_as_complex turns a [..., 2] real layout back")
    where = (f"istft({describe(x)}, n_fft={n_fft}, hop_length={hop}, win_length={win}, "
             f"onesided={onesided}, length={length}, return_complex={return_complex})")
    if x.ndim not in (2, 3):
        raise ShapeRuntimeError(f"istft expected a tensor with 2 or 3 dimensions of complex, "
                                f"but got {x.ndim}", op=op, operands=[("input", describe(x))])
    if x.numel() == 0:
        raise ShapeRuntimeError(f"{where}: input tensor cannot be empty.", op=op,
                                operands=[("input", describe(x))])
    fft_size, n_frames = x.shape[-2], x.shape[-1]
    onesided = fft_size != n_fft if onesided is None else onesided
    if onesided and fft_size != n_fft // 2 + 1:
        raise ShapeRuntimeError(f"{where}: expected the frequency dimension (3rd to the last) "
                                f"of the input tensor to match n_fft / 2 + 1 when onesided="
                                f"True, but got {fft_size}", op=op,
                                operands=[("input", describe(x))])
    if not onesided and fft_size != n_fft:
        raise ShapeRuntimeError(f"{where}: expected the frequency dimension (3rd to the last) "
                                f"of the input tensor to match n_fft when onesided=False, but "
                                f"got {fft_size}", op=op, operands=[("input", describe(x))])
    if not 0 < hop <= win:
        raise ArgumentError(f"{where}: expected 0 < hop_length <= win_length", op=op)
    if not 0 < win <= n_fft:
        raise ArgumentError(f"{where}: expected 0 < win_length <= n_fft", op=op)
    if return_complex and onesided:
        raise ArgumentError("Cannot have onesided output if window or input is complex", op=op,
                            hint="give the full spectrum (onesided=False)")
    if not return_complex and window is not None and window.dtype.is_complex:
        raise ArgumentError("Complex windows are incompatible with return_complex=False",
                            op=op, hint="pass return_complex=True")
    real_dt = _dt.to_real(x.dtype)
    w = _padded_window(op, window, n_fft, win, real_dt, x.device)
    if w is None:
        from ...factories import ones

        _warn_once(op, "A window was not provided. A rectangular window will be applied. "
                   "Please provide the same window used by stft to make the inversion "
                   "accurate.")

        w = ones(n_fft, dtype=real_dt, device=x.device)
    spec = (x if x.ndim == 3 else x.unsqueeze(0)).transpose(1, 2)  # [B, frames, N]
    norm = _norm(normalized)
    if return_complex:
        frames = _c2c(spec, (2,), norm, False)
    else:
        frames = _c2r(pad_to(spec, 2, n_fft // 2 + 1), 2, norm, n_fft)
    total = n_fft + hop * (n_frames - 1)
    batch = frames.shape[0]
    y = apply(Fold(1, n_fft, hop, (batch, total)), frames * w)
    envelope = apply(Fold(1, n_fft, hop, (1, total)), (w * w).expand(1, n_frames, n_fft))
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = total - n_fft // 2 if center else total
    y = y[:, start:min(end, total)]
    envelope = envelope[:, start:min(end, total)]
    # NOLA: a sample no window reaches cannot be recovered (torch reads the minimum too)
    if (envelope.numel() and envelope.device.type != "meta"
            and bool((envelope.abs().min() < 1e-11).item())):
        raise ArgumentError(f"{where}: window overlap add min: 1", op=op,
                            hint="the window's squared overlap must be non-zero everywhere "
                                 "(NOLA): use a smaller hop_length")
    y = y / envelope
    if x.ndim == 2:
        y = y.squeeze(0)
    if end > total:
        warnings.warn("The length of signal is shorter than the length parameter. Result is "
                      "being padded with zeros in the tail. Please check your center and "
                      "hop_length settings", UserWarning, stacklevel=2)
        y = pad_to(y, y.ndim - 1, y.shape[-1] + end - total)
    return y
