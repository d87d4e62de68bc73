"""What every kernel table has: its array namespace, allocation, and a count of the paths run."""

from __future__ import annotations

from collections import Counter


def into(result, out):
    """`result`, or `out` with result's values written into it: how an `out=` kernel ends
    (a caller that planned the memory gets its buffer back)."""
    if out is None or out is result:
        return result
    out[...] = result
    return out


def into_all(results: tuple, out) -> tuple:
    """Several results, each written into its buffer of `out` (a tuple; None entries skip)."""
    if out is None:
        return results
    return tuple(r if o is None or r is None else into(r, o) for o, r in zip(out, results))


class KernelTableBase:
    """A device's kernels over the array namespace `xp` (NumPy's API)."""

    path = "reference"  # what `ran` records for a kernel this table computes itself

    def __init__(self, xp, name: str = "reference") -> None:
        self.xp = xp
        self.name = name
        # (kernel, path) -> calls: which implementation ran, for tests and `--version -v`
        self.stats: Counter = Counter()

    def ran(self, kernel: str, path: str) -> None:
        """Count one call of `kernel` that ran `path` ('mkl', 'compiled', 'numpy', ...)."""
        self.stats[kernel, path] += 1

    # ---- allocation --------------------------------------------------------------------
    def empty(self, shape, dtype):
        """A new uninitialised array (`dtype`: a NumPy dtype)."""
        return self.xp.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return self.xp.zeros(shape, dtype)

    def full(self, shape, value, dtype):
        return self.xp.full(shape, value, dtype)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
