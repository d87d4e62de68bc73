"""`torch.utils.checkpoint` under its PyTorch name: activation checkpointing (sf.checkpoint)."""

from __future__ import annotations

from ..recompute import checkpoint as _checkpoint

# PyTorch's options that change nothing here: the random state is always replayed, and
# recomputation is checked by the saved tensors' version counters
_IGNORED = ("preserve_rng_state", "determinism_check", "debug", "context_fn")


def checkpoint(function, *args, use_reentrant: bool | None = None, **kwargs):
    """function(*args, **kwargs) with its activations recomputed in backward."""
    for name in _IGNORED:
        kwargs.pop(name, None)
    return _checkpoint(function, *args, use_reentrant=use_reentrant, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,  # noqa: A002
                          **kwargs):
    """Run a Sequential (or list of modules) in `segments` checkpointed chunks; the last
    chunk runs normally, as in PyTorch."""
    for name in _IGNORED:
        kwargs.pop(name, None)
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = max(len(fns) // segments, 1)
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        chunk = fns[start:end + 1]

        def run(x, chunk=chunk):
            for f in chunk:
                x = f(x)
            return x

        input = _checkpoint(run, input, use_reentrant=use_reentrant)  # noqa: A001
    for f in fns[end + 1:]:
        input = f(input)  # noqa: A001
    return input


__all__ = ["checkpoint", "checkpoint_sequential"]
