"""Where the graph broke: a short log of the places gradients stopped flowing.

Ops note an entry when a tensor that requires grad goes through no_grad(), detach(),
item(), or an op with no gradient (an integer cast, argmax, a comparison). explain_no_grad
reads it to say why a parameter got no gradient.
"""

from __future__ import annotations

from collections import deque

log: deque = deque(maxlen=256)


def _no_module() -> str | None:
    return None


current_path = _no_module  # set by inspect.trace to the running module's path


def note(reason: str, op: str) -> None:
    """Remember that gradients stopped at `op` for `reason`, in the running module."""
    log.append((reason, op, current_path()))


def clear() -> None:
    log.clear()
