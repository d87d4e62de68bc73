"""explain_no_grad: which parameters the loss never reached, and where each path broke."""

from __future__ import annotations

from ..autograd import breaks, inspect_hooks
from ..tensor import Tensor
from . import trace

_REASONS = {
    "detach": "detach() (also how a .numpy() round trip starts: x.detach().numpy())",
    "item": "item() turned a tensor into a Python number",
    "no_grad": "an op ran under no_grad() / inference_mode()",
    "no gradient": "an op with no gradient (an integer cast, argmax, a comparison)",
}


def reached_leaves(root: Tensor) -> set[int]:
    """ids of the leaf tensors a backward from root would reach."""
    out: set[int] = set()
    if root.grad_fn is None:
        if root.requires_grad:
            out.add(id(root))
        return out
    seen, stack = set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for nxt in node.next[0::3]:
            if nxt is None:
                continue
            if isinstance(nxt, Tensor):
                out.add(id(nxt))
            else:
                stack.append(nxt)
    return out


def _owner(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def explain_no_grad(loss: Tensor, model) -> str:
    """A report of the parameters of model that loss does not depend on, with causes."""
    reached = reached_leaves(loss)
    missing = [(n, p) for n, p in model.named_parameters()
               if p.requires_grad and id(p) not in reached]
    if not missing:
        return "every parameter that requires grad is reached by the loss"
    lines = [f"{len(missing)} parameter(s) get no gradient from this loss:"]
    by_owner: dict[str, list[str]] = {}
    for name, _ in missing:
        by_owner.setdefault(_owner(name), []).append(name)
    last = trace.last_root() if trace.last_root is not None else None
    for owner, names in by_owner.items():
        cause = _first_break(owner, breaks.since(_mark(model, owner)),
                             model if last is model else None)
        lines.append(f"  {', '.join(names)}")
        lines.append(f"    {cause}")
    return "\n".join(lines)


def _mark(model, owner: str) -> int:
    """Where the breaks that can explain `owner` begin: the last top-level call that ran it
    (of the model, or of the owner or a module around it called on its own)."""
    marks, path = [], ""
    for part in [""] + (owner.split(".") if owner else []):
        path = f"{path}.{part}" if path and part else part
        module = _submodule(model, path) if path else model
        if module is not None and module in trace.starts:
            marks.append(trace.starts[module])
    return max(marks, default=0)


def _first_break(owner: str, events, model) -> str:
    """The break inside the owner module, else the first one in an enclosing module or in the
    user's code outside any module, else the first anywhere; `model` when it ran last."""
    if model is not None and owner and owner not in trace.last_called:
        return "the module was not called in the last forward (it is unused)"
    inside = [e for e in events if owner and e[2] is not None and
              (e[2] == owner or e[2].startswith(owner + "."))]
    around = [e for e in events if e[2] is None or e[2] == "" or owner.startswith(e[2] + ".")]
    chosen = (inside or around or events or [None])[0]
    if chosen is None:
        return "the module was not used in this forward, or its output does not feed the loss"
    reason, op, path = chosen
    return f"the path broke at {op} {_place(path, model)}: {_REASONS[reason]}"


def _place(path: str | None, model) -> str:
    """Where a break happened: a module's forward (its path and kind), or the user's code."""
    if path is None:
        return ("outside any module's forward (in your code: on the input, between module "
                "calls, or after the model returned)")
    if path == "":
        return f"in {type(model).__name__}'s own forward" if model is not None else \
            "in the forward of a module called at top level"
    sub = _submodule(model, path) if model is not None else None
    return f"in {path} ({type(sub).__name__})'s forward" if sub is not None else \
        f"in {path}'s forward"


def _submodule(model, path: str):
    try:
        return model.get_submodule(path)
    except (AttributeError, LookupError):
        return None


def explain_last_model(out: Tensor) -> str:
    """The explain_no_grad report for the model that ran last, if one did (for engine errors)."""
    model = trace.last_root() if trace.last_root is not None else None
    if model is None or not any(True for _ in model.parameters()):
        return ""
    return "\n" + explain_no_grad(out, model)


# the engine sits below inspect: it adds this report to its "does not require grad" error
inspect_hooks.no_grad_report = explain_last_model
