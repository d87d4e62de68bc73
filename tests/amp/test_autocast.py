"""sf.autocast against torch.autocast("cpu", torch.bfloat16): op by op, dtypes and values;
regions (nested, disabled, decorator, threads), the weight-cast cache, gradients' dtypes."""

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
from shapeflow.autograd import autocast_state
from shapeflow.nn import functional as F
from shapeflow.ops import autocast as policy
from shapeflow.ops.elementwise.casts import Cast

SF_DT = {torch.float32: sf.float32, torch.bfloat16: sf.bfloat16, torch.float16: sf.float16,
         torch.float64: sf.float64, torch.int64: sf.int64}


_SEED = [0]


def both(shape, dtype=torch.float32, positive=False):
    """One random array as a shapeflow tensor and a torch tensor (same values, same dtype)."""
    _SEED[0] += 1
    a = np.random.default_rng(_SEED[0]).standard_normal(shape).astype(np.float32)
    if positive:  # in (0, 1): probabilities and targets
        a = 1 / (1 + np.exp(-a))
    t = torch.from_numpy(a).to(dtype)
    s = sf.tensor(t.float().numpy()).to(SF_DT[dtype])
    return s, t


class labels:  # noqa: N801
    """Class indices, the same for both frameworks."""

    def __init__(self, n, classes):
        y = np.arange(n) % classes
        self.pair = (sf.tensor(y), torch.from_numpy(y))


def _case_inputs(spec):
    return [s.pair if isinstance(s, labels) else both(*s) for s in spec]


