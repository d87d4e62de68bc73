"""`torch.autograd.Function`: a user's forward and backward as one node of the graph.

The forward runs without recording; its result becomes the output of a node (one per
output tensor) whose backward calls the user's. What `ctx.save_for_backward` keeps is the
node's saved set, declared as an op's is: inputs, the output, or new intermediates, so it
counts in memory reports and an in-place change to it is caught at backward.
"""

from __future__ import annotations

import functools

from ..errors import GraphError
from ..ops.base import OTHER, Op, Saved, _OutputRef
from ..tensor import Tensor
from . import grad_mode


class FunctionCtx(Op):
    """The ctx a Function's forward and backward receive; also its graph node."""

    name = "Function"

    def __init__(self, fn_cls: type) -> None:
        self.fn_cls = fn_cls
        self.name = fn_cls.__name__
        self.to_save: tuple = ()
        self.non_differentiable: set[int] = set()
        self.dirty: tuple = ()
        self.materialize_grads = True
        self.needs_input_grad: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        """Keep these tensors (or None) for backward, read back as ctx.saved_tensors."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise GraphError(f"save_for_backward: {self.name} can only save tensors or "
                                 f"None, got {type(t).__name__}", op=self.name,
                                 hint="keep other values as attributes: ctx.k = k")
        self.to_save = tensors

    def mark_non_differentiable(self, *outputs) -> None:
        """These outputs get no gradient (indices, masks): they do not require grad."""
        self.non_differentiable.update(id(t) for t in outputs)

    def mark_dirty(self, *tensors) -> None:
        """Accepted for PyTorch code; the forward's in-place changes bump versions anyway."""
        self.dirty = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether backward gets zeros (True, the default) or None for unused outputs."""
        self.materialize_grads = value

    @property
    def saved_tensors(self) -> tuple:
        """What save_for_backward kept, checked for in-place changes since."""
        if not self.__dict__.get("recorded"):
            return self.to_save
        out = list(Op.saved_tensors.fget(self))
        for i, k in self.saved_outputs:  # a saved output's grad_fn is that output's node
            node = self.output_nodes.get(k)
            out[i].grad_fn, out[i].requires_grad = node, node is not None
        for i in self.none_slots:
            out.insert(i, None)
        return tuple(out)

    def backward(self, g):  # the engine calls the output node, never this one
        raise GraphError(f"{self.name}: internal node called directly", op=self.name)


class _Output(Op):
    """Output k of a Function: backward calls the user's with g at k (zeros elsewhere);
    backward is linear, so the sum over outputs is the gradient of all of them."""

    def __init__(self, ctx: FunctionCtx, k: int, outputs: list) -> None:
        self.ctx, self.k, self.name = ctx, k, ctx.name
        self.specs = [(tuple(o.shape), o.dtype, o.device, id(o) in ctx.non_differentiable)
                      if isinstance(o, Tensor) else None for o in outputs]

    def backward(self, g):
        from ..factories import zeros

        ctx = self.ctx
        grads = []
        for j, spec in enumerate(self.specs):
            if j == self.k:
                grads.append(g)
            elif spec is None or not ctx.materialize_grads:
                grads.append(None)
            else:
                grads.append(zeros(spec[0], dtype=spec[1], device=spec[2]))
        result = ctx.fn_cls.backward(ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        slots, n_args = ctx.tensor_slots, ctx.n_args
        if len(result) != n_args:
            raise GraphError(
                f"function {ctx.name}.backward returned an incorrect number of gradients "
                f"(expected {n_args}, got {len(result)})", op=ctx.name,
                hint="return one gradient (or None) per argument of forward")
        return tuple(result[i] for i in slots)

    def release(self) -> None:
        self.ctx.pending -= 1
        if self.ctx.pending <= 0:
            self.ctx.release()
        self._saved = None

    @property
    def saved_tensors(self) -> tuple:
        return self.ctx.saved_tensors


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call
    `MyFunction.apply(*args)`. (Or a forward without ctx and `setup_context`.)"""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward to be "
                                  "differentiated")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx(cls)
        slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in slots]
        record = grad_mode.state.enabled and any(t.requires_grad for t in tensors)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad and record
                                     for a in args)
        ctx.tensor_slots, ctx.n_args = slots, len(args)
        # forward sees detached aliases (same data and version counter): its ops, run
        # without recording, then note no graph break for the inputs that require grad
        aliases = [_alias(t) for t in tensors] if record else tensors
        call = list(args)
        for i, a in zip(slots, aliases):
            call[i] = a
        with grad_mode.set_grad_enabled(False):
            if cls.setup_context is Function.setup_context:
                result = cls.forward(ctx, *call)
            else:
                result = cls.forward(*call)
                cls.setup_context(ctx, tuple(call), result)
        single = not isinstance(result, tuple)
        outputs = [result] if single else list(result)
        # an input returned as it is becomes a new tensor (the node's output, not the leaf)
        outputs = [_alias(o) if isinstance(o, Tensor) and any(o is t for t in aliases)
                   else o for o in outputs]
        ctx.non_differentiable = {id(outputs[k]) for k, o in enumerate(
            [result] if single else result) if id(o) in ctx.non_differentiable}
        if record:
            _record(ctx, tensors, aliases, outputs)
        return outputs[0] if single else tuple(outputs)


