"""`sf.tensor` of lists holding tensors (as torch.tensor), and autocast shared across threads.

torch.tensor reads each tensor in a list as one scalar (any shape with one element), finds
the shape from the first entries, and promotes the dtypes of all leaves.
"""

import threading
import time
import warnings

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import ShapeflowError

torch = pytest.importorskip("torch")

# (id, data built from a module m (torch or shapeflow), keyword arguments for m.tensor)
CASES = [
    ("0d-float", lambda m: [m.tensor(1.5), m.tensor(-2.0), m.tensor(3.25)], {}),
    ("0d-int", lambda m: [m.tensor(1), m.tensor(-7)], {}),
    ("0d-bool", lambda m: [m.tensor(True), m.tensor(False)], {}),
    ("one-element-1d", lambda m: [m.tensor([1.0]), m.tensor([2.0])], {}),
    ("one-element-2d", lambda m: [m.tensor([[1.0]]), m.tensor([[2.0]])], {}),
    ("0d-and-one-element", lambda m: [m.tensor(1.0), m.tensor([2.0])], {}),
    ("tuple", lambda m: (m.tensor(1.0), m.tensor(2.0)), {}),
    ("views-of-one-tensor", lambda m: list(m.arange(6.0)), {}),
    ("rows-of-a-tensor", lambda m: list(m.arange(6.0).reshape(3, 2)), {}),
    ("k-element", lambda m: [m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0])], {}),
    ("one-k-element", lambda m: [m.tensor([1.0, 2.0, 3.0])], {}),
    ("empty-tensors", lambda m: [m.tensor([]), m.tensor([])], {}),
    ("nested", lambda m: [[m.tensor(1.0), m.tensor(2.0)], [m.tensor(3.0), m.tensor(4.0)]], {}),
    ("nested-deeper", lambda m: [[[m.tensor(1)], [m.tensor(2)]]], {}),
    ("nested-mixed", lambda m: [[m.tensor(1.0), 2.0], [3.0, m.tensor(4.0)]], {}),
    ("tensor-as-row", lambda m: [[3.0, 4.0], m.tensor([1.0, 2.0])], {}),
    ("tensor-as-column-rows", lambda m: [[1.0, 2.0], m.tensor([[3.0], [4.0]])], {}),
    ("tensor-row-first", lambda m: [m.tensor([1.0, 2.0]), [3.0, 4.0]], {}),
    ("ragged-tensor-row", lambda m: [[1.0, 2.0], m.tensor([3.0, 4.0, 5.0])], {}),
    ("scalar-for-a-row", lambda m: [[1.0, 2.0], m.tensor(3.0)], {}),
    ("list-for-a-scalar", lambda m: [m.tensor(1.0), [2.0]], {}),
    ("deep-inner-only", lambda m: [[m.tensor(1, dtype=m.float64), 2]], {}),
    ("tensor-then-float", lambda m: [m.tensor(1.0), 2.5], {}),
    ("int-tensor-then-float", lambda m: [m.tensor(1), 2.5], {}),
    ("float-then-int-tensor", lambda m: [2.5, m.tensor(1)], {}),
    ("int-then-float-tensor", lambda m: [1, m.tensor(2.5)], {}),
    ("bool-tensor-then-float", lambda m: [m.tensor(True), 2.5], {}),
    ("int-tensor-then-bool", lambda m: [m.tensor(1), True], {}),
    ("f16-then-float", lambda m: [m.tensor(1.0, dtype=m.float16), 2.5], {}),
    ("i32-then-int", lambda m: [m.tensor(1, dtype=m.int32), 2], {}),
    ("u8-then-int", lambda m: [m.tensor(1, dtype=m.uint8), 2], {}),
    ("u8-then-bool", lambda m: [m.tensor(1, dtype=m.uint8), True], {}),
    ("int-then-f16", lambda m: [2, m.tensor(1, dtype=m.float16)], {}),
    ("np-scalar-and-tensor", lambda m: [np.float64(1.5), m.tensor(2)], {}),
    ("tensor-and-np-scalar", lambda m: [m.tensor(2), np.int32(3)], {}),
    ("int-and-float", lambda m: [m.tensor(1), m.tensor(2.5)], {}),
    ("float-and-int", lambda m: [m.tensor(1.5), m.tensor(2)], {}),
    ("f64-and-f32", lambda m: [m.tensor(1.5, dtype=m.float64), m.tensor(2.0)], {}),
    ("f32-and-f64", lambda m: [m.tensor(1.5), m.tensor(2.0, dtype=m.float64)], {}),
    ("bool-and-int", lambda m: [m.tensor(True), m.tensor(2)], {}),
    ("i32-and-i64", lambda m: [m.tensor(1, dtype=m.int32), m.tensor(2)], {}),
    ("u8-and-i8", lambda m: [m.tensor(1, dtype=m.uint8), m.tensor(-2, dtype=m.int8)], {}),
    ("f16-and-i64", lambda m: [m.tensor(1, dtype=m.float16), m.tensor(2)], {}),
    ("bf16-and-f16", lambda m: [m.tensor(1, dtype=m.bfloat16), m.tensor(2, dtype=m.float16)],
     {}),
    ("u16-and-i8", lambda m: [m.tensor(1, dtype=m.uint16), m.tensor(1, dtype=m.int8)], {}),
    ("big-int64", lambda m: [m.tensor(2**62 + 1), m.tensor(-(2**61))], {}),
    ("to-int32", lambda m: [m.tensor(1), m.tensor(2)], {"dtype": "int32"}),
    ("to-float64", lambda m: [m.tensor(1), m.tensor(2)], {"dtype": "float64"}),
    ("to-float16", lambda m: [m.tensor(1.5), m.tensor(2.0)], {"dtype": "float16"}),
    ("int-to-bool", lambda m: [m.tensor(1), m.tensor(0)], {"dtype": "bool"}),
    ("bool-to-int64", lambda m: [m.tensor(True), m.tensor(False)], {"dtype": "int64"}),
    ("float-to-int64", lambda m: [m.tensor(1.5), m.tensor(2.0)], {"dtype": "int64"}),
    ("float-to-bool", lambda m: [m.tensor(1.5), m.tensor(0.0)], {"dtype": "bool"}),
    ("py-float-to-int64", lambda m: [1.5, m.tensor(2)], {"dtype": "int64"}),
    ("a-string", lambda m: [m.tensor(1.0), "a"], {}),
    ("a-none", lambda m: [m.tensor(1.0), None], {}),
]


