"""Activation checkpointing: keep a block's inputs, recompute its forward during backward."""

from __future__ import annotations

from .autograd import grad_mode
from .autograd.engine import run_backward
from .ops.base import LAYER_INPUT, Op, Saved, record
from .random import default_generator
from .tensor import Tensor


class Checkpoint(Op):
    """fn(*inputs) run without recording; backward reruns it with recording and backprops."""

    name = "checkpoint"

    def __init__(self, fn, n_inputs: int) -> None:
        self.fn = fn
        self.entries = tuple(Saved.input(i, LAYER_INPUT) for i in range(n_inputs))

    def saved(self, *inputs, out):
        return self.entries

    def backward(self, grad):
        inputs = self.saved_tensors
        detached = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
        state = default_generator.get_state()
        default_generator.set_state(self.rng_state)  # same dropout masks as the first forward
        try:
            with grad_mode.enable_grad():
                out = self.fn(*detached)
        finally:
            default_generator.set_state(state)
        # parameters inside fn are leaves: the inner pass accumulates their .grad directly
        captured = run_backward([(out, grad)], retain_graph=False, create_graph=False,
                                capture=[d for d in detached if d.requires_grad])
        grads = iter(captured)
        return tuple(next(grads) if d.requires_grad else None for d in detached)


def checkpoint(fn, *args, use_reentrant: bool | None = None):
    """fn(*args), saving only args for backward: activations inside fn are recomputed.

    Gradients equal those without checkpointing (dropout replays the same random state).
    Returns a single tensor; fn may close over parameters (their grads accumulate as usual).
    """
    tensors = [a for a in args if isinstance(a, Tensor)]
    if len(tensors) != len(args):
        raise TypeError("checkpoint: pass tensors only; close over other arguments")
    needs = grad_mode.state.enabled and any(t.requires_grad for t in tensors) or (
        grad_mode.state.enabled and _has_params(fn))
    if not needs:
        return fn(*args)
    op = Checkpoint(fn, len(tensors))
    op.rng_state = default_generator.get_state()
    with grad_mode.no_grad():
        out = fn(*args)
    result = Tensor._make(out.data, out.shape, out.dtype, out.device)
    record(op, tensors, result)
    return result


def _has_params(fn) -> bool:
    params = getattr(fn, "parameters", None)
    return params is not None and any(p.requires_grad for p in params())
