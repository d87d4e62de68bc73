"""A catalogue of real-world mistakes: each gets the right error class, place and hint."""

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.nn import functional as F


class MLPBlock(nn.Module):
    def __init__(self, dim, hidden, built_for):
        super().__init__()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential()
        self.mlp.fc1 = nn.Linear(dim, hidden)
        self.mlp.fc2 = nn.Linear(built_for, dim)

    def forward(self, x):
        return x + self.mlp.fc2(self.mlp.fc1(self.norm2(x)))


class Net(nn.Module):
    def __init__(self, bad_hidden=None):
        super().__init__()
        self.proj = nn.Linear(4, 64)
        self.blocks = nn.ModuleList([MLPBlock(64, 128, 128), MLPBlock(64, 128, bad_hidden or 128)])

    def forward(self, image):
        x = self.proj(image)
        for b in self.blocks:
            x = b(x)
        return x


def test_linear_in_features_mismatch_deep_in_a_model():
    with pytest.raises(sf.ShapeError) as e:
        Net(bad_hidden=256)(sf.randn(2, 16, 4))
    err = e.value
    assert err.module_path == "blocks.1.mlp.fc2"
    assert err.module_kind == "Linear 256->64"
    assert "[2, 16, 128]" in str(err) and "[64, 256]" in str(err)
    assert "fc1 produces 128 but fc2 was built for 256" in err.hint
    assert "blocks.0 [2,16,64]" in err.chain and err.chain.endswith("x blocks.1.mlp.fc2")


def test_linear_mismatch_with_symbolic_dims_on_meta():
    x = sf.empty("B", "N", 4, device="meta")
    with pytest.raises(sf.ShapeError) as e:
        Net(bad_hidden=256).to("meta")(x)
    assert e.value.module_path == "blocks.1.mlp.fc2"
    assert "[B, N, 128]" in str(e.value)


def test_integer_tensor_into_linear():
    with pytest.raises(sf.DTypeError) as e:
        nn.Linear(4, 2)(sf.arange(8).reshape(2, 4))
    assert ".float()" in e.value.hint and "int64" in str(e.value)


def test_attention_given_transposed_input():
    q = sf.randn(2, 4, 10, 16)  # [B, H, L, E]
    k_wrong = sf.randn(2, 4, 16, 10)  # [B, H, E, L]
    with pytest.raises(sf.ShapeError) as e:
        F.scaled_dot_product_attention(q, k_wrong, k_wrong)
    assert "transpose" in (e.value.hint or "")
    assert "[2, 4, 16, 10]" in str(e.value)


def test_mse_loss_unit_dim():
    with pytest.raises(sf.ShapeError) as e:
        F.mse_loss(sf.randn(8, 1), sf.randn(8))
    assert "unsqueeze" in e.value.hint or "squeeze" in e.value.hint
    assert "[8, 1]" in str(e.value) and "[8]" in str(e.value)


def test_float_targets_to_cross_entropy():
    with pytest.raises(sf.DTypeError) as e:
        F.cross_entropy(sf.randn(4, 10), sf.tensor([1.0, 2.0, 3.0, 4.0]))
    assert "long()" in e.value.hint


def test_embedding_given_floats():
    with pytest.raises(sf.DTypeError) as e:
        nn.Embedding(10, 4)(sf.randn(2, 3))
    assert "integer" in str(e.value) or "integer" in e.value.hint


def test_embedding_index_out_of_range():
    with pytest.raises(sf.ShapeError) as e:
        nn.Embedding(10, 4)(sf.tensor([3, 12]))
    assert "12" in str(e.value) and "10" in str(e.value)


def test_reshape_to_impossible_size_shows_factorisation():
    with pytest.raises(sf.ShapeError) as e:
        sf.ones(6, 10).reshape(7, -1)
    assert "60 = 2 x 2 x 3 x 5" in e.value.hint


def test_unprovable_symbolic_reshape_names_the_fact():
    H = sf.Dim("H")
    with pytest.raises(sf.ShapeError) as e:
        sf.empty(H, 3, device="meta").reshape(-1, 16)
    assert "divisible" in str(e.value) or "fact" in str(e.value) + (e.value.hint or "")


