"""Grad modes, per thread as in PyTorch: whether ops record the graph.

Every mode an op reads is this thread's (`state`): grad mode, anomaly mode, the recording
observers and sf.compile's tracer. A new thread starts in the defaults (grad on, no anomaly
checks, no observers, no tracer).
Reading a `threading.local` costs ~40 ns, too much for every op, so `hot.quiet` (a plain
attribute) says whether any thread is outside the defaults; `apply` reads this thread's
modes only when it is False.
"""

from __future__ import annotations

import functools
import inspect
import threading

from ..errors import GraphError


class _Hot:
    def __init__(self) -> None:
        # an instance attribute, not a class one: read on every op, and CPython's
        # attribute cache specializes instance reads
        self.quiet = True  # no thread has a mode other than its default


hot = _Hot()
_lock = threading.RLock()  # (reentrant: a _Away can be freed while the lock is held)
_away_count = 0


class _Away:
    """Held by a thread while one of its modes is not the default; counted in `hot.quiet`.

    A thread that ends outside the defaults drops it with its other thread-local values.
    """

    __slots__ = ()

    def __init__(self) -> None:
        global _away_count
        with _lock:
            _away_count += 1
            hot.quiet = False

    def __del__(self) -> None:
        global _away_count
        with _lock:
            _away_count -= 1
            hot.quiet = _away_count == 0


class _State(threading.local):
    """This thread's modes (__init__ runs once in each thread that reads them)."""

    def __init__(self) -> None:
        self.enabled = True  # grad mode
        self.anomaly = False  # sf.detect_anomaly(): ops and backward check their results
        self.in_backward = False  # inside an anomaly-checked backward
        self.observers: tuple = ()  # observer(node, inputs, out) per recorded node
        # sf.compile's tracer while it traces: told of every op, in-place write and factory
        self.tracer = None
        self.away: _Away | None = None  # held while any mode above is not its default

    def settle(self) -> None:
        """Hold or drop `away` after a change of mode."""
        away = not self.enabled or self.anomaly or bool(self.observers) or \
            self.tracer is not None
        if away and self.away is None:
            self.away = _Away()
        elif not away and self.away is not None:
            self.away = None


state = _State()


def is_grad_enabled() -> bool:
    """This thread's grad mode (`hot.quiet` first: it spares the threading.local read)."""
    return hot.quiet or state.enabled


def set_enabled(mode: bool) -> None:
    """Set this thread's grad mode (what the context managers below do)."""
    state.enabled = mode
    state.settle()


class _GradMode:
    """Context manager and decorator setting grad mode, restoring the old one after.

    On a generator function it covers each resume, not the caller between them (as PyTorch).
    """

    mode = True

    def __enter__(self):
        self.prev = state.enabled
        set_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        set_enabled(self.prev)
        return False

    def __call__(self, fn):
        mode = self.mode
        if inspect.isclass(fn):
            raise GraphError(f"{type(self).__name__} cannot decorate a class",
                             hint="decorate its methods, or use it as a context manager")
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(mode, fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.enabled
            set_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                set_enabled(prev)

        return wrapper


class _Mode(_GradMode):
    """A fresh manager per resume of a decorated generator (so nesting never shares prev)."""

    def __init__(self, mode: bool) -> None:
        self.mode = mode


def _wrap_generator(mode: bool, fn):
    """fn's generators, each step (next, send, throw, close) run in grad mode `mode`."""

    @functools.wraps(fn)
    def generator(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with _Mode(mode):
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with _Mode(mode):
                        gen.close()
                    raise
                except BaseException as e:
                    with _Mode(mode):
                        response = gen.throw(e)
                else:
                    with _Mode(mode):
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator


class _Bare(_GradMode):
    """A mode usable bare as a decorator (`@no_grad`) as well as called (`@no_grad()`)."""

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        return cls()(fn)


class no_grad(_Bare):
    """Ops inside record no graph (as `torch.no_grad`)."""

    mode = False


class enable_grad(_Bare):
    """Ops inside record the graph again (as `torch.enable_grad`)."""

    mode = True


class inference_mode(_GradMode):
    """Like no_grad: nothing is recorded (kept for PyTorch users); also usable bare."""

    mode = False

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # @inference_mode without parentheses

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode


class set_grad_enabled(_GradMode):
    """Set grad mode to `mode` inside (as `torch.set_grad_enabled`)."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self.prev = state.enabled
        set_enabled(self.mode)  # takes effect at once, as in PyTorch

    def __enter__(self):
        return self

    def __call__(self, fn):
        set_enabled(self.prev)  # as a decorator it only acts inside fn, as in PyTorch
        return super().__call__(fn)


def add_observer(fn) -> None:
    """Call fn(node, inputs, out) for every node this thread records (summaries, memory)."""
    state.observers = (*state.observers, fn)
    state.settle()


def remove_observer(fn) -> None:
    """Stop calling an observer `add_observer` installed in this thread."""
    obs = list(state.observers)
    obs.remove(fn)
    state.observers = tuple(obs)
    state.settle()
