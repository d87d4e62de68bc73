"""`torch.autograd.functional`: vjp, jvp, jacobian and hessian of a function of tensors.

Built on the engine's `grad`: a jacobian is one vector-Jacobian product per output
element, a jvp is the vjp of a vjp (the double-backward trick), a hessian is the jacobian
of the gradient. Shapes and tuple conventions are PyTorch's.
"""

from __future__ import annotations

from ..errors import GraphError, ShapeError
from ..tensor import Tensor, describe
from . import grad_mode
from .engine import grad


def _as_tuple(x, what: str, fn: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for t in items:
        if not isinstance(t, Tensor):
            raise GraphError(f"{fn}: the {what} must be tensors (or a tuple of them), got "
                             f"{type(t).__name__}", op=fn)
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    """Inputs that require grad: the caller's (create_graph, so gradients reach them) or
    detached copies."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _grads(outputs, inputs, grad_outputs, create_graph: bool, strict: bool, fn: str):
    """grad with allow_unused; None becomes zeros unless strict (then an error)."""
    from ..factories import zeros_like

    with grad_mode.enable_grad():
        diff = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        if not diff:
            res = [None] * len(inputs)
        else:
            res = list(grad([o for o, _ in diff], list(inputs), [g for _, g in diff],
                            retain_graph=True, create_graph=create_graph, allow_unused=True))
    for i, g in enumerate(res):
        if g is None:
            if strict:
                raise GraphError(f"{fn}: the output is independent of input {i} "
                                 f"{describe(inputs[i])} (strict=True)", op=fn)
            res[i] = zeros_like(inputs[i])
    return res


def _check_v(v, outputs: tuple, fn: str, what: str) -> tuple:
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise ShapeError(f"{fn}: v may only be omitted when the {what} is a single "
                             "tensor with one element", op=fn)
        from ..factories import ones_like

        return (ones_like(outputs[0]),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(outputs):
        raise ShapeError(f"{fn}: v has {len(vs)} tensors for {len(outputs)} {what}s", op=fn)
    for a, b in zip(vs, outputs):
        if tuple(a.shape) != tuple(b.shape):
            raise ShapeError(f"{fn}: v {describe(a)} must have the shape of the {what} "
                             f"{describe(b)}", op=fn)
    return vs


def _finish(t: Tensor, create_graph: bool) -> Tensor:
    return t if create_graph else t.detach()


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product at inputs."""
    in_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
    ins = _prepare(ins, create_graph)
    with grad_mode.enable_grad():
        out = func(*ins)
    out_tuple, outs = _as_tuple(out, "outputs of func", "vjp")
    vs = _check_v(v, outs, "vjp", "output")
    res = _grads(outs, ins, vs, create_graph, strict, "vjp")
    outs = tuple(_finish(o, create_graph) for o in outs)
    res = tuple(_finish(r, create_graph) for r in res)
    return (outs if out_tuple else outs[0]), (res if in_tuple else res[0])


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, as the vjp of a vjp."""
    from ..factories import zeros_like

    in_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
    ins = _prepare(ins, create_graph)
    vs = _check_v(v, ins, "jvp", "input")
    with grad_mode.enable_grad():
        out = func(*ins)
        out_tuple, outs = _as_tuple(out, "outputs of func", "jvp")
        # u -> J^T u is linear in u; the gradient of <J^T u, v> in u is J v
        us = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        g = _grads(outs, ins, us, True, strict, "jvp")
        res = _grads(g, us, vs, create_graph, strict, "jvp")
    outs = tuple(_finish(o, create_graph) for o in outs)
    res = tuple(_finish(r, create_graph) for r in res)
    return (outs if out_tuple else outs[0]), (res if in_tuple else res[0])


def _jacobian_rows(outs, ins, create_graph: bool, strict: bool, fn: str):
    """Per output, per input: d out / d in with shape out.shape + in.shape."""
    from ..factories import zeros
    from ..ops.movement import stack

    result = []
    for o in outs:
        n = o.numel()
        flat = o.reshape(-1)
        rows: list[list] = [[] for _ in ins]
        for i in range(n):
            gi = _grads((flat[i],), ins, (None,), create_graph, strict, fn)
            for j, g in enumerate(gi):
                rows[j].append(g)
        per_input = []
        for j, x in enumerate(ins):
            shape = tuple(o.shape) + tuple(x.shape)
            if n:
                per_input.append(_finish(stack(rows[j]).reshape(shape), create_graph))
            else:
                per_input.append(zeros(shape, dtype=x.dtype, device=x.device))
        result.append(tuple(per_input))
    return result


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of func at inputs: out.shape + in.shape per (output, input) pair."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ShapeError(f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got "
                         f"{strategy!r}", op="jacobian")
    in_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
    ins = _prepare(ins, create_graph)
    with grad_mode.enable_grad():
        out = func(*ins)
    out_tuple, outs = _as_tuple(out, "outputs of func", "jacobian")
    rows = _jacobian_rows(outs, ins, create_graph, strict, "jacobian")
    if not out_tuple:
        return rows[0] if in_tuple else rows[0][0]
    return tuple(r if in_tuple else r[0] for r in rows)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar func at inputs: in_i.shape + in_j.shape per pair."""
    in_tuple, ins = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        with grad_mode.enable_grad():
            out = func(*xs)
        _, outs = _as_tuple(out, "outputs of func", "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise ShapeError(f"hessian: func must return a single tensor with one element, "
                             f"got {', '.join(describe(o) for o in outs)}", op="hessian")
        return tuple(_grads(outs, xs, (None,), True, strict, "hessian"))

    rows = jacobian(gradient, ins, create_graph=create_graph, strict=strict)
    if not in_tuple:
        return rows[0][0]
    return rows


__all__ = ["vjp", "jvp", "jacobian", "hessian"]