def _alias(t: Tensor) -> Tensor:
    a = Tensor._make(t._data, t.shape, t.dtype, t.device)
    a._version = t._version
    return a


def _record(ctx: FunctionCtx, tensors: list, aliases: list, outputs: list) -> None:
    edges = []
    for t in tensors:
        edges += (t.grad_fn or (t if t.requires_grad else None), t.shape, t.dtype)
    entries, keep, none_slots, saved_outputs = [], [], [], []
    for i, t in enumerate(ctx.to_save):
        if t is None:
            none_slots.append(i)
            continue
        j = next((j for j, x in enumerate(aliases) if x is t), None)
        k = next((k for k, o in enumerate(outputs) if o is t), None)
        if j is not None:
            entries.append(Saved.input(j, OTHER))
            keep += (tensors[j], t._version[0])
        elif k is not None:
            saved_outputs.append((len(entries), k))
            entries.append(Saved.output(OTHER))
            keep += (_OutputRef(t), t._version[0])
        else:
            entries.append(Saved.new(f"saved{i}", t.shape, t.dtype, OTHER))
            keep += (t, None)
    ctx._entries, ctx._saved, ctx.none_slots = tuple(entries), keep, none_slots
    ctx.to_save, ctx.recorded = (), True
    ctx.saved_outputs, ctx.output_nodes = saved_outputs, {}
    ctx.next = tuple(edges)
    diff = [k for k, o in enumerate(outputs)
            if isinstance(o, Tensor) and id(o) not in ctx.non_differentiable
            and o.dtype.is_floating_point]
    ctx.pending = len(diff)
    for k in diff:
        node = _Output(ctx, k, outputs)
        node.next = ctx.next
        ctx.output_nodes[k] = node
        o = outputs[k]
        if k == diff[0]:  # the saved set is reported once, on the first output's node
            node._entries, node._saved = ctx._entries, ctx._saved
        if not grad_mode.hot.quiet:  # this thread's observers (memory report, graph)
            for observer in grad_mode.state.observers:
                observer(node, tensors, o)
        o.grad_fn, o.requires_grad = node, True
    for o in outputs:
        if isinstance(o, Tensor) and o.grad_fn is None and o.requires_grad is False:
            o._origin = "int"


def once_differentiable(fn):
    """PyTorch's decorator for a backward that is not itself differentiable: runs it
    without recording."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with grad_mode.set_grad_enabled(False):
            return fn(ctx, *args)

    return wrapper


def install() -> None:
    """Make `shapeflow.autograd.Function` (and kin) names of the autograd package."""
    from .. import autograd

    autograd.Function, autograd.FunctionCtx = Function, FunctionCtx
    autograd.once_differentiable = once_differentiable