BF = torch.bfloat16
# name: (shapeflow fn, torch fn, input specs); inputs float32 for the products (cast down
# inside), bfloat16 for the losses (cast up inside)
CASES = {
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [((4, 8),), ((8, 6),)]),
    "matmul_batched": (sf.matmul, torch.matmul, [((2, 4, 8),), ((8, 6),)]),
    "mm": (sf.mm, torch.mm, [((4, 8),), ((8, 6),)]),
    "bmm": (sf.bmm, torch.bmm, [((2, 4, 8),), ((2, 8, 3),)]),
    "baddbmm": (sf.baddbmm, torch.baddbmm, [((2, 4, 3),), ((2, 4, 8),), ((2, 8, 3),)]),
    "addmm": (sf.addmm, torch.addmm, [((6,),), ((4, 8),), ((8, 6),)]),
    "addbmm": (sf.addbmm, torch.addbmm, [((4, 3),), ((2, 4, 8),), ((2, 8, 3),)]),
    "linear": (F.linear, TF.linear, [((3, 5, 8),), ((6, 8),), ((6,),)]),
    "conv1d": (F.conv1d, TF.conv1d, [((2, 3, 9),), ((4, 3, 3),), ((4,),)]),
    "conv2d": (F.conv2d, TF.conv2d, [((2, 3, 7, 7),), ((4, 3, 3, 3),), ((4,),)]),
    "conv3d": (F.conv3d, TF.conv3d, [((1, 2, 4, 5, 5),), ((3, 2, 2, 3, 3),), ((3,),)]),
    "conv_transpose1d": (F.conv_transpose1d, TF.conv_transpose1d,
                         [((2, 3, 6),), ((3, 4, 3),), ((4,),)]),
    "conv_transpose2d": (F.conv_transpose2d, TF.conv_transpose2d,
                         [((2, 3, 5, 5),), ((3, 4, 3, 3),), ((4,),)]),
    "scaled_dot_product_attention": (F.scaled_dot_product_attention,
                                     TF.scaled_dot_product_attention,
                                     [((2, 2, 5, 8),), ((2, 2, 5, 8),), ((2, 2, 5, 8),)]),
    "prelu": (F.prelu, TF.prelu, [((4, 3, 5),), ((3,),)]),
    "einsum": (lambda a, b: sf.einsum("bij,jk->bik", a, b),
               lambda a, b: torch.einsum("bij,jk->bik", a, b), [((2, 4, 8),), ((8, 5),)]),
    "tensordot": (lambda a, b: sf.tensordot(a, b, 1), lambda a, b: torch.tensordot(a, b, 1),
                  [((4, 8),), ((8, 5),)]),
    # float32 policy: bfloat16 inputs, float32 outputs
    "mse_loss": (F.mse_loss, TF.mse_loss, [((4, 6), BF), ((4, 6), BF)]),
    "l1_loss": (F.l1_loss, TF.l1_loss, [((4, 6), BF), ((4, 6), BF)]),
    "smooth_l1_loss": (F.smooth_l1_loss, TF.smooth_l1_loss, [((4, 6), BF), ((4, 6), BF)]),
    "huber_loss": (F.huber_loss, TF.huber_loss, [((4, 6), BF), ((4, 6), BF)]),
    "cross_entropy": (F.cross_entropy, TF.cross_entropy, [((6, 5), BF), labels(6, 5)]),
    "nll_loss": (F.nll_loss, TF.nll_loss, [((6, 5), BF), labels(6, 5)]),
    "binary_cross_entropy": (lambda a, b: F.binary_cross_entropy(a.sigmoid(), b),
                             lambda a, b: TF.binary_cross_entropy(a.sigmoid(), b),
                             [((4, 6), BF), ((4, 6), BF, True)]),
    "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits,
                                         TF.binary_cross_entropy_with_logits,
                                         [((4, 6), BF), ((4, 6), BF, True)]),
    "kl_div": (lambda a, b: F.kl_div(a, b, reduction="batchmean"),
               lambda a, b: TF.kl_div(a, b, reduction="batchmean"),
               [((4, 6), BF), ((4, 6), BF, True)]),
    "margin_ranking_loss": (F.margin_ranking_loss, TF.margin_ranking_loss,
                            [((6,), BF), ((6,), BF), ((6,), BF)]),
    "soft_margin_loss": (F.soft_margin_loss, TF.soft_margin_loss,
                         [((4, 6), BF), ((4, 6), BF)]),
    "cosine_embedding_loss": (F.cosine_embedding_loss, TF.cosine_embedding_loss,
                              [((4, 6), BF), ((4, 6), BF), ((4,), BF)]),
    "poisson_nll_loss": (F.poisson_nll_loss, TF.poisson_nll_loss,
                         [((4, 6), BF), ((4, 6), BF, True)]),
    "prod": (lambda a: a.prod(-1), lambda a: a.prod(-1), [((4, 6), BF)]),
    "cdist": (sf.cdist, torch.cdist, [((4, 6), BF), ((5, 6), BF)]),
    "trace": (sf.trace, torch.trace, [((5, 5), BF)]),
    # not on a list: run in their inputs' dtype, as in PyTorch
    "softmax_bf16": (lambda a: F.softmax(a, -1), lambda a: TF.softmax(a, -1), [((4, 6), BF)]),
    "softmax_fp32": (lambda a: F.softmax(a, -1), lambda a: TF.softmax(a, -1), [((4, 6),)]),
    "log_softmax_bf16": (lambda a: F.log_softmax(a, -1), lambda a: TF.log_softmax(a, -1),
                         [((4, 6), BF)]),
    "layer_norm_bf16": (lambda a, w, b: F.layer_norm(a, (6,), w, b),
                        lambda a, w, b: TF.layer_norm(a, (6,), w, b),
                        [((4, 6), BF), ((6,),), ((6,),)]),
    "layer_norm_fp32": (lambda a, w, b: F.layer_norm(a, (6,), w, b),
                        lambda a, w, b: TF.layer_norm(a, (6,), w, b),
                        [((4, 6),), ((6,),), ((6,),)]),
    "rms_norm_bf16": (lambda a, w: F.rms_norm(a, (6,), w), lambda a, w: TF.rms_norm(a, (6,), w),
                      [((4, 6), BF), ((6,),)]),
    "gelu_bf16": (F.gelu, TF.gelu, [((4, 6), BF)]),
    "sum_bf16": (lambda a: a.sum(), lambda a: a.sum(), [((4, 6), BF)]),
    "add_mixed": (lambda a, b: a + b, lambda a, b: a + b, [((4, 6), BF), ((4, 6),)]),
    # promote: the widest input dtype
    "cat": (lambda a, b: sf.cat([a, b]), lambda a, b: torch.cat([a, b]),
            [((2, 6), BF), ((3, 6),)]),
    "stack": (lambda a, b: sf.stack([a, b]), lambda a, b: torch.stack([a, b]),
              [((2, 6), BF), ((2, 6),)]),
    "index_copy": (lambda a, b: a.index_copy(0, sf.tensor([2, 0]), b),
                   lambda a, b: a.index_copy(0, torch.tensor([2, 0]), b),
                   [((3, 6),), ((2, 6), BF)]),
}


