"""Tensor.data: a tensor outside the graph sharing the storage, as PyTorch's (issue 36)."""

import numpy as np
import pytest

import shapeflow as sf

torch = pytest.importorskip("torch")

W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)


def _pair(arr=W):
    """The same leaf parameter in shapeflow and in PyTorch."""
    return sf.nn.Parameter(sf.tensor(arr)), torch.nn.Parameter(torch.tensor(arr))


def test_data_is_a_plain_tensor_without_numpy_methods_as_torch():
    p, tp = _pair()
    assert type(p.data) is sf.Tensor and type(tp.data) is torch.Tensor
    for name in ("fill", "fill_", "add_", "copy_", "zero_"):
        assert hasattr(p.data, name) == hasattr(tp.data, name), name
    assert not hasattr(p.data, "fill")  # NumPy's fill would go around autograd
    d = p.data
    assert d is not p and not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert d.shape == p.shape and d.dtype is p.dtype and d.device == p.device


def test_sgd_step_through_data_updates_the_parameter_in_place_as_torch():
    lr = 0.1
    p, tp = _pair()
    for _ in range(3):
        p.grad, tp.grad = None, None
        (p * p * p).sum().backward()
        (tp * tp * tp).sum().backward()
        p.data.add_(p.grad, alpha=-lr)
        tp.data.add_(tp.grad, alpha=-lr)
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6)
    assert isinstance(p, sf.nn.Parameter) and p.requires_grad and p.grad_fn is None
    assert p.is_leaf == tp.is_leaf


def test_fill_weight_through_data_as_torch():
    m, tm = sf.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    m.weight.data.fill_(0.5)
    tm.weight.data.fill_(0.5)
    np.testing.assert_array_equal(m.weight.detach().numpy(), tm.weight.detach().numpy())
    assert m.weight.requires_grad and isinstance(m.weight, sf.nn.Parameter)
    y = m(sf.ones(1, 3)).sum()
    y.backward()  # still a parameter in the graph
    assert m.weight.grad is not None


def test_in_place_change_through_data_does_not_bump_the_version_as_torch():
    p, tp = _pair()
    d, td = p.data, tp.data
    d.add_(1)
    td.add_(1)
    assert (p.version, d.version) == (tp._version, td._version)
    np.testing.assert_array_equal(p.detach().numpy(), tp.detach().numpy())


@pytest.mark.parametrize("case", ["saved output", "saved leaf"])
def test_change_through_data_is_invisible_to_the_version_check_as_torch(case):
    a, ta = sf.tensor([0.5, 1.0, 2.0], requires_grad=True), torch.tensor(
        [0.5, 1.0, 2.0], requires_grad=True)
    if case == "saved output":  # exp keeps its output for backward
        y, ty = (a * 2).exp(), (ta * 2).exp()
        y.data.mul_(2)
        ty.data.mul_(2)
    else:  # mul keeps its inputs
        y, ty = a * a, ta * ta
        a.data.mul_(3)
        ta.data.mul_(3)
    y.sum().backward()  # no error: the new values are used, as PyTorch does
    ty.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)


def test_data_of_a_non_leaf_is_detached_and_shares_storage():
    a = sf.tensor(W, requires_grad=True)
    b = a * 2
    d = b.data
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert b.grad_fn is not None and b.requires_grad
    d.fill_(3.0)
    np.testing.assert_array_equal(b.detach().numpy(), np.full_like(W, 3.0))


def test_data_of_a_view_writes_the_base_as_torch():
    x, tx = sf.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    v, tv = x[:, 1], tx[:, 1]
    assert v.data.shape == tv.data.shape
    v.data.fill_(7.0)
    tv.data.fill_(7.0)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_data_of_a_meta_tensor_is_a_meta_tensor():
    m, tm = sf.zeros(2, 3, device="meta"), torch.zeros(2, 3, device="meta")
    assert m.data.is_meta and tm.data.is_meta
    assert tuple(m.data.shape) == tuple(tm.data.shape) == (2, 3)
    p = sf.nn.Linear(4, 5, device="meta").weight
    assert p.data.is_meta and p.data.shape == p.shape


@pytest.mark.parametrize("shape", [(2, 3), (4,)])
def test_assigning_data_takes_the_tensor_storage_and_shape_as_torch(shape):
    p, tp = _pair()
    other = sf.full(shape, 5.0)
    tother = torch.full(shape, 5.0)
    p.data = other
    tp.data = tother
    assert tuple(p.shape) == tuple(tp.shape) == shape
    assert (p.data is other) is (tp.data is tother) is False  # a new tensor on each read
    assert isinstance(p, sf.nn.Parameter) and p.requires_grad and p.is_leaf
    assert np.shares_memory(p.detach().numpy(), other.numpy())  # as torch: same storage
    other.fill_(6.0)
    np.testing.assert_array_equal(p.detach().numpy(), np.full(shape, 6.0, np.float32))
    (p * p).sum().backward()
    assert p.grad.shape == p.shape


def test_assigning_data_mid_graph_is_seen_by_backward_as_torch():
    p, tp = _pair()
    y, ty = (p * p).sum(), (tp * tp).sum()
    new, tnew = sf.full(W.shape, 5.0), torch.full(W.shape, 5.0)
    p.data, tp.data = new, tnew
    assert (p.data is new) is (tp.data is tnew) is False
    y.backward()
    ty.backward()
    np.testing.assert_array_equal(p.grad.numpy(), tp.grad.numpy())


def test_assigning_data_of_another_dtype_as_torch():
    p, tp = _pair()
    p.data = sf.zeros(2, dtype=sf.float64)
    tp.data = torch.zeros(2, dtype=torch.float64)
    assert str(p.dtype) == str(tp.dtype).removeprefix("torch.") == "float64"


def test_bad_data_assignments_raise_as_torch():
    p, tp = _pair()
    with pytest.raises(TypeError):
        tp.data = np.zeros(2)
    with pytest.raises(sf.DTypeError, match=r"t\.data = sf\.tensor"):
        p.data = np.zeros(2, np.float32)
    with pytest.raises(RuntimeError):
        tp.data = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(sf.DTypeError) as e:
        p.data = sf.zeros(2, dtype=sf.int64)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(RuntimeError):
        tp.data = torch.zeros(2, device="meta")
    with pytest.raises(sf.DeviceError):
        p.data = sf.zeros(2, device="meta")
    np.testing.assert_array_equal(p.detach().numpy(), W)  # left unchanged


def test_backward_from_data_says_it_left_the_graph():
    p, tp = _pair()
    with pytest.raises(RuntimeError):
        tp.data.backward(torch.ones_like(tp))
    with pytest.raises(sf.GraphError, match=r"\.data"):
        p.data.backward(sf.ones_like(p))
