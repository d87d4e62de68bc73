"""The compiler's errors: a region it cannot replay exactly as eager."""

from __future__ import annotations

from ..errors import GraphError


class ReplayError(GraphError):
    """A compiled region cannot be replayed as eager would run it: names the cause and the line.

    Raised where `fullgraph=True` forbids running a region eagerly, and for misuse (an unknown
    backend, a bad bucket list)."""


class Untraceable(Exception):
    """Internal: the tracer met something it cannot record (a graph break); carries why."""

    def __init__(self, reason: str, line: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line
