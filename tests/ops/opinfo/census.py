"""The OpInfo census: found / missing / passing, and the baseline the tests hold shapeflow to.

    python -m tests.ops.opinfo.census            # print the census
    python -m tests.ops.opinfo.census --write    # and record it as the new baseline
    python -m tests.ops.opinfo.census --failing  # and list every failing pair with its reason
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from tests.ops.opinfo import bridge

BASELINE = Path(__file__).with_name("baseline.json")


def census() -> dict:
    """Every in-scope entry: found or not, and the outcome of each of its dtypes."""
    entries = {}
    for op in bridge.op_db():
        found = bridge.shapeflow_callable(op) is not None
        outcomes = {}
        if found:
            for dtype in bridge.pairs(op):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outcome = bridge.run_pair(op, dtype)
                outcomes[dtype] = [outcome.ok, outcome.reason]
        entries[bridge.entry_id(op)] = {"found": found, "pairs": outcomes}
    return entries


def summary(entries: dict) -> dict:
    found = sum(e["found"] for e in entries.values())
    pairs = [ok for e in entries.values() for ok, _ in e["pairs"].values()]
    return {"entries": len(entries), "found": found, "missing": len(entries) - found,
            "pairs": len(pairs), "passing": sum(pairs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="record this census as the baseline")
    p.add_argument("--failing", action="store_true", help="list failing pairs and reasons")
    p.add_argument("--missing", action="store_true", help="list entries with no callable")
    args = p.parse_args(argv)
    start = time.perf_counter()
    entries = census()
    s = summary(entries)
    print(f"OpInfo entries in scope: {s['entries']}; shapeflow has a callable for {s['found']} "
          f"({100 * s['found'] / s['entries']:.1f}%), {s['missing']} missing")
    seconds = time.perf_counter() - start
    print(f"(entry, dtype) pairs of the found entries: {s['pairs']}; passing {s['passing']} "
          f"({100 * s['passing'] / max(1, s['pairs']):.1f}%)   [{seconds:.0f} s]")
    if args.missing:
        for name, e in sorted(entries.items()):
            if not e["found"]:
                print("  missing", name)
    if args.failing:
        for name, e in sorted(entries.items()):
            for dtype, (ok, reason) in e["pairs"].items():
                if not ok:
                    print(f"  fail {name} {dtype}: {reason}")
    if args.write:
        passing = sorted(f"{name} {dtype}" for name, e in entries.items()
                         for dtype, (ok, _) in e["pairs"].items() if ok)
        found = sorted(name for name, e in entries.items() if e["found"])
        BASELINE.write_text(json.dumps({"summary": s, "found": found, "passing": passing},
                                       indent=0) + "\n")
        print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