def _numpy(t) -> np.ndarray:
    if t.dtype in (torch.bfloat16, sf.bfloat16):
        t = t.float()
    return t.numpy()


def _make(m, build, kwargs):
    kwargs = {k: getattr(m, v) if k == "dtype" else v for k, v in kwargs.items()}
    return m.tensor(build(m), **kwargs)


@pytest.mark.parametrize("build, kwargs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tensor_of_tensors_matches_torch(build, kwargs):
    try:
        want = _make(torch, build, kwargs)
    except Exception as e:  # noqa: BLE001  (the error shapeflow must raise too)
        with pytest.raises(type(e)) as info:
            _make(sf, build, kwargs)
        assert isinstance(info.value, ShapeflowError), info.value
        assert "tensor" in str(info.value)
        return
    got = _make(sf, build, kwargs)
    assert list(got.shape) == list(want.shape)
    assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(_numpy(got), _numpy(want))
    assert not got.requires_grad


def test_tensor_of_tensors_requiring_grad_warns_and_detaches():
    leaves = [sf.tensor(1.0, requires_grad=True), sf.tensor(2.0, requires_grad=True)]
    with pytest.warns(UserWarning, match="requires_grad=True to a scalar"):
        out = sf.tensor(leaves)
    assert out.tolist() == [1.0, 2.0] and not out.requires_grad and out.grad_fn is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asked = sf.tensor([sf.tensor(1.0), sf.tensor(2.0)], requires_grad=True)
    assert asked.requires_grad and asked.is_leaf and list(asked.shape) == [2]


def _best_time(fn, data, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(data)
        best = min(best, time.perf_counter() - start)
    return best


def test_tensor_of_many_0d_tensors_is_fast_and_exact():
    n = 10**5
    values = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    ours = [sf.tensor(v) for v in values]
    theirs = [torch.tensor(v) for v in values]
    got, want = sf.tensor(ours), torch.tensor(theirs)
    assert list(got.shape) == list(want.shape) == [n] and got.dtype is sf.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    t_sf, t_torch = _best_time(sf.tensor, ours), _best_time(torch.tensor, theirs)
    # ~0.5x PyTorch's time here; 10x leaves room for a loaded CI machine
    assert t_sf < 10 * t_torch + 0.05, (t_sf, t_torch)


# ---- one autocast instance, several threads ------------------------------------------------

def _state() -> tuple:
    return sf.is_autocast_enabled("cpu"), sf.get_autocast_dtype("cpu")


def _run_pair(first, second) -> None:
    """Run `first` and `second` in two threads; errors in either are re-raised here."""
    errors = []

    def guard(fn):
        def body():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001  (re-raised in the main thread)
                errors.append(e)
        return body

    threads = [threading.Thread(target=guard(fn)) for fn in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    if errors:
        raise errors[0]


def _interleaved(shared, use: str) -> dict:
    """Thread A (inside its own float16 region) enters `shared` first, B (no region) second;
    A leaves first, then B: each must get back its own state, not the other's."""
    a_inside, a_left = threading.Event(), threading.Event()
    both_inside = threading.Barrier(2, timeout=10)
    seen: dict = {}

    def region(role: str) -> None:
        seen[role + " inside"] = _state()
        if role == "A":
            a_inside.set()
        both_inside.wait()
        if role == "B":
            a_left.wait(timeout=10)

    def enter(role: str) -> None:
        if use == "decorator":
            shared(region)(role)
        else:
            with shared:
                region(role)

    def thread_a() -> None:
        with sf.autocast("cpu", dtype=sf.float16):
            enter("A")
            seen["A after"] = _state()
        seen["A outside"] = _state()
        a_left.set()

    def thread_b() -> None:
        a_inside.wait(timeout=10)
        enter("B")
        seen["B after"] = _state()

    _run_pair(thread_a, thread_b)
    return seen


@pytest.mark.parametrize("use", ["decorator", "with"])
def test_shared_autocast_restores_each_threads_state(use):
    shared = sf.autocast("cpu", dtype=sf.bfloat16)
    seen = _interleaved(shared, use)
    assert seen["A inside"] == seen["B inside"] == (True, sf.bfloat16)
    assert seen["A after"] == (True, sf.float16)
    assert seen["A outside"] == (False, sf.bfloat16)
    assert seen["B after"] == (False, sf.bfloat16)
    assert _state() == (False, sf.bfloat16)  # the main thread never entered


def test_shared_autocast_reentered_in_one_thread_while_another_leaves():
    shared = sf.autocast("cpu", dtype=sf.float16)
    b_inside, a_innermost, b_left = threading.Event(), threading.Event(), threading.Event()
    seen: dict = {}

    def thread_a() -> None:
        b_inside.wait(timeout=10)
        with shared:
            with sf.autocast("cpu", enabled=False):
                with shared:
                    a_innermost.set()
                    b_left.wait(timeout=10)  # B leaves `shared` while A is inside it twice
                    seen["A innermost"] = _state()
                seen["A disabled"] = _state()
            seen["A region"] = _state()
        seen["A after"] = _state()

    def thread_b() -> None:
        with sf.autocast("cpu", dtype=sf.bfloat16):
            with shared:
                b_inside.set()
                a_innermost.wait(timeout=10)
                seen["B region"] = _state()
            seen["B after"] = _state()
            b_left.set()

    _run_pair(thread_a, thread_b)
    assert seen["A innermost"] == seen["A region"] == seen["B region"] == (True, sf.float16)
    assert seen["A disabled"][0] is False
    assert seen["A after"] == (False, sf.bfloat16)
    assert seen["B after"] == (True, sf.bfloat16)
