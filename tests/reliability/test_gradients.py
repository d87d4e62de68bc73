"""Gradients that went missing or doubled, and grad modes around generators (issue 31).

Every number is compared with PyTorch in float64, and with central differences where the
function is smooth around the input.
"""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.autograd import gradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(31)


def _grads(lib, fn, arrays, weight):
    """d sum(fn(*arrays) * weight) / d arrays, in lib (sf or torch), as NumPy arrays."""
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ts)
    (out * lib.tensor(weight)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


def _compare(sf_fn, torch_fn, arrays, atol=1e-8):
    out_t = torch_fn(*[torch.tensor(a) for a in arrays])
    weight = RNG.standard_normal(tuple(out_t.shape))
    ref, ref_grads = _grads(torch, torch_fn, arrays, weight)
    got, got_grads = _grads(sf, sf_fn, arrays, weight)
    np.testing.assert_allclose(got, ref, atol=atol)
    for g, r in zip(got_grads, ref_grads):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, r, atol=atol)


# ---- masked_fill with a tensor value ----------------------------------------------------

MASK = np.array([[True, False, True, True], [True, False, False, False]])


@pytest.mark.parametrize("how", ["function", "method", "inplace", "broadcast_mask",
                                 "grow_input", "value_float32"])
def test_masked_fill_tensor_value_gets_its_gradient(how):
    x0, v0, mask = RNG.standard_normal((2, 4)), np.array(0.7), MASK
    if how == "broadcast_mask":
        mask = MASK[:1]
    if how == "grow_input":
        x0 = x0[0]
    if how == "value_float32":
        v0 = v0.astype(np.float32)

    def fill(lib):
        def f(x, v):
            m = lib.tensor(mask)
            if how == "method":
                return x.masked_fill(m, v)
            if how == "inplace":
                return (x * 1.0).masked_fill_(m, v)
            return lib.masked_fill(x, m, v)
        return f

    _compare(fill(sf), fill(torch), [x0, v0])


def test_masked_fill_tensor_value_gradient_matches_finite_differences():
    x = sf.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    v = sf.tensor(np.array(-1.5), requires_grad=True)
    mask = sf.tensor(RNG.random((3, 4)) > 0.5)
    assert gradcheck(lambda a, b: (a * a).masked_fill(mask, b * b), (x, v))


def test_masked_fill_value_must_be_0d_as_in_pytorch():
    with pytest.raises(RuntimeError):
        torch.zeros(3).masked_fill(torch.tensor([True, False, True]), torch.tensor([2.0]))
    with pytest.raises(sf.ShapeError, match="masked_fill.*0-d"):
        sf.zeros(3).masked_fill(sf.tensor([True, False, True]), sf.tensor([2.0]))


# ---- pinv: finite where singular values repeat; hermitian -------------------------------

def _orthogonal(n):
    q, _ = np.linalg.qr(RNG.standard_normal((n, n)))
    return q


def _low_rank(m, n, r):
    return RNG.standard_normal((m, r)) @ RNG.standard_normal((r, n))


PINV_CASES = {
    "identity": np.eye(3),
    "identity_tall": np.eye(4, 3),
    "identity_wide": np.eye(2, 4),
    "orthogonal": _orthogonal(4),
    "orthogonal_batch": np.stack([_orthogonal(3), 2 * _orthogonal(3)]),
    "scaled_identity_batch": np.stack([np.eye(3) * 2.0, np.diag([1.0, 1.0, 3.0])]),
    "rank_deficient_square": _low_rank(4, 4, 2),
    "rank_deficient_tall": _low_rank(5, 3, 2),
    "rank_deficient_wide": _low_rank(2, 5, 1),
    "random_tall_batch": RNG.standard_normal((2, 5, 3)),
    "random_wide": RNG.standard_normal((3, 4)),
}


REPEATED = ["identity", "identity_tall", "identity_wide", "orthogonal", "orthogonal_batch",
            "scaled_identity_batch"]


@pytest.mark.parametrize("name", REPEATED)
def test_pinv_gradient_where_singular_values_repeat_matches_pytorch(name):
    _compare(sf.linalg.pinv, torch.linalg.pinv, [PINV_CASES[name]], atol=1e-7)


def test_pinv_gradient_matches_pytorch_at_every_rank_and_shape():
    for a in PINV_CASES.values():  # rank-deficient: constant rank nearby, as PyTorch's
        _compare(sf.linalg.pinv, torch.linalg.pinv, [a], atol=1e-7)


@pytest.mark.parametrize("name", ["identity", "identity_wide", "orthogonal",
                                  "scaled_identity_batch"])
def test_pinv_gradient_matches_finite_differences(name):
    # full rank: pinv is smooth here (at lower rank it is not continuous across ranks)
    a = sf.tensor(PINV_CASES[name], requires_grad=True)
    assert gradcheck(sf.linalg.pinv, (a,))


