"""`default_collate` and the DataLoader batch samples as PyTorch's do: types, dtypes, values.

Each batch is built twice, with torch and with shapeflow tensors, and both frameworks'
results (or errors) are compared: structure, container types, dtypes, shapes and values.
"""

import collections

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.data import DataLoader, default_collate
from shapeflow.errors import ShapeflowError

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader as TorchLoader  # noqa: E402
from torch.utils.data import default_collate as torch_collate  # noqa: E402

Point = collections.namedtuple("Point", "x y")

# (id, batch built from a module m: torch or shapeflow)
BATCHES = [
    ("ints", lambda m: [1, 2, 3]),
    ("int-then-floats", lambda m: [1, 2.5, 3]),
    ("bool-then-ints", lambda m: [True, 2, 0]),
    ("bools", lambda m: [True, False]),
    ("bool-then-float", lambda m: [True, 2.5]),
    ("float-then-ints", lambda m: [2.5, 1, True]),
    ("floats", lambda m: [0.1, -2.0]),
    ("np-f32-py-float", lambda m: [np.float32(1), 2.5]),
    ("np-i32-np-i64", lambda m: [np.int32(1), np.int64(2)]),
    ("np-i32-py-int", lambda m: [np.int32(1), 2]),
    ("np-u8-np-i8", lambda m: [np.uint8(3), np.int8(-1)]),
    ("np-bools", lambda m: [np.bool_(True), np.bool_(False)]),
    ("np-f16", lambda m: [np.float16(1), np.float16(2)]),
    ("np-f64-then-int", lambda m: [np.float64(1.5), 2]),
    ("np-arrays", lambda m: [np.array([1, 2]), np.array([3, 4])]),
    ("np-arrays-mixed", lambda m: [np.array([1, 2], np.int32), np.array([3.0, 4.0])]),
    ("np-array-then-int", lambda m: [np.array(1.0), 2]),
    ("np-0d-int16", lambda m: [np.array(1, np.int16), np.array(2, np.int16)]),
    ("np-2d-f32", lambda m: [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)]),
    ("tensors", lambda m: [m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0])]),
    ("tensors-int-float", lambda m: [m.tensor(1), m.tensor(2.5)]),
    ("tensors-f64-f32", lambda m: [m.tensor([1.0, 2.0], dtype=m.float64), m.tensor([1.0, 2.0])]),
    ("tensors-bool", lambda m: [m.tensor(True), m.tensor(False)]),
    ("tensor-requiring-grad", lambda m: [m.tensor(1.0, requires_grad=True), m.tensor(2.0)]),
    ("strings", lambda m: ["a", "b"]),
    ("bytes", lambda m: [b"a", b"b"]),
    ("np-strings", lambda m: [np.str_("a"), np.str_("b")]),
    ("dicts", lambda m: [{"a": 1, "b": 2.5}, {"a": 3, "b": 4.5}]),
    ("dict-extra-key", lambda m: [{"a": 1}, {"a": 3, "b": 4}]),
    ("ordered-dicts", lambda m: [collections.OrderedDict(a=1), collections.OrderedDict(a=2)]),
    ("namedtuples", lambda m: [Point(1, 2.5), Point(3, 4.5)]),
    ("tuples", lambda m: [(1, "a"), (2, "b")]),
    ("lists", lambda m: [[1, 2], [3, 4]]),
    ("ranges", lambda m: [range(2), range(2)]),
    ("empty-tuples", lambda m: [(), ()]),
    ("nested", lambda m: [{"x": [np.array([1.0]), (2, "s")], "y": m.tensor([1, 2])},
                          {"x": [np.array([3.0]), (4, "t")], "y": m.tensor([3, 4])}]),
    ("tensor-then-int", lambda m: [m.tensor(1), 2]),
    ("ragged-tensors", lambda m: [m.tensor([1, 2]), m.tensor([1])]),
    ("ragged-arrays", lambda m: [np.zeros(2), np.zeros(3)]),
    ("np-str-arrays", lambda m: [np.array(["a"]), np.array(["b"])]),
    ("np-object-arrays", lambda m: [np.array([None]), np.array([None])]),
    ("np-datetimes", lambda m: [np.datetime64(1, "D"), np.datetime64(2, "D")]),
    ("nones", lambda m: [None, None]),
    ("int-then-none", lambda m: [1, None]),
    ("int-then-string", lambda m: [1, "a"]),
    ("float-then-string", lambda m: [1.5, "a"]),
    ("objects", lambda m: [object(), object()]),
    ("complex", lambda m: [1j, 2j]),
    ("dict-missing-key", lambda m: [{"a": 1}, {"b": 3}]),
    ("dict-then-list", lambda m: [{"a": 1}, [1]]),
    ("lists-of-unequal-length", lambda m: [[1, 2], [3]]),
]


def assert_same(ours, theirs, where: str = "batch") -> None:
    """The same structure, container types, dtypes, shapes and values."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, sf.Tensor), f"{where}: {type(ours).__name__}, not a tensor"
        assert list(ours.shape) == list(theirs.shape), where
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch."), where
        assert ours.requires_grad == theirs.requires_grad, where
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy(), where)
        return
    assert type(ours) is type(theirs), f"{where}: {type(ours).__name__} != {type(theirs).__name__}"
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, where


def check_like_torch(ours_fn, theirs_fn) -> None:
    """Run both; the same result, or an error of the same builtin kind (shapeflow's own)."""
    try:
        theirs = theirs_fn()
    except Exception as e:  # noqa: BLE001  (the kind of error shapeflow must raise too)
        with pytest.raises(type(e)) as info:
            ours_fn()
        assert isinstance(info.value, ShapeflowError), repr(info.value)
        return
    assert_same(ours_fn(), theirs)


@pytest.mark.parametrize("build", [b for _, b in BATCHES], ids=[i for i, _ in BATCHES])
def test_default_collate_matches_torch(build):
    check_like_torch(lambda: default_collate(build(sf)), lambda: torch_collate(build(torch)))


DATASETS = [
    ("numbers", lambda m: [1, 2.5, 3, True, 0, 7]),
    ("floats-first", lambda m: [2.5, 1, True, 4, 0.5]),
    ("dicts", lambda m: [{"image": np.full((2, 2), i, np.float32), "label": i, "name": f"s{i}"}
                         for i in range(5)]),
    ("pairs", lambda m: [(m.tensor([float(i), 1.0]), i % 2 == 0) for i in range(5)]),
    ("namedtuples", lambda m: [Point(np.int32(i), [i, 2.0 * i]) for i in range(4)]),
]


@pytest.mark.parametrize("batch_size", [1, 2, 3])
@pytest.mark.parametrize("build", [b for _, b in DATASETS], ids=[i for i, _ in DATASETS])
def test_dataloader_batches_match_torch(build, batch_size):
    ours = list(DataLoader(build(sf), batch_size=batch_size))
    theirs = list(TorchLoader(build(torch), batch_size=batch_size))
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_same(a, b, f"batch {i}")


def test_collated_tensors_keep_the_graph():
    x = sf.tensor([1.0, 2.0], requires_grad=True)
    batch = default_collate([x * 2, x * 3])
    batch.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]  # d/dx of sum(2x + 3x)
