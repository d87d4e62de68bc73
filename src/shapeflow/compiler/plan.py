"""A memory plan for one shape bucket: when each value of the tape lives, and where it goes.

Sizes are taken at the bucket's upper bounds, so one plan holds every shape in the bucket.
A value lives from the entry that makes it to the last entry that reads it (a view keeps
its base alive; outputs live to the end); values whose lives do not overlap share bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..inspect.units import format_bytes
from .tape import AUX, FILL, OP, Tape, slot_nbytes


@dataclass
class Plan:
    """The arena of one bucket: its bounds, bytes, the live peak it cannot go under."""

    bounds: dict  # name -> (lo, hi)
    arena: int  # bytes the placed values need
    peak: int  # the most bytes alive at once (a lower bound on the arena)
    values: int  # values that own memory
    offsets: dict  # slot -> byte offset in the arena

    def row(self) -> str:
        dims = ", ".join(f"{n} in [{lo}, {hi}]" for n, (lo, hi) in sorted(self.bounds.items()))
        return f"{dims or 'static'}: arena {format_bytes(self.arena)} " \
               f"(live peak {format_bytes(self.peak)}), {self.values} values"


def lifetimes(tape: Tape) -> dict[int, list]:
    """slot -> [entry that made it, last entry it was alive at] for the memory ops, writes
    and factories make, as eager Python holds it: until the program drops the last reference
    to it or to a view of it (what sf.memory.report counts)."""
    life: dict[int, list] = {}
    end = len(tape.entries)

    def owner(s: int) -> int:
        while tape.slots[s].view_of is not None:
            s = tape.slots[s].view_of
        return s

    for s, slot in enumerate(tape.slots):
        if slot.kind not in (OP, FILL, AUX):
            continue
        o = owner(s)
        if tape.slots[o].kind not in (OP, FILL, AUX):  # a view of an input or of module state
            continue
        last = end if slot.died is None else slot.died - 1
        if o in life:
            life[o][1] = max(life[o][1], last)
        else:
            life[o] = [slot.made, last]
    return life


def plan(tape: Tape, bounds: dict) -> Plan:
    """Place the tape's values at the bucket's upper bounds: best fit, biggest first."""
    env = {n: hi for n, (lo, hi) in bounds.items()}
    life = lifetimes(tape)
    size = {s: slot_nbytes(tape.slots[s], env) for s in life}
    for at, (peak, outs) in tape.scratch.items():  # a backward's scratch, alive while it runs
        results = sum(size.get(s, 0) for s in outs if s is not None)
        extra = _number(peak, env) - results
        if extra > 0:
            life[("scratch", at)] = [at, at]
            size[("scratch", at)] = extra
    order = sorted(life, key=lambda s: (-size[s], life[s][0]))
    placed: list[tuple] = []  # (offset, end offset, first, last)
    offsets = {}
    for s in order:
        first, last = life[s]
        busy = sorted((a, b) for a, b, f, t in placed if not (t < first or last < f))
        at = 0
        for a, b in busy:  # the lowest gap that fits
            if at + size[s] <= a:
                break
            at = max(at, b)
        offsets[s] = at
        placed.append((at, at + size[s], first, last))
    arena = max((b for _, b, _, _ in placed), default=0)
    events = sorted([(life[s][0], size[s]) for s in life] +
                    [(life[s][1] + 0.5, -size[s]) for s in life])
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    return Plan(dict(bounds), arena, peak, sum(1 for s in life if size[s] and type(s) is int),
                offsets)


def _number(value, env: dict) -> int:
    """A byte count (an int, a size expression or a Max of them) at env."""
    if type(value) is int:
        return value
    return int(value.subs(**env))
