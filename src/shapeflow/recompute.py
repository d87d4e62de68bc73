"""Activation checkpointing: keep a block's inputs, recompute its forward during backward."""

from __future__ import annotations

from .autograd import grad_mode
from .autograd.engine import run_backward
from .ops.base import LAYER_INPUT, Op, Saved, record
from .random import default_generator
from .tensor import Tensor


class Checkpoint(Op):
    """fn(*args, **kwargs) run without recording; backward reruns it with recording.

    The tensor arguments are the node's saved inputs; the op itself keeps only the other
    arguments (tensors replaced by None), so a backward that releases the node frees them.
    """

    name = "checkpoint"

    def __init__(self, fn, args: list, kwargs: dict, slots: list) -> None:
        self.fn, self.args, self.kwargs, self.slots = fn, args, kwargs, slots
        self.entries = tuple(Saved.input(i, LAYER_INPUT) for i in range(len(slots)))

    def saved(self, *inputs, out):
        return self.entries

    def call(self, tensors) -> Tensor:
        """fn with the tensors put back where they were passed (a position or a keyword)."""
        args, kwargs = list(self.args), dict(self.kwargs)
        for slot, t in zip(self.slots, tensors):
            if type(slot) is int:
                args[slot] = t
            else:
                kwargs[slot] = t
        return self.fn(*args, **kwargs)

    def backward(self, grad):
        inputs = self.saved_tensors
        detached = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
        state = default_generator.get_state()
        default_generator.set_state(self.rng_state)  # same dropout masks as the first forward
        try:
            with grad_mode.enable_grad():
                out = self.call(detached)
        finally:
            default_generator.set_state(state)
        # parameters inside fn are leaves: the inner pass accumulates their .grad directly
        captured = run_backward([(out, grad)], retain_graph=False, create_graph=False,
                                capture=[d for d in detached if d.requires_grad])
        grads = iter(captured)
        return tuple(next(grads) if d.requires_grad else None for d in detached)

    def release(self) -> None:
        """Free the saved inputs and the function with its other arguments (a closure over
        tensors would otherwise keep them until the whole graph is dropped)."""
        if self._saved is not None:
            self._saved = None
            self.fn = self.args = self.kwargs = self.rng_state = None


def checkpoint(fn, *args, use_reentrant: bool | None = None, **kwargs):
    """fn(*args, **kwargs), saving only its tensor arguments: activations inside fn are
    recomputed in backward, and the saved tensors are freed once that backward has run.

    Gradients equal those without checkpointing (dropout replays the same random state).
    Returns a single tensor; fn may close over parameters (their grads accumulate as usual),
    but tensors it needs are best passed as arguments: a closure keeps them as long as the
    function lives, that is until this node's backward.
    """
    slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    slots += [k for k, v in kwargs.items() if isinstance(v, Tensor)]
    tensors = [args[s] if type(s) is int else kwargs[s] for s in slots]
    enabled = grad_mode.is_grad_enabled()
    if not (enabled and (any(t.requires_grad for t in tensors) or _has_params(fn))):
        return fn(*args, **kwargs)
    op = Checkpoint(fn, [None if isinstance(a, Tensor) else a for a in args],
                    {k: None if isinstance(v, Tensor) else v for k, v in kwargs.items()}, slots)
    op.rng_state = default_generator.get_state()
    with grad_mode.no_grad():
        out = fn(*args, **kwargs)
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: fn must return one tensor, got {type(out).__name__}")
    result = Tensor._make(out._data, out.shape, out.dtype, out.device)
    record(op, tensors, result)
    return result


def _has_params(fn) -> bool:
    owner = getattr(fn, "__self__", fn)  # a module's bound forward has its module's params
    params = getattr(owner, "parameters", None)
    return callable(params) and any(p.requires_grad for p in params())
