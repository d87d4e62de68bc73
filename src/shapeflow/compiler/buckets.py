"""Shape buckets: which sizes of a dynamic dim share one memory plan.

A bucket is a closed range [lo, hi] of a dim's sizes. The default is powers of two (1, 2,
3-4, 5-8, ...); a list of upper bounds gives its own ranges; `from_histogram` picks at most
K bounds from observed sizes so that the padding to each bucket's bound wastes least.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from .errors import ReplayError


def power_of_two(n: int) -> tuple[int, int]:
    """The power-of-two bucket holding size n: [1, 1], [2, 2], [3, 4], [5, 8], ..."""
    if n <= 2:
        return (n, n)
    hi = 1 << (n - 1).bit_length()
    return (hi // 2 + 1, hi)


class Buckets:
    """The bucket of each size of one dim: given upper bounds, then powers of two beyond."""

    def __init__(self, bounds: Sequence[int] | None = None) -> None:
        if bounds is not None:
            bounds = list(bounds)
            if not bounds or any(type(b) is not int or b < 1 for b in bounds) or \
                    sorted(set(bounds)) != bounds:
                raise ReplayError(f"buckets: expected increasing positive ints, got {bounds!r}",
                                  hint="e.g. buckets={'L': [64, 128, 512, 2048]}")
        self.bounds = bounds

    def of(self, n: int) -> tuple[int, int]:
        """The [lo, hi] bucket holding size n."""
        b = self.bounds
        if b is None or n > b[-1]:
            lo, hi = power_of_two(n)
            return (max(lo, b[-1] + 1), hi) if b is not None else (lo, hi)
        i = bisect.bisect_left(b, n)
        return (b[i - 1] + 1 if i else 0, b[i])

    def __repr__(self) -> str:
        return "powers of two" if self.bounds is None else f"bounds {self.bounds}"


def from_histogram(sizes: Iterable[int], k: int) -> list[int]:
    """At most k bucket upper bounds for `sizes` (one entry per observation) that minimise the
    padding sum(bound(s) - s): the arena each bucket plans for its bound wastes least."""
    counts: dict[int, int] = {}
    for s in sizes:
        if type(s) is not int or s < 0:
            raise ReplayError(f"from_histogram: sizes must be non-negative ints, got {s!r}")
        counts[s] = counts.get(s, 0) + 1
    if k < 1:
        raise ReplayError(f"from_histogram: k must be >= 1, got {k}")
    xs = sorted(counts)
    if len(xs) <= k:
        return xs
    n = len(xs)
    # prefix sums of counts and of size*count: the cost of one bucket [i, j] bounded by xs[j]
    pc, ps = [0], [0]
    for x in xs:
        pc.append(pc[-1] + counts[x])
        ps.append(ps[-1] + counts[x] * x)

    def cost(i: int, j: int) -> int:
        return xs[j] * (pc[j + 1] - pc[i]) - (ps[j + 1] - ps[i])

    inf = float("inf")
    best = [[inf] * n for _ in range(k + 1)]  # best[b][j]: xs[0..j] in b buckets
    cut = [[0] * n for _ in range(k + 1)]
    for j in range(n):
        best[1][j] = cost(0, j)
    for b in range(2, k + 1):
        for j in range(n):
            for i in range(1, j + 1):
                c = best[b - 1][i - 1] + cost(i, j)
                if c < best[b][j]:
                    best[b][j], cut[b][j] = c, i
    bounds, j, b = [], n - 1, k
    while b >= 1 and j >= 0:
        bounds.append(xs[j])
        if b == 1:
            break
        j, b = cut[b][j] - 1, b - 1
    return sorted(bounds)
