"""When in the step memory peaks: forward, backward or the optimizer step, and at what.

A `Locator` labels the simulated allocations: in forward with the module running and its
last op, in backward with the node whose backward runs (a hook on every node of the meta
graph), so each phase's peak says where it fell. The optimizer step adds its scratch
(step.py) to what backward leaves alive: every gradient, and the output and loss a loop holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import trace as _trace
from .tracker import Max

FORWARD, BACKWARD, STEP = "forward", "backward", "optimizer step"


@dataclass
class Phase:
    """One phase of the step: the bytes live at its busiest moment, and what ran then."""

    name: str
    peak: object  # everything held, parameters and optimizer state included
    where: str | None = None  # known for concrete sizes

    def subs(self, **values) -> Phase:
        peak = self.peak.subs(**values) if hasattr(self.peak, "subs") else self.peak
        return Phase(self.name, peak, self.where)


class Locator:
    """Labels for the tracker's peaks: the op in forward, the node in backward."""

    def __init__(self, tracker, model) -> None:
        self.tracker = tracker
        self.in_backward = False
        self.path = ""  # of the node whose backward runs
        self.modules = {id(m): name for name, m in model.named_modules()}
        self.last = ("", "")  # the op recorded last in forward, and its module
        tracker.where = self._forward_where

    def _forward_where(self) -> str:
        """The module running, and the op it recorded last (none under no_grad)."""
        path = _trace.current_path() or ""
        op = f": {self.last[1]}" if self.last[0] == path and self.last[1] else ""
        return (path or "<model>") + op

    def recorded(self, node, stack) -> None:
        """Label the output just made (forward) and give the node the hook that names it
        when its backward runs."""
        if self.in_backward:
            path = self.path  # recomputed inside a checkpoint: that checkpoint's module
        else:
            path = stack[-1] if stack else ""
            if node.name == "checkpoint":  # around a module (or its forward): name it
                fn = node.fn
                path = self.modules.get(id(getattr(fn, "__self__", fn)), path)
        tracker, locator = self.tracker, self
        if not self.in_backward:
            self.last = (path, node.name)
        what = "recomputing its forward" if node.name == "checkpoint" else (
            f"{node.name} backward")
        label = f"{path or '<model>'}: {what}"

        def hook(grad, label=label, path=path):
            tracker.mark()  # what the last node's backward made counts under its label
            tracker.where, locator.path = label, path

        node.hooks = [hook] + (node.hooks or [])

    def backward(self) -> None:
        """Backward starts: its first allocation is the loss's gradient."""
        self.in_backward = True
        self.tracker.begin(BACKWARD, "<model>: the loss's gradient")


def peak_phase(timeline, peak) -> Phase | None:
    """The phase in which the step's peak falls (None where sizes are symbolic)."""
    if isinstance(peak, Max) or type(peak) is not int:
        return None
    for phase in timeline:
        if phase.peak == peak:
            return phase
    return None
