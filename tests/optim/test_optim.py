"""Optimizers against torch.optim: N steps with the same grads, state dicts, declared state."""

import copy

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import optim

N_STEPS = 10
SHAPES = [(8, 4), (8,), (3, 8), (3,), (2, 2)]  # the last one never gets a grad
rng = np.random.default_rng(0)
INIT = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in SHAPES]
X = rng.standard_normal((16, 4)).astype(np.float32)
Y = rng.standard_normal((16, 3)).astype(np.float32)
# the (2, 2) parameter's missing grad is on purpose: step's warning about it is expected
pytestmark = pytest.mark.filterwarnings("ignore:.*parameters have no grad:UserWarning")


def loss_grads(arrays):
    """Grads of a fixed MLP loss at the given parameter values (torch as the calculator)."""
    ps = [torch.tensor(a, requires_grad=True) for a in arrays[:4]]
    w1, b1, w2, b2 = ps
    out = torch.tanh(torch.tensor(X) @ w1.T + b1) @ w2.T + b2
    ((out - torch.tensor(Y)) ** 2).mean().backward()
    return [p.grad.numpy() for p in ps]


def make_params():
    sf_ps = [sf.tensor(a.copy(), requires_grad=True) for a in INIT]
    t_ps = [torch.tensor(a.copy(), requires_grad=True) for a in INIT]
    return sf_ps, t_ps


def set_grads(sf_ps, t_ps):
    for p, g in zip(sf_ps, loss_grads([p._data for p in sf_ps])):
        p.grad = sf.tensor(g)
    for p, g in zip(t_ps, loss_grads([p.detach().numpy() for p in t_ps])):
        p.grad = torch.tensor(g)


def groups(ps, group_opts):
    if group_opts is None:
        return ps
    return [{"params": ps[:2], **group_opts[0]}, {"params": ps[2:], **group_opts[1]}]


def assert_params_close(sf_ps, t_ps, step, rtol=1e-5, atol=1e-7):
    for i, (a, b) in enumerate(zip(sf_ps, t_ps)):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"param {i} after step {step}")


CONFIGS = [
    ("SGD", dict(lr=0.1), None),
    ("SGD", dict(lr=0.1, momentum=0.9), None),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), None),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5), None),
    ("SGD", dict(lr=0.1, weight_decay=0.05), None),
    ("SGD", dict(lr=0.05, momentum=0.8, weight_decay=0.01, nesterov=True), None),
    ("SGD", dict(lr=0.1, momentum=0.5, maximize=True), None),
    ("SGD", dict(lr=0.1, momentum=0.9), ({"lr": 0.02}, {"momentum": 0.5, "weight_decay": 0.1})),
    ("Adam", dict(lr=1e-2), None),
    ("Adam", dict(lr=1e-2, weight_decay=0.1), None),
    ("Adam", dict(lr=1e-2, amsgrad=True), None),
    ("Adam", dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, maximize=True), None),
    ("Adam", dict(lr=1e-2), ({"lr": 0.05}, {"betas": (0.5, 0.9), "weight_decay": 0.01})),
    ("AdamW", dict(lr=1e-2), None),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True), None),
    ("AdamW", dict(lr=1e-2), ({"lr": 0.03, "weight_decay": 0.5}, {"lr": 0.001})),
]


@pytest.mark.parametrize("name,kw,group_opts", CONFIGS)
def test_matches_torch_step_by_step(name, kw, group_opts):
    sf_ps, t_ps = make_params()
    sf_opt = getattr(optim, name)(groups(sf_ps, group_opts), **kw)
    t_opt = getattr(torch.optim, name)(groups(t_ps, group_opts), **kw)
    for step in range(N_STEPS):
        set_grads(sf_ps, t_ps)
        sf_opt.step()
        t_opt.step()
        assert_params_close(sf_ps, t_ps, step)
    assert np.array_equal(sf_ps[-1].data, INIT[-1])  # no grad: untouched
    assert sf_ps[-1] not in sf_opt.state
    # per-parameter step counts and buffers as PyTorch keeps them
    for p, tp in zip(sf_ps[:4], t_ps[:4]):
        s, ts = sf_opt.state[p], t_opt.state[tp]
        assert set(s) == set(ts)
        for key in s:
            np.testing.assert_allclose(np.asarray(s[key].data), ts[key].numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=key)


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, maximize=True)),
    ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-2)),
])
def test_large_parameters_chunked_path(name, kw):
    """Arrays above the chunk size take the cache-blocked update: same values as torch."""
    a = rng.standard_normal((300, 301)).astype(np.float32)
    p, tp = sf.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)
    sf_opt, t_opt = getattr(optim, name)([p], **kw), getattr(torch.optim, name)([tp], **kw)
    for step in range(4):
        g = rng.standard_normal(a.shape).astype(np.float32)
        p.grad, tp.grad = sf.tensor(g), torch.tensor(g)
        sf_opt.step()
        t_opt.step()
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"step {step}")