def _close(ours, theirs, dtype):
    o = ours.float().numpy().astype(np.float64)
    t = theirs.detach().float().numpy().astype(np.float64)
    # a few bf16 roundings apart: bf16 has 8 significant bits (2**-8 relative)
    tol = 2.0**-6 if dtype in (sf.bfloat16, sf.float16) else 2.0**-10
    scale = max(1.0, float(np.abs(t).max()))
    np.testing.assert_allclose(o, t, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("name", CASES)
def test_op_matches_torch_autocast(name):
    fn, tfn, spec = CASES[name]
    pairs = _case_inputs(spec)
    ours_in = [p[0] for p in pairs]
    theirs_in = [p[1] for p in pairs]
    with sf.autocast("cpu", dtype=sf.bfloat16):
        ours = fn(*ours_in)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = tfn(*theirs_in)
    assert ours.dtype == SF_DT[theirs.dtype], (ours.dtype, theirs.dtype)
    assert ours._data.dtype == ours.dtype.np  # the array holds what the tensor says
    _close(ours, theirs, ours.dtype)


def test_every_listed_op_is_covered():
    covered = {n.split("_bf16")[0].split("_fp32")[0] for n in CASES}
    for name in policy.LOWER_PRECISION + policy.FP32 + policy.PROMOTE:
        assert name in covered, name


@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16])
def test_float16_and_bfloat16_regions(dtype):
    (x, tx), (w, tw) = both((4, 8)), both((6, 8))
    tdt = {sf.float16: torch.float16, sf.bfloat16: torch.bfloat16}[dtype]
    with sf.autocast("cpu", dtype=dtype):
        ours = F.linear(x, w)
        assert sf.get_autocast_dtype("cpu") is dtype
    with torch.autocast("cpu", dtype=tdt):
        theirs = TF.linear(tx, tw)
    assert ours.dtype is dtype and theirs.dtype == tdt
    _close(ours, theirs, dtype)


def test_outside_a_region_nothing_is_cast():
    x = sf.randn(3, 4)
    assert not sf.is_autocast_enabled() and not autocast_state.hot.on
    assert (x @ x.T).dtype is sf.float32
    with sf.autocast("cpu"):
        assert sf.is_autocast_enabled() and sf.is_autocast_enabled("cpu")
        assert autocast_state.hot.on
    assert not sf.is_autocast_enabled() and not autocast_state.hot.on


def test_nested_and_disabled_regions():
    x = sf.randn(3, 4)
    with sf.autocast("cpu"):
        assert (x @ x.T).dtype is sf.bfloat16
        with sf.autocast("cpu", enabled=False):
            assert not sf.is_autocast_enabled()
            assert (x @ x.T).dtype is sf.float32
            with sf.autocast("cpu", dtype=sf.float16):
                assert (x @ x.T).dtype is sf.float16
            assert (x @ x.T).dtype is sf.float32
        assert sf.is_autocast_enabled() and (x @ x.T).dtype is sf.bfloat16
        assert sf.get_autocast_dtype("cpu") is sf.bfloat16
    assert (x @ x.T).dtype is sf.float32


def test_decorator_and_aliases():
    @sf.autocast("cpu")
    def product(a):
        return a @ a.T

    @sf.amp.autocast("cpu", enabled=False)
    def plain(a):
        return a @ a.T

    x = sf.randn(3, 4)
    assert product(x).dtype is sf.bfloat16 and product(x).dtype is sf.bfloat16
    assert plain(x).dtype is sf.float32
    assert not sf.is_autocast_enabled()
    assert sf.amp.autocast is sf.autocast


