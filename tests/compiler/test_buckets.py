"""Shape buckets: powers of two, given bounds, and bounds chosen from a histogram."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapeflow.compiler import Buckets, ReplayError, from_histogram, power_of_two


def test_powers_of_two():
    assert [power_of_two(n) for n in (1, 2, 3, 4, 5, 8, 9, 1000)] == [
        (1, 1), (2, 2), (3, 4), (3, 4), (5, 8), (5, 8), (9, 16), (513, 1024)]


def test_given_bounds_then_powers_of_two_beyond():
    b = Buckets([64, 128, 512])
    assert [b.of(n) for n in (1, 64, 65, 128, 300, 512, 513, 3000)] == [
        (0, 64), (0, 64), (65, 128), (65, 128), (129, 512), (129, 512), (513, 1024),
        (2049, 4096)]
    with pytest.raises(ReplayError):
        Buckets([128, 64])


def _waste(sizes, bounds):
    return sum(min(b for b in bounds if b >= s) - s for s in sizes)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=30), st.integers(1, 4))
def test_histogram_bounds_waste_least(sizes, k):
    bounds = from_histogram(sizes, k)
    assert len(bounds) <= k and max(sizes) in bounds and bounds == sorted(set(bounds))
    distinct = sorted(set(sizes))
    best = min(_waste(sizes, list(c) + [max(sizes)])
               for r in range(0, min(k, len(distinct)))
               for c in itertools.combinations(distinct[:-1], r))
    assert _waste(sizes, bounds) == best