def test_versions_bumped_once_per_step_and_grads_none_skipped():
    sf_ps, _ = make_params()
    opt = optim.Adam(sf_ps, lr=0.1)
    for p, g in zip(sf_ps, loss_grads([p._data for p in sf_ps])):
        p.grad = sf.tensor(g)
    v = [p.version for p in sf_ps]
    opt.step()
    assert [p.version for p in sf_ps] == [x + 1 for x in v[:4]] + [v[4]]
    arrays = [p._data for p in sf_ps]
    opt.step()
    assert all(a is p._data for a, p in zip(arrays, sf_ps))  # updated in place


def test_grad_of_tensor_saved_for_backward_sees_update():
    p = sf.tensor([1.0, 2.0], requires_grad=True)
    y = (p * p).sum()
    p.grad = sf.tensor([1.0, 1.0])
    optim.SGD([p], lr=0.1).step()
    with pytest.raises(sf.GraphError, match="modified in place"):
        y.backward()


def test_zero_grad_closure_and_errors():
    p = sf.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5)
    p.grad = sf.tensor([1.0, 1.0])
    opt.zero_grad(set_to_none=False)
    assert np.array_equal(p.grad.numpy(), [0, 0])
    opt.zero_grad()
    assert p.grad is None

    def closure():
        assert sf.is_grad_enabled()
        p.grad = sf.tensor([2.0, 2.0])
        return 3.0

    with sf.no_grad():
        assert opt.step(closure) == 3.0
    np.testing.assert_allclose(p.data, [0.0, 1.0])
    with pytest.raises(TypeError):
        optim.SGD(p)
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([])
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], momentum=0, nesterov=True)
    with pytest.raises(ValueError):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="more than one"):
        optim.SGD([{"params": [p]}, {"params": [p]}])
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2])
    q = sf.tensor([0.0], requires_grad=True)
    opt.add_param_group({"params": q, "lr": 0.1})
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["momentum"] == 0


def test_declared_state_and_bytes():
    sf_ps, _ = make_params()
    nbytes = sum(p.nbytes for p in sf_ps)
    plain = optim.SGD(sf_ps, lr=0.1)
    assert plain.state_per_param(plain.param_groups[0]) == []
    assert plain.total_state_bytes() == 0
    mom = optim.SGD(sf_ps, lr=0.1, momentum=0.9)
    assert mom.state_per_param(mom.param_groups[0]) == ["momentum_buffer"]
    assert mom.state_bytes(sf_ps[0]) == 8 * 4 * 4
    adam = optim.Adam(sf_ps)
    assert adam.state_per_param(adam.param_groups[0]) == ["exp_avg", "exp_avg_sq"]
    assert adam.total_state_bytes() == 2 * nbytes
    ams = optim.AdamW(sf_ps, amsgrad=True)
    assert ams.state_per_param(ams.param_groups[0]) == ["exp_avg", "exp_avg_sq",
                                                        "max_exp_avg_sq"]
    assert ams.total_state_bytes() == 3 * nbytes
    # the declaration matches what a step actually allocates (params with grads)
    for opt in (mom, adam, ams):
        for p, g in zip(sf_ps, loss_grads([p._data for p in sf_ps])):
            p.grad = sf.tensor(g)
        opt.step()
        for p in sf_ps[:4]:
            kept = sum(v.nbytes for k, v in opt.state[p].items() if k != "step")
            assert kept == opt.state_bytes(p)
    with pytest.raises(ValueError):
        adam.state_bytes(sf.zeros(3))