def test_state_is_per_thread():
    seen = {}

    def other():
        seen["enabled"] = sf.is_autocast_enabled()
        seen["dtype"] = (sf.randn(2, 2) @ sf.randn(2, 2)).dtype

    with sf.autocast("cpu"):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == {"enabled": False, "dtype": sf.float32}


def test_weight_casts_are_cached_within_a_region_and_cleared_after():
    lin = sf.nn.Linear(8, 4)
    x = sf.randn(2, 8)
    with sf.autocast("cpu"):
        a, b = lin(x), lin(x)
        # both products read one bfloat16 copy of the weight: the same Tensor object
        wa, wb = a.grad_fn.next[3], b.grad_fn.next[3]
        assert isinstance(wa, Cast) and wa is wb and wa.dtype is sf.bfloat16
        copy = autocast_state.state.cache[id(lin.weight)][1]
        assert copy.dtype is sf.bfloat16 and copy.grad_fn is wa
        with sf.autocast("cpu"):  # a nested region shares the cache
            assert lin(x).grad_fn.next[3] is wa
        assert len(autocast_state.state.cache) == 2  # weight and bias
        # a non-leaf (or a tensor that does not require grad) is cast each time, as PyTorch
        h = sf.randn(2, 8, requires_grad=True) * 1.0
        assert lin(h).grad_fn.next[0] is not lin(h).grad_fn.next[0]
    assert autocast_state.state.cache == {}
    with sf.autocast("cpu"):
        assert lin(x).grad_fn.next[3] is not wa  # a new region casts again
    with sf.autocast("cpu", cache_enabled=False):
        assert lin(x).grad_fn.next[3] is not lin(x).grad_fn.next[3]


def test_gradients_flow_back_in_the_parameters_dtype():
    sf.manual_seed(0)
    lin = sf.nn.Linear(8, 4)
    tlin = torch.nn.Linear(8, 4)
    with torch.no_grad():
        tlin.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
        tlin.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    (x, tx), (y, ty) = both((5, 8)), both((5, 4))
    with sf.autocast("cpu"):
        loss = F.mse_loss(lin(x), y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tloss = TF.mse_loss(tlin(tx), ty)
    assert loss.dtype is sf.float32 and tloss.dtype == torch.float32
    loss.backward()
    tloss.backward()
    assert lin.weight.grad.dtype is sf.float32 and lin.bias.grad.dtype is sf.float32
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(),
                               rtol=2**-6, atol=2**-6)
    np.testing.assert_allclose(lin.bias.grad.numpy(), tlin.bias.grad.numpy(),
                               rtol=2**-6, atol=2**-6)


def test_float64_is_never_cast():
    x = sf.randn(3, 4, dtype=sf.float64)
    with sf.autocast("cpu"):
        assert (x @ x.T).dtype is sf.float64
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (torch.ones(3, 4, dtype=torch.float64) @ torch.ones(4, 3,
                dtype=torch.float64)).dtype == torch.float64


def test_meta_tensors_are_cast_too():
    lin = sf.nn.Linear(8, 4, device="meta")
    with sf.autocast("cpu"):
        out = lin(sf.empty(2, 8, device="meta"))
    assert out.dtype is sf.bfloat16 and out.device.type == "meta"


def test_unsupported_settings():
    with pytest.warns(UserWarning, match="not supported"):
        region = sf.autocast("cpu", dtype=sf.float64)
    with region:
        assert not sf.is_autocast_enabled()
    with pytest.warns(UserWarning, match="CUDA is not available"):
        sf.autocast("cuda")
    with pytest.raises(sf.DeviceError):
        sf.autocast("tpu")
    assert not sf.is_autocast_enabled("cuda")
    assert sf.amp.is_autocast_available("cpu")


def test_exception_inside_a_region_restores_the_state():
    with pytest.raises(sf.ShapeError), sf.autocast("cpu"):
        sf.randn(2, 3) @ sf.randn(2, 3)
    assert not sf.is_autocast_enabled() and not autocast_state.hot.on
    assert autocast_state.state.nesting == 0 and autocast_state.state.cache == {}
