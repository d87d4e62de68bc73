"""einops on shapeflow tensors (its backend in shapeflow.ext), against einops on torch."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

import shapeflow as sf

einops = pytest.importorskip("einops")
from einops.layers.torch import Rearrange as TorchRearrange  # noqa: E402
from einops.layers.torch import Reduce as TorchReduce  # noqa: E402

rng = np.random.default_rng(0)
A = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
B = rng.standard_normal((2, 3, 5)).astype(np.float32)
W = rng.standard_normal((3, 3)).astype(np.float32)

CASES = [  # (name, function of einops module and the tensors)
    ("rearrange", lambda e, a, b: e.rearrange(a, "b c h (w p) -> b (h w) (p c)", p=2)),
    ("rearrange ellipsis", lambda e, a, b: e.rearrange(a, "b ... w -> w b ...")),
    ("rearrange list", lambda e, a, b: e.rearrange([a, a * 2], "n b c h w -> b n c h w")),
    ("reduce mean", lambda e, a, b: e.reduce(a, "b c (h h2) w -> b c h", "mean", h2=2)),
    ("reduce sum", lambda e, a, b: e.reduce(a, "b c h w -> c", "sum")),
    ("reduce max", lambda e, a, b: e.reduce(a, "b c h w -> b w", "max")),
    ("reduce min", lambda e, a, b: e.reduce(a, "b c h w -> h", "min")),
    ("reduce prod", lambda e, a, b: e.reduce(a * 0.5 + 1, "b c h w -> b c", "prod")),
    ("repeat", lambda e, a, b: e.repeat(b, "b c l -> b c l k", k=3)),
    ("repeat tile", lambda e, a, b: e.repeat(b, "b c l -> b (r c) l", r=2)),
    ("pack", lambda e, a, b: e.pack([a, b], "b c *")[0]),
    ("unpack", lambda e, a, b: e.unpack(e.pack([a, b], "b c *")[0],
                                        [(4, 6), (5,)], "b c *")[0] * 3),
    ("einsum", lambda e, a, b: e.einsum(a, b, "b c h w, b c l -> b h l")),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_einops_on_torch(name, fn):
    sa, sb = sf.tensor(A, requires_grad=True), sf.tensor(B, requires_grad=True)
    ta, tb = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    out_s, out_t = fn(einops, sa, sb), fn(einops, ta, tb)
    assert isinstance(out_s, sf.Tensor) and out_s.shape == tuple(out_t.shape)
    np.testing.assert_allclose(out_s.detach().numpy(), out_t.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    weight = rng.standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_s * sf.tensor(weight)).sum().backward()
    (out_t * torch.tensor(weight)).sum().backward()
    for s, t in ((sa, ta), (sb, tb)):
        if t.grad is None:
            assert s.grad is None
        else:
            np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_integer_and_bool_tensors():
    x = sf.tensor(np.arange(24).reshape(2, 3, 4))
    assert einops.rearrange(x, "a b c -> c (a b)").tolist() == einops.rearrange(
        torch.arange(24).reshape(2, 3, 4), "a b c -> c (a b)").tolist()
    m = sf.tensor(np.arange(6).reshape(2, 3) % 2 == 0)
    assert einops.reduce(m, "a b -> b", "any").tolist() == [True, True, True]
    assert einops.reduce(m, "a b -> a", "all").tolist() == [False, False]
    assert einops.parse_shape(x, "a b _") == {"a": 2, "b": 3}
    assert isinstance(einops.asnumpy(x), np.ndarray)


def test_meta_tensors_with_symbolic_dims():
    Bd, L = sf.Dim("B"), sf.Dim("L")
    x = sf.empty(Bd, 3, L * 4, 6, device="meta")
    y = einops.rearrange(x, "b c (l p) w -> b l (p c w)", p=4)
    assert y.shape == (Bd, L, 72) and y.device == "meta"
    assert einops.reduce(x, "b c l w -> b w", "mean").shape == (Bd, 6)
    assert einops.repeat(x, "b c l w -> b c l w k", k=Bd).shape == (Bd, 3, 4 * L, 6, Bd)
    packed, ps = einops.pack([x, sf.empty(Bd, 3, 7, device="meta")], "b c *")
    assert packed.shape == (Bd, 3, 24 * L + 7)
    first, second = einops.unpack(packed, ps, "b c *")
    assert first.shape == x.shape and second.shape == (Bd, 3, 7)
    with pytest.raises(einops.EinopsError):
        einops.rearrange(sf.empty(2, 3, device="meta"), "a b -> a")


def test_einops_layers_port_by_their_import():
    patches = sf.nn.Sequential(
        sf.nn.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
        sf.nn.Linear(12, 5),
        sf.nn.Reduce("b n d -> b d", "mean"),
    )
    theirs = torch.nn.Sequential(
        TorchRearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
        torch.nn.Linear(12, 5),
        TorchReduce("b n d -> b d", "mean"),
    )
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in
                            patches.state_dict().items()})
    x = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    xs, xt = sf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ys, yt = patches(xs), theirs(xt)
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    ys.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    layer = patches[0]
    assert isinstance(layer, sf.nn.Module) and list(layer.parameters()) == []
    assert repr(layer) == repr(theirs[0])
    assert repr(pickle.loads(pickle.dumps(layer))) == repr(layer)
    assert sf.nn.Reduce("b c h w -> b c", "max")(sf.empty(2, 3, 4, 4, device="meta")).shape \
        == (2, 3)
    assert sf.nn.Rearrange("b c -> c b")(sf.ones(2, 3)).shape == (3, 2)


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_registration_in_either_import_order_and_no_import_of_einops():
    assert _run("import sys, shapeflow, shapeflow.nn; print('einops' in sys.modules)") == \
        "False"
    use = "print(einops.rearrange(shapeflow.ones(2, 3), 'a b -> b a').shape)"
    assert _run(f"import shapeflow, einops; {use}") == "[3, 2]"
    assert _run(f"import einops, shapeflow; {use}") == "[3, 2]"
    layers = "import shapeflow; from shapeflow.nn import Rearrange; print(Rearrange('a b -> b a'))"
    assert _run(layers) == "Rearrange('a b -> b a')"