def test_meta_parameters():
    p = sf.nn.Parameter(sf.empty(1000, 1000, device="meta"))
    opt = optim.AdamW([p])
    assert opt.state_bytes(p) == 2 * 1000 * 1000 * 4
    p.grad = sf.empty(1000, 1000, device="meta")
    with pytest.raises(sf.DeviceError, match="meta"):
        opt.step()


# ---- state dict -----------------------------------------------------------------------------
def _run(opt, ps, steps):
    for _ in range(steps):
        for p, g in zip(ps, loss_grads([p._data for p in ps])):
            p.grad = sf.tensor(g)
        opt.step()


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                     ("Adam", dict(lr=1e-2, amsgrad=True)),
                                     ("AdamW", dict(lr=1e-2))])
def test_state_dict_round_trip_continues_identically(name, kw):
    ps, _ = make_params()
    opt = getattr(optim, name)(groups(ps, ({"lr": 0.02}, {})), **kw)
    _run(opt, ps, 4)
    sd = copy.deepcopy(opt.state_dict())
    assert set(sd) == {"state", "param_groups"}
    assert sorted(sd["state"]) == [0, 1, 2, 3]  # integer indices; param 4 has no state
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2, 3, 4]]
    assert all(isinstance(v, sf.Tensor) for s in sd["state"].values() for v in s.values())
    ps2 = [sf.tensor(p._data.copy(), requires_grad=True) for p in ps]
    opt2 = getattr(optim, name)(groups(ps2, ({"lr": 0.5}, {"lr": 0.5})), **kw)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.02 and opt2.param_groups[0]["params"][0] is ps2[0]
    _run(opt, ps, 6)
    _run(opt2, ps2, 6)
    for a, b in zip(ps, ps2):
        np.testing.assert_array_equal(a.data, b.data)
    # the loaded state is a copy: the source dict is not changed by the steps
    assert sd["state"][0] is not opt2.state[ps2[0]]


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                     ("Adam", dict(lr=1e-2, weight_decay=0.01))])
def test_state_dict_interoperates_with_torch(name, kw):
    sf_ps, t_ps = make_params()
    sf_opt = getattr(optim, name)(sf_ps, **kw)
    _run(sf_opt, sf_ps, 3)
    # shapeflow -> torch
    sd = sf_opt.state_dict()
    t_sd = {"state": {k: {n: torch.tensor(np.array(v.data)) for n, v in s.items()}
                      for k, s in sd["state"].items()},
            "param_groups": copy.deepcopy(sd["param_groups"])}
    for p, tp in zip(sf_ps, t_ps):
        tp.data = torch.tensor(p._data.copy())
    t_opt = getattr(torch.optim, name)(t_ps, **kw)
    t_opt.load_state_dict(t_sd)
    # torch -> shapeflow
    sf_ps2 = [sf.tensor(p._data.copy(), requires_grad=True) for p in sf_ps]
    sf_opt2 = getattr(optim, name)(sf_ps2, **kw)
    sf_opt2.load_state_dict(t_opt.state_dict())
    for step in range(5):
        set_grads(sf_ps, t_ps)
        for p, g in zip(sf_ps2, loss_grads([p._data for p in sf_ps2])):
            p.grad = sf.tensor(g)
        sf_opt.step()
        t_opt.step()
        sf_opt2.step()
        assert_params_close(sf_ps, t_ps, step)
        assert_params_close(sf_ps2, t_ps, step)


