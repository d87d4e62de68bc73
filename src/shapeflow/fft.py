"""`shapeflow.fft`, as `torch.fft`: the discrete Fourier transforms of ops/spectral/fourier.py,
importable as a module (`import shapeflow.fft`, `from shapeflow import fft`)."""

from __future__ import annotations

from .ops.spectral.fourier import (  # noqa: F401  (re-exported: this module is sf.fft)
    __all__,
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)
