"""Where the graph broke: a short log of the places gradients stopped flowing.

Ops note an entry when a tensor that requires grad goes through no_grad(), detach(),
item(), or an op with no gradient (an integer cast, argmax, a comparison). explain_no_grad
reads it to say why a parameter got no gradient. The engine mutes the log while backward
runs: its own ops are not breaks of the user's graph.
"""

from __future__ import annotations

import threading
from collections import deque


class _Entries(deque):
    """The last 256 breaks, and how many were noted in all (the last one's number is
    count - 1): one object, so noting one reads the thread-local state once (~100 ns less
    per op under no_grad than a count of its own there)."""

    __slots__ = ("count",)

    def __init__(self, maxlen: int = 256) -> None:
        super().__init__(maxlen=maxlen)
        self.count = 0


class _Log(threading.local):
    """This thread's log: explain_no_grad explains the thread's own model."""

    def __init__(self) -> None:
        self.log = _Entries()
        # what backward swaps in for the log: it keeps nothing (maxlen 0), and noting into
        # it costs what noting into the log does
        self.muted = _Entries(maxlen=0)


_log = _Log()


def __getattr__(name: str):
    """`breaks.log`: this thread's."""
    if name == "log":
        return _log.log
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _no_module() -> str | None:
    return None


current_path = _no_module  # set by inspect.trace to the running module's path


def note(reason: str, op: str) -> None:
    """Remember that gradients stopped at `op` for `reason`, in the running module."""
    log = _log.log
    log.append((reason, op, current_path()))
    log.count += 1


def count() -> int:
    """How many breaks this thread has noted: a mark for `since`."""
    return _log.log.count


def since(mark: int) -> list:
    """This thread's breaks noted from `mark` (a `count()`) on, those still in the log."""
    log = _log.log
    return list(log)[max(0, mark - (log.count - len(log))):]


def mute() -> _Entries:
    """Note nothing in this thread until `unmute(token)` with the token returned. (A mark,
    `count()`, taken meanwhile may run ahead of the log's count by what was not noted.)"""
    state = _log
    token = state.log  # (nested, as a checkpoint's backward inside backward: the muted log)
    state.muted.count = token.count
    state.log = state.muted
    return token


def unmute(token: _Entries) -> None:
    """Note breaks again, after `mute`."""
    _log.log = token


def clear() -> None:
    _log.log.clear()
