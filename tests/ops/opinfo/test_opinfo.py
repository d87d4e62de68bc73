"""PyTorch's OpInfo samples against shapeflow: every (entry, dtype) pair that passed when the
baseline was recorded must still pass, and every entry that had a callable must still have one.

The census (found / missing / passing) prints with `python -m tests.ops.opinfo.census`;
`--write` records a new baseline after ops were added or fixed.
"""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal needs it

from tests.ops.opinfo import bridge  # noqa: E402
from tests.ops.opinfo.census import BASELINE  # noqa: E402

_RECORD = json.loads(BASELINE.read_text())
_ENTRIES = {bridge.entry_id(op): op for op in bridge.op_db()}


@pytest.mark.parametrize("pair", _RECORD["passing"])
def test_pair_still_passes(pair):
    name, dtype = pair.rsplit(" ", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = bridge.run_pair(_ENTRIES[name], dtype)
    assert outcome.ok, f"{name} at {dtype}: {outcome.reason}"


def test_found_entries_keep_their_callable():
    lost = [name for name in _RECORD["found"]
            if bridge.shapeflow_callable(_ENTRIES[name]) is None]
    assert not lost, f"OpInfo entries that lost their shapeflow callable: {lost}"


def test_census_counts_match_the_record():
    """The baseline's summary is what its lists say (a hand edit would show here)."""
    s = _RECORD["summary"]
    assert s["found"] == len(_RECORD["found"]) and s["passing"] == len(_RECORD["passing"])
    assert s["entries"] == len(_ENTRIES)


def test_bridge_detects_a_wrong_value(monkeypatch):
    """The census can fail: an op that returns the wrong value is caught."""
    import shapeflow as sf

    op = _ENTRIES["neg"]
    monkeypatch.setattr(sf, "neg", lambda x: x)
    assert not bridge.run_pair(op, "float32").ok


def test_loading_the_database_leaves_torch_flags_settable():
    """torch's test utilities freeze torch.backends' flags on import; a ported program run by
    a later test in this worker sets them (cudnn.benchmark = True)."""
    import torch

    bridge.op_db()
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.benchmark = old
