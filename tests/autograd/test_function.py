"""shapeflow.autograd.Function (ctx API, memory accounting) and autograd.functional
(jacobian, hessian, vjp, jvp) vs torch.autograd."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TAF

import shapeflow as sf
import shapeflow.autograd.functional as AF
from shapeflow.autograd import Function

rng = np.random.default_rng(0)


def both(cls_name):
    """The same custom function written for shapeflow and for PyTorch."""
    out = {}
    for lib, base in (("sf", Function), ("torch", torch.autograd.Function)):

        class ScaledExp(base):
            @staticmethod
            def forward(ctx, x, k):
                y = x.exp() * k
                ctx.save_for_backward(y)
                ctx.k = k
                return y

            @staticmethod
            def backward(ctx, g):
                (y,) = ctx.saved_tensors
                assert ctx.needs_input_grad == (True, False)
                return g * y, None

        class SplitMax(base):  # two float outputs and an index output
            @staticmethod
            def forward(ctx, x, w):
                v, i = x.max(dim=1)
                lo = x * w
                ctx.mark_non_differentiable(i)
                ctx.save_for_backward(x, w, i)
                return v, lo, i

            @staticmethod
            def backward(ctx, gv, glo, gi):
                x, w, i = ctx.saved_tensors
                gx = glo * w
                onehot = (torch if isinstance(x, torch.Tensor) else sf).zeros_like(x)
                onehot = onehot.scatter(1, i.unsqueeze(1), 1.0)
                gx = gx + onehot * gv.unsqueeze(1)
                return gx, glo * x

        out[lib] = {"ScaledExp": ScaledExp, "SplitMax": SplitMax}[cls_name]
    return out


def test_custom_function_matches_torch():
    f = both("ScaledExp")
    x = rng.standard_normal((2, 3))
    a = sf.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    (f["sf"].apply(a, 2.0) ** 2).sum().backward()
    (f["torch"].apply(t, 2.0) ** 2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_multiple_outputs_and_non_differentiable():
    f = both("SplitMax")
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    a, b = sf.tensor(x, requires_grad=True), sf.tensor(w, requires_grad=True)
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    v, lo, i = f["sf"].apply(a, b)
    tv, tlo, ti = f["torch"].apply(ta, tb)
    assert not i.requires_grad and v.requires_grad and lo.requires_grad
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    (v.sum() * 3 + (lo ** 2).sum()).backward()
    (tv.sum() * 3 + (tlo ** 2).sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)
    a.grad = None
    v2, _, _ = f["sf"].apply(a, b)
    v2.sum().backward()  # only one output used: the other gets zeros
    assert a.grad is not None


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_saved_input_changed_in_place_is_a_graph_error():
    x = sf.randn(3, requires_grad=True)
    y = x * 1
    z = Square.apply(y)
    y.add_(1)
    with pytest.raises(sf.GraphError, match="modified in place"):
        z.sum().backward()


def test_second_backward_without_retain_graph_raises():
    x = sf.randn(3, requires_grad=True)
    z = Square.apply(x).sum()
    z.backward()
    with pytest.raises(sf.GraphError, match="second time"):
        z.backward()


def test_grad_of_grad_through_a_custom_function():
    x = sf.tensor([1.0, 2.0], requires_grad=True)
    (g,) = sf.autograd.grad(Square.apply(x).sum(), [x], create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_wrong_number_of_gradients_is_a_graph_error():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(sf.GraphError, match="expected 2, got 1"):
        Bad.apply(sf.ones(2, requires_grad=True), sf.ones(2)).sum().backward()


def test_no_record_without_grad_and_setup_context_style():
    class Cube(Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = sf.tensor([2.0], requires_grad=True)
    Cube.apply(x).sum().backward()
    assert x.grad.item() == 12.0
    out = Cube.apply(sf.tensor([2.0]))
    assert out.grad_fn is None and not out.requires_grad


def test_custom_function_saved_tensors_count_in_the_memory_report():
    from shapeflow.inspect.memory import report

    class Keep(sf.nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.lin, self.fn = sf.nn.Linear(64, 64), fn

        def forward(self, x):
            return self.fn(self.lin(x))

    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with_save = report(Keep(Square.apply), sf.zeros(32, 64))
    without = report(Keep(Identity.apply), sf.zeros(32, 64))
    assert with_save.activations - without.activations == 32 * 64 * 4  # Square's saved x
    assert with_save.by_kind["other"] >= 32 * 64 * 4


# ---- autograd.functional ----------------------------------------------------------------------
def f_two(a, b):
    return (a * b).sin(), a.exp().sum()


def torch_f_two(a, b):
    return (a * b).sin(), a.exp().sum()


def test_jacobian_matches_torch_for_tuples_and_single():
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    ours = AF.jacobian(f_two, (sf.tensor(a), sf.tensor(b)))
    theirs = TAF.jacobian(torch_f_two, (torch.tensor(a), torch.tensor(b)))
    for o_row, t_row in zip(ours, theirs):
        for o, t in zip(o_row, t_row):
            assert tuple(o.shape) == tuple(t.shape)
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12)
    x = rng.standard_normal((2, 3))
    o = AF.jacobian(lambda t: t.tanh() @ t.T, sf.tensor(x))
    t = TAF.jacobian(lambda t: t.tanh() @ t.T, torch.tensor(x))
    assert tuple(o.shape) == tuple(t.shape) == (2, 2, 2, 3)
    np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12)


def test_hessian_matches_torch():
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    f = lambda a, b: (a ** 2 * b.sin()).sum() + (a * b).exp().sum()  # noqa: E731
    ours = AF.hessian(f, (sf.tensor(x), sf.tensor(y)))
    theirs = TAF.hessian(f, (torch.tensor(x), torch.tensor(y)))
    for o_row, t_row in zip(ours, theirs):
        for o, t in zip(o_row, t_row):
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-10)
    single = AF.hessian(lambda a: (a ** 3).sum(), sf.tensor(x))
    np.testing.assert_allclose(single.numpy(), np.diag(6 * x), rtol=1e-12)


def test_vjp_and_jvp_match_torch():
    x, v = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    f = lambda t: t.sin() * t.sum()  # noqa: E731
    out, g = AF.vjp(f, sf.tensor(x), sf.tensor(v))
    tout, tg = TAF.vjp(f, torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12)
    out, j = AF.jvp(f, sf.tensor(x), sf.tensor(v))
    tout, tj = TAF.jvp(f, torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(j.numpy(), tj.numpy(), rtol=1e-12)
    _, g = AF.vjp(lambda t: (t ** 2).sum(), sf.tensor(x))  # v omitted: a scalar output
    np.testing.assert_allclose(g.numpy(), 2 * x)


def test_functional_strict_create_graph_and_errors():
    x = sf.tensor([1.0, 2.0], dtype=sf.float64)
    j = AF.jacobian(lambda a, b: a * 2, (x, sf.ones(2, dtype=sf.float64)))
    np.testing.assert_array_equal(j[1].numpy(), np.zeros((2, 2)))
    with pytest.raises(sf.GraphError, match="independent of input 1"):
        AF.jacobian(lambda a, b: a * 2, (x, sf.ones(2)), strict=True)
    with pytest.raises(sf.ShapeError, match="v may only be omitted"):
        AF.vjp(lambda a: a * 2, x)
    w = sf.tensor([3.0], dtype=sf.float64, requires_grad=True)
    (h,) = AF.vjp(lambda a: (a ** 3).sum(), w, create_graph=True)[1:]
    h.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [18.0])


def test_grad_does_not_touch_other_leaves_grads():
    x, s = sf.ones(3, requires_grad=True), sf.ones(3, requires_grad=True)
    (g,) = sf.autograd.grad((x * s * s).sum(), [s], create_graph=True)
    assert x.grad is None
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
