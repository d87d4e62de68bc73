"""What the engine and the ops call in inspect, which sits above them and fills this in.

The engine and ops/base.py cannot import inspect (docs/design.md, "Layers"). inspect.anomaly
and inspect.explain install their functions here when imported, which `import shapeflow`
does; the defaults are what runs without them. The running module's path comes from
`breaks.current_path`, which inspect.trace sets.
"""

from __future__ import annotations

from .grad_mode import state as _modes


def _no_check(op, inputs, data) -> None:
    return None


def _plain_backward(node, grad):
    return node.backward(grad)


class Anomaly:
    """`sf.detect_anomaly()`'s switch (this thread's), and the checks it runs (inspect's)."""

    def __init__(self) -> None:
        self.check_forward = _no_check  # (op, inputs, data): raise on NaN/Inf from finite inputs
        self.checked_backward = _plain_backward  # (node, grad) -> node.backward(grad), checked

    # per thread, in grad_mode.state: apply reads it there when grad_mode.hot is not quiet
    @property
    def enabled(self) -> bool:
        return _modes.anomaly

    @enabled.setter
    def enabled(self, on: bool) -> None:
        _modes.anomaly = bool(on)
        _modes.settle()

    @property
    def in_backward(self) -> bool:
        return _modes.in_backward

    @in_backward.setter
    def in_backward(self, on: bool) -> None:
        _modes.in_backward = on

    @staticmethod
    def user_frame() -> str | None:
        """`file:line: code` of the innermost caller outside shapeflow."""
        import traceback

        for frame in reversed(traceback.extract_stack()[:-3]):
            if "/shapeflow/" not in frame.filename.replace("\\", "/"):
                return f"{frame.filename}:{frame.lineno}: {frame.line}"
        return None


anomaly = Anomaly()


def _no_report(out) -> str:
    return ""


# no_grad_report(out) -> str, added to the engine's error for an output that does not require
# grad: inspect.explain's report of the parameters it misses and where the path broke.
no_grad_report = _no_report