def _snapshot(opt):
    return ([{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups],
            {id(p): {k: np.array(v.data, copy=True) for k, v in s.items()}
             for p, s in opt.state.items()})


def _same(a, b):
    assert a[0] == b[0]
    assert a[1].keys() == b[1].keys()
    for k in a[1]:
        for n in a[1][k]:
            np.testing.assert_array_equal(a[1][k][n], b[1][k][n])


def test_load_state_dict_errors_leave_optimizer_unchanged():
    ps, _ = make_params()
    opt = optim.Adam(groups(ps, ({"lr": 0.1}, {})), lr=1e-2)
    _run(opt, ps, 2)
    good = copy.deepcopy(opt.state_dict())
    before = _snapshot(opt)
    bad = copy.deepcopy(good)
    bad["param_groups"] = bad["param_groups"][:1]
    with pytest.raises(sf.ShapeError, match="parameter groups"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(good)
    bad["param_groups"][1]["params"] = [2, 3]
    with pytest.raises(sf.ShapeError, match="doesn't match the size"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(good)
    bad["param_groups"][0]["lr"] = 123.0
    bad["state"][1]["exp_avg"] = sf.zeros(5)
    bad["state"][2]["exp_avg_sq"] = sf.zeros(8, 3)
    with pytest.raises(sf.ShapeError) as e:
        opt.load_state_dict(bad)
    assert "state[1]['exp_avg']" in str(e.value) and "state[2]['exp_avg_sq']" in str(e.value)
    assert "[5]" in str(e.value) and "[8, 3]" in str(e.value)
    _same(before, _snapshot(opt))
    assert opt.param_groups[0]["lr"] == 0.1


# ---- end to end: shapeflow's autograd + nn + optim against torch ---------------------------
def test_training_an_mlp_matches_torch():
    nn = sf.nn
    sf_m = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    t_m = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    t_m.load_state_dict({k: torch.tensor(v.numpy()) for k, v in sf_m.state_dict().items()})
    sf_opt = optim.AdamW(sf_m.parameters(), lr=1e-2)
    t_opt = torch.optim.AdamW(t_m.parameters(), lr=1e-2)
    x, y = sf.tensor(X), sf.tensor(rng.integers(0, 3, 16))
    tx, ty = torch.tensor(X), torch.tensor(y.numpy())
    for step in range(N_STEPS):
        sf_opt.zero_grad()
        t_opt.zero_grad()
        ls = nn.functional.cross_entropy(sf_m(x), y)
        lt = torch.nn.functional.cross_entropy(t_m(tx), ty)
        np.testing.assert_allclose(ls.item(), lt.item(), rtol=1e-5)
        ls.backward()
        lt.backward()
        sf_nn_clip = nn.utils.clip_grad_norm_(sf_m.parameters(), 0.5)
        t_clip = torch.nn.utils.clip_grad_norm_(t_m.parameters(), 0.5)
        np.testing.assert_allclose(sf_nn_clip.item(), t_clip.item(), rtol=1e-5)
        sf_opt.step()
        t_opt.step()
        for (n, p), tp in zip(sf_m.named_parameters(), t_m.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-4,
                                       atol=1e-6, err_msg=f"{n} after step {step}")


# ---- clip_grad_norm_ ---------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.1, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    sf_ps, t_ps = make_params()
    for p, tp, g in zip(sf_ps, t_ps, grads):
        p.grad, tp.grad = sf.tensor(g), torch.tensor(g)
    sf_ps[1].grad = None
    t_ps[1].grad = None
    total = sf.nn.utils.clip_grad_norm_(sf_ps, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(t_ps, max_norm, norm_type)
    assert isinstance(total, sf.Tensor) and total.dtype is sf.float32 and total.ndim == 0
    np.testing.assert_allclose(total.item(), t_total.item(), rtol=1e-6)
    for p, tp in zip(sf_ps, t_ps):
        if tp.grad is None:
            assert p.grad is None
        else:
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_clip_grad_norm_edge_cases():
    p = sf.tensor([3.0, 4.0], requires_grad=True)
    p.grad = sf.tensor([3.0, 4.0])
    v = p.grad.version
    total = sf.nn.utils.clip_grad_norm_(p, 1.0)  # a single tensor
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    assert p.grad.version == v + 1
    assert sf.nn.utils.clip_grad_norm_([sf.zeros(2)], 1.0).item() == 0.0  # no grads
    p.grad = sf.tensor([float("inf"), 1.0])
    with pytest.raises(sf.ShapeflowError, match="non-finite"):
        sf.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    q = sf.tensor([1.0, -5.0], requires_grad=True)
    q.grad = sf.tensor([1.0, -5.0])
    sf.nn.utils.clip_grad_value_([q], 2.0)
    np.testing.assert_array_equal(q.grad.numpy(), [1.0, -2.0])
