"""The allocator, simulated: which tensor storages are alive at each moment of a meta run.

While a `LiveTracker` is active, every tensor created (`Tensor._make`) is one allocation of
its bytes, unless it shares its version counter with a live storage (a view). A storage is
freed when the last tensor (or saved-output reference) holding it dies, which Python's
reference counting tells us exactly: the meta run goes through the same Python code as a
cpu run, so tensors live and die at the same moments. What the tracker cannot see is the
scratch NumPy allocates inside one kernel.
"""

from __future__ import annotations

import weakref

from ...ops import base
from ...symbolic import dim_le
from ...tensor import Tensor


class Storage:
    """One allocation: its size and how many live holders keep it."""

    __slots__ = ("nbytes", "holders", "version")

    def __init__(self, size, version) -> None:
        self.nbytes, self.holders, self.version = size, 0, version


class Peak:
    """The running maximum of byte counts; with symbolic sizes, the candidates none dominates."""

    def __init__(self) -> None:
        self.candidates: list = [0]

    def add(self, value) -> None:
        cands = self.candidates
        if type(value) is int and all(type(c) is int for c in cands):
            if value > cands[0]:
                cands[0] = value
            return
        for c in cands:
            if dim_le(value, c) is True:
                return
        self.candidates = [c for c in cands if dim_le(c, value) is not True] + [value]

    @property
    def value(self):
        """An int, an expression, or a `Max` of expressions."""
        return self.candidates[0] if len(self.candidates) == 1 else Max(self.candidates)


class PhasePeak:
    """The peak of one phase of the step (forward, backward), and where it fell."""

    def __init__(self) -> None:
        self.peak = Peak()
        self.where: str | None = None  # known for concrete sizes

    def add(self, value, where) -> None:
        cands = self.peak.candidates
        if type(value) is int and len(cands) == 1 and type(cands[0]) is int:
            if value > cands[0]:
                cands[0] = value
                self.where = where() if callable(where) else where
            return
        self.peak.add(value)
        self.where = None


class Max:
    """max(a, b, ...) of size expressions, evaluated with `subs`."""

    def __init__(self, terms) -> None:
        self.terms = list(terms)

    def subs(self, **values):
        vals = [t.subs(**values) if hasattr(t, "subs") else t for t in self.terms]
        if all(type(v) is int for v in vals):
            return max(vals)
        peak = Peak()
        for v in vals:
            peak.add(v)
        return peak.value

    def __add__(self, other):
        return Max([t + other for t in self.terms])

    __radd__ = __add__

    def __str__(self) -> str:
        return "max(" + ", ".join(str(t) for t in self.terms) + ")"

    __repr__ = __str__


class LiveTracker:
    """Context manager: simulate allocations and frees of every tensor made inside it."""

    def __init__(self, external=()) -> None:
        self.storages: dict[int, Storage] = {}
        self.live = 0
        self.peak = Peak()
        self._pending: list = []
        self._refs: dict[int, weakref.ref] = {}
        self.phases: dict[str, PhasePeak] = {}
        self._phase: PhasePeak | None = None
        self.where = None  # a label (or a function giving one) of what runs now
        for t in external:  # tensors that exist before the run (parameters, inputs): free
            self._hold(t, Storage(0, t._version))

    # ---- events ------------------------------------------------------------------------
    def _created(self, t: Tensor) -> None:
        self._resolve()
        self._pending.append(t)

    def _resolve(self) -> None:
        """Give each tensor made since the last event its storage (its version is final now)."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        for t in batch:
            storage = self.storages.get(id(t._version))
            if storage is None:
                storage = Storage(t.nbytes, t._version)
                self.live = self.live + storage.nbytes
                self.peak.add(self.live)
                if self._phase is not None:
                    self._phase.add(self.live, self.where)
            self._hold(t, storage)
        del batch  # tensors that only the batch kept die here, after their allocation

    def _hold(self, obj, storage: Storage) -> None:
        key = id(storage.version)
        self.storages[key] = storage
        storage.holders += 1

        def release(ref, key=key, storage=storage) -> None:
            self._refs.pop(id(ref), None)
            self._resolve()
            storage.holders -= 1
            if storage.holders == 0 and self.storages.get(key) is storage:
                del self.storages[key]
                self.live = self.live - storage.nbytes

        ref = weakref.ref(obj, release)
        self._refs[id(ref)] = ref

    def _recorded(self, node, inputs, out) -> None:
        """A node saving its own output keeps that storage through a reference of its own."""
        for entry, ref in base.held(node):
            if entry.source == base.OUTPUT:
                self._resolve()
                storage = self.storages.get(id(ref._version))
                if storage is not None:
                    self._hold(ref, storage)

    # ---- activation --------------------------------------------------------------------
    def __enter__(self) -> LiveTracker:
        self._original = Tensor.__dict__["_make"]
        make = self._original.__func__
        tracker = self

        def tracked_make(cls, data, shape, dtype, device):
            t = make(cls, data, shape, dtype, device)
            tracker._created(t)
            return t

        Tensor._make = classmethod(tracked_make)
        base._make = Tensor._make  # apply's own binding of it
        base.add_observer(self._recorded)
        return self

    def __exit__(self, *exc) -> None:
        Tensor._make = self._original
        base._make = Tensor._make
        base.remove_observer(self._recorded)
        self._resolve()

    def begin(self, phase: str, where=None) -> None:
        """Start a phase of the step (what runs now: `where`); its peak is followed apart."""
        self._resolve()  # what the last phase made counts in it
        if where is not None:
            self.where = where
        self._phase = self.phases[phase] = PhasePeak()
        self._phase.add(self.live, self.where)

    def mark(self):
        """The bytes live now (after resolving what was just made)."""
        self._resolve()
        return self.live
