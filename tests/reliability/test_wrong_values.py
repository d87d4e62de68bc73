"""No silently wrong values: each case against PyTorch, beyond the one-line catalogue entries."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.nn import functional as F

torch = pytest.importorskip("torch")


# ---- view: a view or an error, as PyTorch's stride rules decide ------------------------

def _strided_cases():
    """(description, make(lib) -> tensor) for permuted, sliced and expanded layouts."""
    cases = []
    for perm in itertools.permutations(range(3)):
        cases.append((f"permute{perm}", lambda m, p=perm: m.arange(24).reshape(2, 3, 4)
                      .permute(*p)))
    cases.append(("slice-step", lambda m: m.arange(24).reshape(4, 6)[:, ::2]))
    cases.append(("slice-cols", lambda m: m.arange(24).reshape(4, 6)[:, 1:4]))
    cases.append(("slice-rows", lambda m: m.arange(24).reshape(4, 6)[1:3]))
    cases.append(("expand", lambda m: m.arange(6).reshape(2, 1, 3).expand(2, 4, 3)))
    cases.append(("expand-lead", lambda m: m.arange(3).reshape(1, 3).expand(4, 3)))
    cases.append(("unit-dims", lambda m: m.arange(6).reshape(1, 2, 1, 3).permute(2, 0, 3, 1)))
    return cases


def _targets(n: int):
    shapes = [(n,), (-1,)]
    for a in range(1, n + 1):
        if n % a == 0:
            shapes.append((a, n // a))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    shapes.append((a, b, n // a // b))
    return shapes


@pytest.mark.parametrize("desc,make", _strided_cases(), ids=[c[0] for c in _strided_cases()])
def test_view_raises_exactly_where_pytorch_does(desc, make):
    x, tx = make(sf), make(torch)
    for shape in _targets(tx.numel()):
        try:
            tv = tx.view(*shape)
        except RuntimeError:
            with pytest.raises(sf.ShapeError, match="reshape"):
                x.view(*shape)
            continue
        v = x.view(*shape)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        assert v._base is not None or v is x  # shares memory with x


def test_writes_through_a_view_reach_the_base():
    x = sf.zeros(3, 4)
    v = x.transpose(0, 1).view(4, 3)  # same shape: a legal view of a transposed tensor
    v[0, 1] = 5.0
    assert x[1, 0].item() == 5.0
    with pytest.raises(sf.ShapeError) as e:
        x.transpose(0, 1).view(12)
    assert "reshape" in str(e.value) and "view" in str(e.value)
    assert x.transpose(0, 1).reshape(12).shape == (12,)  # reshape copies, as PyTorch's


def test_view_on_meta_follows_the_same_rule():
    x = sf.zeros(3, 4, device="meta")
    assert x.transpose(0, 1).view(4, 3).shape == (4, 3)
    with pytest.raises(sf.ShapeError):
        x.transpose(0, 1).view(12)


# ---- NumPy scalars keep their dtype --------------------------------------------------------

@pytest.mark.parametrize("value", [np.float64(1.5), np.float32(1.5), np.float16(1.5),
                                   np.int64(3), np.int32(3), np.int16(3), np.int8(-3),
                                   np.uint8(3), np.bool_(True)])
def test_numpy_scalars_keep_their_dtype(value):
    assert str(sf.tensor(value).dtype).split(".")[-1] == str(torch.tensor(value).dtype).split(
        ".")[-1]


@pytest.mark.parametrize("data", [[np.float64(1.5), 2.5], [np.float32(1), 2], [np.int32(1), 2],
                                  [np.int32(1), 2.5], [[np.int16(1)], [np.int16(2)]],
                                  [True, np.bool_(False)], [1.5, 2.5], [1, 2]])
def test_lists_with_numpy_scalars_promote_as_pytorch(data):
    assert str(sf.tensor(data).dtype).split(".")[-1] == str(torch.tensor(data).dtype).split(
        ".")[-1]


# ---- grad assignment ------------------------------------------------------------------------

@pytest.mark.parametrize("make,cls", [
    (lambda m: m.zeros(5), sf.ShapeError), (lambda m: m.zeros(3), sf.ShapeError),
    (lambda m: m.zeros(1, 3), sf.ShapeError),
    (lambda m: m.zeros(2, 3, dtype=m.float64), sf.DTypeError),
    (lambda m: m.zeros(2, 3, device="meta"), sf.DeviceError),
])
def test_grad_assignment_is_checked_and_leaves_the_old_grad(make, cls):
    tp = torch.nn.Parameter(torch.zeros(2, 3))
    with pytest.raises((RuntimeError, TypeError)):
        tp.grad = make(torch)
    p = sf.nn.Parameter(sf.zeros(2, 3))
    p.grad = sf.ones(2, 3)
    with pytest.raises(cls, match="grad assignment"):
        p.grad = make(sf)
    np.testing.assert_array_equal(p.grad.numpy(), np.ones((2, 3)))
    p.grad = None
    assert p.grad is None


# ---- softmax / log_softmax rows with inf, -inf and NaN ---------------------------------------

ROWS = [[np.inf, -np.inf, 1.0], [np.inf, 1.0, 1.0], [np.inf, np.inf, 0.0], [-np.inf, -np.inf, 0.0],
        [-np.inf, -np.inf, -np.inf], [np.nan, 1.0, 0.0], [-np.inf, 0.0, 1.0], [3e38, -3e38, 0.0],
        [88.0, 89.0, -200.0], [1.0, 2.0, 3.0]]


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("compiled", [True, False])
def test_softmax_of_special_rows_matches_pytorch(fn, dtype, dim, compiled):
    a = np.array(ROWS, dtype)
    a = a if dim == -1 else np.ascontiguousarray(a.T)
    old = kernels.set_enabled(compiled)
    try:
        with np.errstate(all="ignore"):
            out = getattr(F, fn)(sf.tensor(a), dim).numpy()
    finally:
        kernels.set_enabled(old)
    ref = getattr(torch.nn.functional, fn)(torch.tensor(a), dim).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("compiled", [True, False])
def test_cross_entropy_with_special_logits_matches_pytorch(compiled):
    a = np.array(ROWS, np.float32)
    t = np.array([1, 2, 2, 2, 0, 1, 0, 2, 1, 0])
    old = kernels.set_enabled(compiled)
    try:
        with np.errstate(all="ignore"):
            rows = F.cross_entropy(sf.tensor(a), sf.tensor(t), reduction="none").numpy()
            mean = F.cross_entropy(sf.tensor(a[5:6]), sf.tensor(t[5:6])).numpy()
    finally:
        kernels.set_enabled(old)
    ref = torch.nn.functional.cross_entropy(torch.tensor(a), torch.tensor(t), reduction="none")
    np.testing.assert_allclose(rows, ref.numpy(), rtol=1e-5, atol=1e-5)  # lse - x: cancels
    assert np.isnan(mean)  # the NaN row alone, through the fused path when compiled


# ---- binary cross-entropy -------------------------------------------------------------------

@pytest.mark.parametrize("p", [[1.5], [-0.5, 0.5], [np.nan], [1.0 + 1e-6]])
def test_bce_outside_0_1_raises_as_pytorch(p):
    y = [1.0] * len(p)
    with pytest.raises(RuntimeError):
        torch.nn.functional.binary_cross_entropy(torch.tensor(p), torch.tensor(y))
    with pytest.raises(sf.ShapeError, match="between 0 and 1") as e:
        F.binary_cross_entropy(sf.tensor(p), sf.tensor(y))
    assert "with_logits" in str(e.value)


def test_bce_at_the_edges_and_with_logits_at_inf_match_pytorch():
    p, y = [0.0, 1.0, 0.0, 1.0, 0.5], [1.0, 0.0, 0.0, 1.0, 0.3]
    out = F.binary_cross_entropy(sf.tensor(p), sf.tensor(y), reduction="none").numpy()
    ref = torch.nn.functional.binary_cross_entropy(torch.tensor(p), torch.tensor(y),
                                                   reduction="none").numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    x, y = [np.inf, -np.inf, np.inf, 3.0], [0.0, 1.0, 0.5, 0.0]
    with np.errstate(all="ignore"):
        out = F.binary_cross_entropy_with_logits(sf.tensor(x), sf.tensor(y),
                                                 reduction="none").numpy()
    ref = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(x), torch.tensor(y), reduction="none").numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_allclose(out, ref, rtol=1e-6)


# ---- errors that were not shapeflow's: class, builtin, op, operand, rule ---------------------

def test_ragged_lists_name_the_entry():
    with pytest.raises(sf.ShapeError, match=r"data\[1\]\[0\] is a list of 1, but data\[0\]\[0\] "
                       r"is a list of 2") as e:
        sf.tensor([[[1, 2]], [[3]]])
    assert isinstance(e.value, ValueError)


def test_integer_negative_power():
    with pytest.raises(sf.DTypeError, match="negative integer power") as e:
        sf.tensor([1, 2]) ** -1
    assert "float" in str(e.value)
    np.testing.assert_allclose((sf.tensor([1, 2]) ** -1.0).numpy(), [1.0, 0.5])


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "Adadelta"])
def test_optimizer_string_lr(opt):
    p = sf.nn.Parameter(sf.zeros(2))
    with pytest.raises(sf.DTypeError, match="lr must be a number, got str") as e:
        getattr(sf.optim, opt)([p], lr="0.1")
    assert isinstance(e.value, TypeError) and e.value.op == opt


@pytest.mark.parametrize("kw", [{"stride": 0}, {"dilation": 0}, {"padding": -1}])
def test_conv2d_bad_geometry_is_a_shape_error(kw):
    with pytest.raises(sf.ShapeError, match="conv2d") as e:
        F.conv2d(sf.zeros(1, 1, 4, 4), sf.zeros(1, 1, 3, 3), **kw)
    assert isinstance(e.value, ValueError) and next(iter(kw)) in str(e.value)
