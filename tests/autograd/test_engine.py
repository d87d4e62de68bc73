"""The backward engine: accumulation, modes, hooks, freed graphs, versions, memory."""

import gc
import weakref

import numpy as np
import pytest
import torch

import shapeflow as sf


def test_grads_accumulate_into_leaves():
    x = sf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])


def test_shared_input_used_twice():
    x = sf.tensor([1.0, -2.0], requires_grad=True)
    y = x * x + x.exp() * x
    y.sum().backward()
    xt = torch.tensor([1.0, -2.0], requires_grad=True)
    (xt * xt + xt.exp() * xt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_grads_of_two_leaves_do_not_alias():
    a = sf.ones(3, requires_grad=True)
    b = sf.ones(3, requires_grad=True)
    (a + b).sum().backward()
    a.grad.mul_(5)
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 1.0, 1.0])


def test_broadcast_grad_summed_to_input_shape():
    a = sf.randn(4, 3, requires_grad=True)
    b = sf.randn(3, requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), a.detach().numpy().sum(0), rtol=1e-5)


def test_long_chain_is_iterative():
    x = sf.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    assert abs(x.grad.item() - 1.0001 ** 10_000) < 1e-2


def test_no_grad_records_nothing():
    x = sf.ones(2, requires_grad=True)
    with sf.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert sf.is_grad_enabled()
    with sf.no_grad(), sf.enable_grad():
        z = x * 2
    assert z.requires_grad
    with sf.inference_mode():
        assert not sf.is_grad_enabled()

    @sf.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad


def test_backward_twice_raises_graph_error():
    x = sf.ones(3, requires_grad=True)
    y = (x.exp()).sum()
    y.backward()
    with pytest.raises(sf.GraphError) as e:
        y.backward()
    assert "retain_graph=True" in str(e.value) and e.value.op == "exp"


def test_retain_graph_allows_second_backward():
    x = sf.ones(3, requires_grad=True)
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.e * np.ones(3), rtol=1e-6)


def test_non_scalar_backward_needs_gradient():
    x = sf.ones(2, 3, requires_grad=True)
    y = x * 2
    with pytest.raises(sf.GraphError) as e:
        y.backward()
    assert "scalar" in str(e.value) and "[2, 3]" in str(e.value)
    y.backward(sf.ones(2, 3))
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones((2, 3)))


@pytest.mark.parametrize("make,reason", [
    (lambda x: (x * 2).detach().sum(), "detach"),
    (lambda x: sf.tensor(3.0) * 2, "none of the tensors"),
])
def test_backward_on_tensor_without_grad_explains(make, reason):
    x = sf.ones(2, requires_grad=True)
    y = make(x)
    with pytest.raises(sf.GraphError) as e:
        y.backward()
    assert reason in str(e.value)


def test_backward_after_no_grad_explains():
    x = sf.ones(2, requires_grad=True)
    with sf.no_grad():
        y = (x * 2).sum()
    with pytest.raises(sf.GraphError) as e:
        y.backward()
    assert "no_grad" in str(e.value)


def test_inplace_on_saved_tensor_raises():
    x = sf.ones(3, requires_grad=True)
    a = x * 1
    b = a.sin()
    a.add_(1)
    with pytest.raises(sf.GraphError) as e:
        b.sum().backward()
    msg = str(e.value)
    assert "sin" in msg and "version 0" in msg and "version 1" in msg and "add_" in msg


def test_inplace_on_leaf_requiring_grad_raises():
    x = sf.ones(3, requires_grad=True)
    with pytest.raises(sf.GraphError):
        x.add_(1)
    with sf.no_grad():
        x.add_(1)  # allowed: this is how optimizers update parameters
    assert x.version == 1


def test_inplace_ops_are_differentiable():
    x = sf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.mul_(x)
    y += 1
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_hooks_on_leaf_and_nonleaf():
    x = sf.ones(2, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    y = x * 3
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [30.0, 30.0])
    np.testing.assert_allclose(seen[0], [30.0, 30.0])


def test_retain_grad():
    x = sf.ones(2, requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [6.0, 6.0])


def test_autograd_grad_does_not_touch_dot_grad():
    x = sf.tensor([1.0, 2.0], requires_grad=True)
    y = (x ** 3).sum()
    (g,) = sf.autograd.grad(y, x)
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])
    assert x.grad is None


