"""Loading while another thread saves: every load is one whole version of the file.

`save` replaces the file atomically (temp file + rename), so a load sees either the old or
the new inode; it must read the header and the tensors from the same one. Each version k
holds tensors all equal to k, under names and in shapes that encode k, so a mix of two
versions shows as a wrong name, shape, value or count.
"""

from __future__ import annotations

import threading

import numpy as np

import shapeflow as sf
from shapeflow.io import checkpoint as _ck

ROUNDS = 500


def _version(k: int) -> dict:
    """Version k: its number, and 1 + k % 4 tensors of k % 5 + 1 rows, all equal to k."""
    rows = k % 5 + 1
    return {"k": k, **{f"v{k}_{i}": sf.full((rows, 3 + i), float(k)) for i in range(1 + k % 4)}}


def _whole(obj) -> int:
    """The version `obj` is, asserting it is all of that version and nothing else."""
    k = obj["k"]
    assert sorted(obj) == sorted(["k", *(f"v{k}_{i}" for i in range(1 + k % 4))]), obj.keys()
    for i in range(1 + k % 4):
        arr = obj[f"v{k}_{i}"].numpy()
        assert arr.shape == (k % 5 + 1, 3 + i)
        assert (arr == k).all()
    return k


def test_load_while_saving_gives_one_whole_version(tmp_path, monkeypatch):
    monkeypatch.setattr(_ck.os, "fsync", lambda fd: None)  # durability is not tested here: speed
    path = tmp_path / "ck.safetensors"
    sf.save(_version(0), path)
    done = threading.Event()
    errors: list = []

    def saver():
        try:
            for k in range(1, ROUNDS + 1):
                sf.save(_version(k), path)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=saver)
    seen, failures = [], []
    thread.start()
    try:
        while not done.is_set() or len(seen) < ROUNDS:
            try:
                seen.append(_whole(sf.load(path)))
            except (AssertionError, sf.errors.CheckpointError) as e:
                failures.append(f"{type(e).__name__}: {e}")
    finally:
        thread.join()
    assert not errors, errors
    assert not failures, f"{len(failures)} of {len(seen) + len(failures)} loads: {failures[:3]}"
    assert len(seen) >= ROUNDS and seen == sorted(seen)  # versions only move forward
    assert _whole(sf.load(path)) == ROUNDS


def test_file_replaced_between_header_and_tensors(tmp_path, monkeypatch):
    """Deterministic: a save lands right after the header has been read."""
    path = tmp_path / "ck.safetensors"
    sf.save(_version(1), path)
    other = tmp_path / "other.safetensors"
    sf.save(_version(2), other)
    real = _ck.read_header

    def replace_then(*args, **kwargs):
        out = real(*args, **kwargs)
        other.replace(path)  # a concurrent save landing now
        return out

    monkeypatch.setattr(_ck, "read_header", replace_then)
    assert _whole(sf.load(path)) == 1  # the version opened, entire
    monkeypatch.undo()
    assert _whole(sf.load(path)) == 2  # and the next load sees the new one


def test_quant_load_reads_one_version(tmp_path, monkeypatch):
    """sf.quant.load goes through the same single open: a save landing mid-load is unseen."""
    sf.manual_seed(0)
    float_model = sf.models.MLP(32, [32], 4)
    q1 = sf.quant.quantize(float_model, "int8")
    sf.manual_seed(1)
    q2 = sf.quant.quantize(sf.models.MLP(32, [64], 4), "int8")  # other sizes
    path, other = tmp_path / "q.safetensors", tmp_path / "q2.safetensors"
    sf.quant.save(q1, path)
    sf.quant.save(q2, other)
    real = _ck.read_header

    def replace_then(*args, **kwargs):
        out = real(*args, **kwargs)
        if other.exists():
            other.replace(path)
        return out

    monkeypatch.setattr(_ck, "read_header", replace_then)
    back = sf.quant.load(path, float_model)
    want = q1.state_dict()
    got = back.state_dict()
    assert want.keys() == got.keys()
    for key in want:
        np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())