def test_undecidable_comparison_in_users_names():
    H, W = sf.dims("H W")
    with pytest.raises(sf.ShapeError) as e:
        bool(H * W // 256 == 196)
    assert "H*W//256 == 196" in str(e.value) or "H*W/256 == 196" in str(e.value)


def test_patch_size_that_does_not_divide_the_image():
    from shapeflow.models import ViT

    with pytest.raises(sf.ShapeError) as e:
        ViT(image_size=30, patch_size=16, in_channels=3, num_classes=10, dim=32, depth=1,
            heads=2)
    assert "32" in e.value.hint  # the nearest image size that works
    assert "15" in e.value.hint or "10" in e.value.hint  # or patch sizes that divide 30


def test_matmul_transposed_operand_hint():
    with pytest.raises(sf.ShapeError) as e:
        sf.ones(5, 3) @ sf.ones(5, 4)
    assert "transposed" in e.value.hint and "[5, 3]" in str(e.value)


def test_mixed_float16_float32():
    with pytest.raises(sf.DTypeError) as e:
        sf.ones(2, 3, dtype=sf.float16) @ sf.ones(3, 2)
    assert "float16" in str(e.value) and "float32" in str(e.value) and "to(" in e.value.hint


def test_meta_mixed_with_cpu():
    with pytest.raises(sf.DeviceError) as e:
        nn.Linear(4, 2)(sf.ones(3, 4, device="meta"))
    msg = str(e.value)
    assert "meta" in msg and "cpu" in msg and "no data" in e.value.hint


def test_broadcast_mismatch_inside_a_module_says_where():
    class Bias(nn.Module):
        def __init__(self):
            super().__init__()
            self.b = nn.Parameter(sf.zeros(5))

        def forward(self, x):
            return x + self.b

    model = nn.Sequential(nn.Linear(4, 3), Bias())
    with pytest.raises(sf.ShapeError) as e:
        model(sf.ones(2, 4))
    assert e.value.module_path == "1" and e.value.op == "add"
    assert "[2, 3]" in str(e.value) and "[5]" in str(e.value)


def test_conv_channel_mismatch():
    with pytest.raises(sf.ShapeError) as e:
        nn.Conv2d(3, 8, 3)(sf.ones(1, 1, 8, 8))
    assert "[1, 1, 8, 8]" in str(e.value)


def test_backward_twice():
    x = sf.ones(3, requires_grad=True)
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(sf.GraphError) as e:
        y.backward()
    assert "retain_graph=True" in e.value.hint


def test_inplace_on_saved_tensor():
    x = sf.ones(3, requires_grad=True)
    h = x * 2
    y = h.sin()  # sin keeps its input for backward; tanh would keep its output
    h.mul_(3)
    with pytest.raises(sf.GraphError) as e:
        y.sum().backward()
    assert e.value.op == "sin" and "mul_" in str(e.value)
    assert "version 0" in str(e.value) and "version 1" in str(e.value)


def test_parameter_detached_by_numpy_round_trip():
    class Leaky(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 2)

        def forward(self, x):
            h = sf.tensor(self.fc1(x).detach().numpy())  # a "harmless" numpy step
            return self.fc2(h)

    model = Leaky()
    loss = model(sf.randn(3, 4)).sum()
    report = sf.explain_no_grad(loss, model)
    assert "fc1.weight" in report and "fc1.bias" in report and "detach()" in report
    assert "fc2" not in report
    loss.backward()
    opt = sf.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="fc1.weight"):
        opt.step()


def test_loss_computed_under_no_grad():
    model = nn.Linear(4, 1)
    with sf.no_grad():
        loss = model(sf.randn(2, 4)).sum()
    with pytest.raises(sf.GraphError) as e:
        loss.backward()
    msg = str(e.value)
    assert "no_grad" in msg and "weight" in msg


def test_nan_from_log_zero_in_anomaly_mode():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with nn.init.no_grad() if hasattr(nn.init, "no_grad") else sf.no_grad():
        model[0].weight.fill_(0.0)
        model[0].bias.fill_(0.0)
    with sf.detect_anomaly(), pytest.raises(sf.AnomalyError) as e:
        sf.log(model(sf.ones(1, 2))).sum()
    err = e.value
    assert err.op == "log" and "[1, 2] float32" in str(err)
    assert err.user_line and "test_mistakes.py" in err.user_line
    assert "clamp" in err.hint


def test_load_state_dict_lists_every_bad_key_and_changes_nothing():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    bad = dict(model.state_dict())
    bad["0.weight"] = sf.zeros(5, 4)
    bad["1.weight"] = sf.zeros(2, 7)
    with pytest.raises(sf.ShapeError) as e:
        model.load_state_dict(bad)
    msg = str(e.value)
    assert "0.weight" in msg and "[5, 4]" in msg and "1.weight" in msg and "[2, 7]" in msg
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_gpt_sequence_longer_than_block_size():
    from shapeflow.models import GPT

    model = GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    with pytest.raises(sf.ShapeError) as e:
        model(sf.zeros(1, 9, dtype=sf.int64))
    assert "idx[:, -8:]" in e.value.hint


def test_cat_mismatch_names_each_operand():
    with pytest.raises(sf.ShapeError) as e:
        sf.cat([sf.ones(2, 3), sf.ones(2, 4)], dim=0)
    assert "[2, 3]" in str(e.value) and "[2, 4]" in str(e.value)


def test_index_out_of_bounds():
    with pytest.raises(sf.ShapeError) as e:
        sf.ones(3, 4)[5]
    assert "out of bounds" in str(e.value)


def test_cuda_is_not_available():
    with pytest.raises(sf.DeviceError) as e:
        sf.ones(2, device="cuda")
    assert "meta" in e.value.hint