def test_pinv_hermitian_reads_the_lower_triangle_as_pytorch():
    b, c = RNG.standard_normal((2, 4, 4)), RNG.standard_normal((4, 2))
    cases = [(b + b.mT)[0], b + b.mT, c @ c.T, b[0]]  # symmetric, indefinite, rank 2, neither

    def run(lib):
        return lambda x: lib.linalg.pinv(x, hermitian=True)

    for a in cases:
        _compare(run(sf), run(torch), [a], atol=1e-7)


# ---- qr of wide matrices ----------------------------------------------------------------

def _qr_loss(lib, which, mode="reduced"):
    def f(a):
        q, r = lib.linalg.qr(a, mode=mode)
        if which == "q":
            return q
        if which == "r":
            return r
        return lib.cat([q.flatten(-2), r.flatten(-2)], -1)
    return f


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 5), (1, 4), (2, 2, 3)])
@pytest.mark.parametrize("which", ["both", "q", "r"])
def test_qr_gradient_of_wide_matrices_matches_pytorch(shape, which):
    a = RNG.standard_normal(shape)
    _compare(_qr_loss(sf, which), _qr_loss(torch, which), [a], atol=1e-8)
    t = sf.tensor(a, requires_grad=True)
    assert gradcheck(_qr_loss(sf, which), (t,))


def test_qr_gradient_complete_mode_wide_matches_pytorch():
    # with m < n, 'complete' gives the same Q and R as 'reduced': PyTorch differentiates it
    a = RNG.standard_normal((2, 3, 4))
    _compare(_qr_loss(sf, "both", "complete"), _qr_loss(torch, "both", "complete"), [a])


# ---- retain_grad ------------------------------------------------------------------------

@pytest.mark.parametrize("calls", [2, 3])
def test_retain_grad_twice_keeps_one_gradient(calls):
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        for _ in range(calls):
            y.retain_grad()
        (y * 3).sum().backward(retain_graph=True)
        first = y.grad.numpy().copy()
        (y * 3).sum().backward()  # a second backward accumulates, once
        return first, y.grad.numpy()

    for got, ref in zip(run(sf), run(torch)):
        np.testing.assert_array_equal(got, ref)


# ---- grad modes as decorators of generator functions ------------------------------------

def _modes(lib, name):
    """The decorator `name` in lib (sf or torch) and whether it expects grad on inside."""
    return {"no_grad": lib.no_grad(), "no_grad_bare": lib.no_grad,
            "enable_grad": lib.enable_grad(), "set_grad_enabled_false": lib.set_grad_enabled(False),
            "set_grad_enabled_true": lib.set_grad_enabled(True),
            "inference_mode": lib.inference_mode(),
            "inference_mode_off": lib.inference_mode(False)}[name]


def _trace_generator(lib, name, outer_grad):
    """What grad mode the generator body and the caller between resumes see, step by step."""
    trace = []
    x = lib.ones(2, requires_grad=True)
    decorate = _modes(lib, name)

    @decorate
    def gen(n):
        try:
            for i in range(n):
                got = yield ("body", i, lib.is_grad_enabled(), (x * 2).requires_grad)
                trace.append(("sent", got, lib.is_grad_enabled()))
                try:
                    yield ("again", i, lib.is_grad_enabled())
                except KeyError:
                    trace.append(("caught", lib.is_grad_enabled()))
        finally:
            trace.append(("finally", lib.is_grad_enabled()))
        return "done"

    with lib.set_grad_enabled(outer_grad):
        trace.append(("decorated", lib.is_grad_enabled()))
        g = gen(3)
        trace.append(("created", lib.is_grad_enabled()))
        trace.append(next(g))
        trace.append(("caller", lib.is_grad_enabled(), (x * 2).requires_grad))
        trace.append(g.send("hello"))
        trace.append(("caller", lib.is_grad_enabled()))
        trace.append(g.throw(KeyError("k")))
        trace.append(("caller", lib.is_grad_enabled()))
        g.close()
        trace.append(("closed", lib.is_grad_enabled()))
        h = gen(1)
        trace.append(list(h))
        trace.append(("exhausted", lib.is_grad_enabled()))
    trace.append(("outside", lib.is_grad_enabled()))
    return trace


@pytest.mark.parametrize("name", ["no_grad", "no_grad_bare", "enable_grad",
                                  "set_grad_enabled_false", "set_grad_enabled_true",
                                  "inference_mode", "inference_mode_off"])
def test_grad_mode_decorators_cover_generator_bodies_as_pytorch(name):
    for outer_grad in (True, False):
        assert _trace_generator(sf, name, outer_grad) == \
            _trace_generator(torch, name, outer_grad), f"called with grad mode {outer_grad}"


@pytest.mark.parametrize("name", ["no_grad_bare", "set_grad_enabled_false"])
def test_grad_mode_decorators_on_functions_restore_the_mode(name):
    def trace(lib):
        out = []
        for outer in (True, False):
            with lib.set_grad_enabled(outer):
                @_modes(lib, name)
                def f(a):
                    return lib.is_grad_enabled(), a

                out.append(lib.is_grad_enabled())  # decorating leaves the mode as it was
                out.append(f(1))
                out.append(lib.is_grad_enabled())
        return out

    assert trace(sf) == trace(torch)
