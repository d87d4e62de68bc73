"""Running one computation on both backends: the compiled kernels and NumPy alone."""

from shapeflow.backend.cpu import kernels


def both_paths(fn):
    """fn() with the compiled kernels, then with NumPy alone."""
    fused = fn()
    old = kernels.set_enabled(False)
    try:
        return fused, fn()
    finally:
        kernels.set_enabled(old)