def test_autograd_grad_unused_input():
    x = sf.ones(2, requires_grad=True)
    z = sf.ones(2, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(sf.GraphError):
        sf.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = sf.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None


def test_grad_of_grad_matmul_vs_torch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    A, B = sf.tensor(a, requires_grad=True), sf.tensor(b, requires_grad=True)
    At, Bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (ga,) = sf.autograd.grad(((A @ B) ** 2).sum(), A, create_graph=True)
    (gat,) = torch.autograd.grad(((At @ Bt) ** 2).sum(), At, create_graph=True)
    np.testing.assert_allclose(ga.detach().numpy(), gat.detach().numpy(), rtol=1e-10)
    (gb,) = sf.autograd.grad(ga.sum(), B)
    (gbt,) = torch.autograd.grad(gat.sum(), Bt)
    np.testing.assert_allclose(gb.numpy(), gbt.numpy(), rtol=1e-10)


def test_saved_arrays_released_after_backward():
    x = sf.randn(100, requires_grad=True)
    h = x.exp()
    ref = weakref.ref(h._data)
    y = h.tanh().sum()
    del h
    gc.disable()
    try:
        assert ref() is not None  # kept alive by the graph for tanh / exp backward
        y.backward()
        assert ref() is None  # freed right after backward, without the cycle collector
    finally:
        gc.enable()


def test_graph_without_backward_has_no_cycles():
    x = sf.randn(50, requires_grad=True)
    h = x.exp()
    ref = weakref.ref(h._data)
    y = h.sigmoid().sum()
    del h, y
    gc.disable()
    try:
        assert ref() is None  # dropped as soon as the loss is, by reference counting alone
    finally:
        gc.enable()


def test_gradcheck_catches_a_wrong_backward():
    from shapeflow.ops.base import Op, apply

    class BadSquare(Op):
        name = "bad_square"

        def infer(self, x):
            return x.shape, x.dtype

        def saved(self, x, out):
            from shapeflow.ops.base import X0
            return (X0,)

        def forward(self, x):
            return x * x

        def backward(self, g):
            (x,) = self.saved_tensors
            return (g * x,)  # wrong: should be 2 * x

    x = sf.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(sf.GraphError):
        sf.autograd.gradcheck(lambda t: apply(BadSquare(), t), [x])
    assert sf.autograd.gradcheck(lambda t: t * t, [x])


def test_views_of_one_tensor_add_their_grads_in_place_as_torch():
    """split/narrow/select/getitem of a non-leaf: grads add into one buffer, as PyTorch's."""
    import numpy as np
    import torch

    a = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    x, tx = sf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out = []
    for t in (x, tx):
        y = t * 1.5
        p, q, r = y.split(2, dim=1)
        loss = (p * 2).sum() + (q * q).sum() + r.sum() + y[1].sum() + y.narrow(0, 2, 2).sum()
        loss = loss + (y * y).sum()  # a dense grad arriving before or after the slices
        loss.backward()
        out.append(t.grad.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-6)


def test_slice_grads_on_meta_have_the_input_shape():
    x = sf.empty(4, 6, device="meta", requires_grad=True)
    p, q = (x * 2).split(3, dim=1)
    (p.sum() + q.sum()).backward()
    assert x.grad.shape == (4, 6) and x.grad.device.type == "meta"


def _weighted_product_op(convention: str):
    """x * w as a user-defined op, with saved() written in the given calling convention."""
    from shapeflow.ops.base import X0, X1, Op

    class Product(Op):
        name = "product"

        def infer(self, x, w):
            return x.shape, x.dtype

        def forward(self, x, w):
            return x * w

        def backward(self, g):
            x, w = self.saved_tensors
            return g * w, g * x

    if convention == "positional":
        Product.saved = lambda self, x, w, out: (X0, X1)
    elif convention == "keyword":
        def saved(self, *inputs, out):
            assert out.shape == inputs[0].shape
            return (X0, X1)
        Product.saved = saved
    return Product


@pytest.mark.parametrize("convention", ["positional", "keyword"])
def test_user_ops_record_in_either_saved_convention(convention):
    from shapeflow.ops.base import apply, held

    op_class = _weighted_product_op(convention)  # saved() set after the class was made
    x = sf.tensor([1.0, 2.0], requires_grad=True)
    w = sf.tensor([3.0, 5.0], requires_grad=True)
    out = apply(op_class(), x, w)
    assert [e.index for e, _ in held(out.grad_fn)] == [0, 1]
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 5.0])
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0])


def test_casts_to_integers_end_the_graph_and_float_casts_carry_it():
    x = sf.tensor([1.5, 2.5], requires_grad=True)
    as_int = x.to(sf.int64)
    assert not as_int.requires_grad and as_int.grad_fn is None
    as_double = x.to(sf.float64)
    assert as_double.requires_grad
    as_double.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])
