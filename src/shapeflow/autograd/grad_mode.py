"""Grad modes: whether ops record the graph."""

from __future__ import annotations

import functools


class _State:
    def __init__(self) -> None:
        # an instance attribute, not a class one: read on every op, and CPython's
        # attribute cache specializes instance reads
        self.enabled = True


state = _State()


def is_grad_enabled() -> bool:
    return state.enabled


class _GradMode:
    """Context manager and decorator setting grad mode, restoring the old one after."""

    mode = True

    def __enter__(self):
        self.prev = state.enabled
        state.enabled = self.mode
        return self

    def __exit__(self, *exc):
        state.enabled = self.prev
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev, state.enabled = state.enabled, mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = prev

        return wrapper


class no_grad(_GradMode):
    """Ops inside record no graph (as `torch.no_grad`)."""

    mode = False


class enable_grad(_GradMode):
    """Ops inside record the graph again (as `torch.enable_grad`)."""

    mode = True


class inference_mode(_GradMode):
    """Like no_grad: nothing is recorded (kept for PyTorch users)."""

    mode = False

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode


class set_grad_enabled(_GradMode):
    """Set grad mode to `mode` inside (as `torch.set_grad_enabled`)."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self.prev = state.enabled
        state.enabled = self.mode  # takes effect at once, as in PyTorch

    def __enter__(self):
        return self
