"""shapeflow.vision.models against torchvision 0.28: the same module and parameter names (a
torchvision state dict loads strictly, key for key), the same logits and gradients, the same
constructor options, initialization, weights entries and registry.

VGG-16 (138M parameters) is compared on names and shapes only, built on the meta device;
VGG-11-BN carries the VGG logits test (its 25088x4096 classifier alone is 400 MB)."""

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.vision.models as M
from shapeflow import nn
from shapeflow.device import meta

from .torchvision_oracle import import_torchvision

torch = pytest.importorskip("torch")
tv = import_torchvision()

NAMES = ["resnet18", "resnet34", "resnet50", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn",
         "mobilenet_v2"]


def _randomize_norms(model) -> None:
    """BatchNorm affine and running stats away from their 1/0 defaults, a nonzero count."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.GroupNorm)):
            n = m.weight.shape[0]
            with torch.no_grad():
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.num_batches_tracked.fill_(3)


def _twins(name: str, **kwargs):
    """torchvision's model with random weights, and shapeflow's with its state dict loaded."""
    torch.manual_seed(0)
    ref = getattr(tv.models, name)(**kwargs)
    _randomize_norms(ref)
    model = getattr(M, name)(**kwargs)
    missing, unexpected = model.load_state_dict(ref.state_dict(), strict=True)
    assert list(missing) == [] and list(unexpected) == []
    return model, ref


def _big_twins(name: str, **kwargs):
    """As _twins for VGG's 130M parameters: both built on meta (no initialization: that is
    checked on a small VGG), torchvision's filled with random values, shapeflow's assigned."""
    with torch.device("meta"):
        ref = getattr(tv.models, name)(**kwargs)
    ref.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in ref.parameters():
            fan_in = p[0].numel() if p.ndim > 1 else 1
            p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
    for m in ref.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
    _randomize_norms(ref)
    with meta:
        model = getattr(M, name)(**kwargs)
    missing, unexpected = model.load_state_dict(ref.state_dict(), strict=True, assign=True)
    assert list(missing) == [] and list(unexpected) == []
    return model, ref


def _same_state(model, ref, buffers_only: bool = False) -> None:
    """Every buffer (running stats, num_batches_tracked) and parameter equal, by name."""
    ours = dict(model.named_buffers()) if buffers_only else model.state_dict()
    theirs = dict(ref.named_buffers()) if buffers_only else ref.state_dict()
    assert list(ours) == list(theirs)
    for k, v in theirs.items():
        np.testing.assert_allclose(np.asarray(ours[k].detach().numpy(), dtype=np.float64),
                                   v.double().numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


def _compare_logits(model, ref, x: np.ndarray) -> None:
    model.eval()
    ref.eval()
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    got = model(sf.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    model.train()  # batch statistics, and the running stats they update
    ref.train()
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    got = model(sf.from_numpy(x)).detach().numpy()
    # statistics of a few values per channel (2x2 maps in layer4) amplify float32 rounding
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=5e-4 * np.abs(expected).max())
    _same_state(model, ref, buffers_only=True)  # the forward moved only the running stats


@pytest.mark.parametrize("name", NAMES)
def test_names_shapes_dtypes_and_module_tree_are_torchvisions(name):
    with torch.device("meta"):
        ref = getattr(tv.models, name)(num_classes=7)
    with meta:
        model = getattr(M, name)(num_classes=7)
    ours, theirs = model.state_dict(), ref.state_dict()
    assert list(ours) == list(theirs)  # same names, same order
    assert [tuple(v.shape) for v in ours.values()] == [tuple(v.shape) for v in theirs.values()]
    assert [str(v.dtype) for v in ours.values()] == [str(v.dtype).replace("torch.", "")
                                                       for v in theirs.values()]
    assert [(n, type(m).__name__) for n, m in model.named_modules()] == [
        (n, type(m).__name__) for n, m in ref.named_modules()]  # BasicBlock, InvertedResidual...


def test_mobilenet_blocks_keep_torchvisions_attributes():
    with meta:
        model = M.mobilenet_v2(num_classes=3)
    block = model.features[2]
    assert block.conv[1][0].groups == block.conv[1][0].in_channels == 96  # depthwise
    assert (block.stride, block.use_res_connect, block.out_channels) == (2, False, 24)
    assert model.features[3].use_res_connect and model.last_channel == 1280
    assert model.features[0].out_channels == 32


@pytest.mark.parametrize("name,size,kwargs", [
    ("resnet50", 48, {}),  # 48x48: layer4's maps are 2x2, as at 64x64, at half the cost
    ("mobilenet_v2", 48, {"dropout": 0.0}),
    ("vgg11_bn", 32, {"dropout": 0.0}),
])
def test_torchvision_weights_give_the_same_logits(name, size, kwargs):
    twins = _big_twins if name.startswith("vgg") else _twins
    model, ref = twins(name, num_classes=10, **kwargs)
    x = np.random.default_rng(2).standard_normal((2, 3, size, size)).astype(np.float32)
    _compare_logits(model, ref, x)


@pytest.mark.parametrize("name,kwargs", [
    ("resnet50", {"replace_stride_with_dilation": [False, True, True], "groups": 4,
                  "width_per_group": 8}),  # a dilated ResNeXt-like, at half the width
    ("resnet18", {"norm_layer": "group_norm"}),
    ("mobilenet_v2", {"width_mult": 0.5, "round_nearest": 4, "dropout": 0.0}),
])
def test_constructor_options_match_torchvision(name, kwargs):
    # 48x48 for mobilenet: its last BN would see 2 values per channel at 32x32
    size = 48 if name == "mobilenet_v2" else 32
    if kwargs.get("norm_layer") == "group_norm":
        model, ref = _twins_with_group_norm(name)
    else:
        model, ref = _twins(name, num_classes=5, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in ref.state_dict().items()]
    x = np.random.default_rng(3).standard_normal((2, 3, size, size)).astype(np.float32)
    _compare_logits(model, ref, x)


def _twins_with_group_norm(name):
    torch.manual_seed(0)
    ref = getattr(tv.models, name)(num_classes=5,
                                   norm_layer=lambda c: torch.nn.GroupNorm(8, c))
    _randomize_norms(ref)
    model = getattr(M, name)(num_classes=5, norm_layer=lambda c: nn.GroupNorm(8, c))
    model.load_state_dict(ref.state_dict(), strict=True)
    return model, ref


def test_resnet18_logits_and_gradients_match_torchvision():
    model, ref = _twins("resnet18", num_classes=10)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 48, 48)).astype(np.float32)
    _compare_logits(model, ref, x)  # leaves both in train mode
    y = rng.integers(0, 10, 2)
    loss = nn.functional.cross_entropy(model(sf.from_numpy(x)), sf.from_numpy(y))
    tloss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    g, tg = model.conv1.weight.grad.numpy(), ref.conv1.weight.grad.numpy()
    np.testing.assert_allclose(g, tg, rtol=1e-3, atol=1e-4 * np.abs(tg).max())
    tgrads = dict(ref.named_parameters())
    for n, p in model.named_parameters():  # every parameter, the fc's and each BN's included
        t = tgrads[n].grad.numpy()
        np.testing.assert_allclose(p.grad.numpy(), t, rtol=1e-3, atol=1e-4 * np.abs(t).max(),
                                   err_msg=n)


def _values(t) -> np.ndarray:
    return t.detach().numpy()


def _std_near(t, std: float, rel: float = 0.05) -> bool:
    return abs(_values(t).std() / std - 1) < rel


def test_initialization_follows_torchvisions():
    sf.manual_seed(0)
    torch.manual_seed(0)
    ours, ref = M.resnet18(num_classes=10), tv.models.resnet18(num_classes=10)
    # kaiming_normal_(fan_out, relu): std sqrt(2 / (out_channels * kh * kw))
    for o, r in [(ours.conv1, ref.conv1), (ours.layer3[0].conv2, ref.layer3[0].conv2)]:
        fan_out = o.weight.shape[0] * o.weight.shape[2] * o.weight.shape[3]
        assert _std_near(o.weight, np.sqrt(2 / fan_out)) and _std_near(r.weight,
                                                                      np.sqrt(2 / fan_out))
    # the fc keeps Linear's own init: U(-1/sqrt(512), 1/sqrt(512)), std bound/sqrt(3)
    bound = 1 / np.sqrt(512)
    assert np.abs(_values(ours.fc.weight)).max() <= bound
    assert _std_near(ours.fc.weight, bound / np.sqrt(3)) and _std_near(ref.fc.weight,
                                                                      bound / np.sqrt(3))
    assert (_values(ours.bn1.weight) == 1).all() and (_values(ours.bn1.bias) == 0).all()
    zero = M.resnet50(num_classes=10, zero_init_residual=True)
    assert (_values(zero.layer1[0].bn3.weight) == 0).all()
    assert (_values(zero.layer1[0].bn2.weight) == 1).all()
    assert (_values(M.resnet18(zero_init_residual=True).layer2[1].bn2.weight) == 0).all()
    mobile = M.mobilenet_v2(num_classes=10)
    head = mobile.classifier[1]
    assert _std_near(head.weight, 0.01) and (_values(head.bias) == 0).all()
    assert _std_near(mobile.features[0][0].weight, np.sqrt(2 / (32 * 9)), 0.1)  # fan_out 32*3*3


def test_vgg_initialization_follows_torchvisions():
    sf.manual_seed(0)
    small = M.VGG(M.vgg.make_layers(M.vgg.cfgs["A"][:4]), num_classes=10)
    conv = small.features[0]
    assert _std_near(conv.weight, np.sqrt(2 / (64 * 9)), 0.1) and (_values(conv.bias) == 0).all()
    for i in (0, 3, 6):  # normal(0, 0.01) linears, zero biases
        linear = small.classifier[i]
        assert _std_near(linear.weight, 0.01) and (_values(linear.bias) == 0).all()


def test_weights_entries_are_torchvisions():
    for enum_name in ["ResNet18_Weights", "ResNet34_Weights", "ResNet50_Weights",
                      "VGG11_Weights", "VGG11_BN_Weights", "VGG16_Weights", "VGG16_BN_Weights",
                      "MobileNet_V2_Weights"]:
        ours, ref = getattr(M, enum_name), getattr(tv.models, enum_name)
        assert list(ours.__members__) == list(ref.__members__), enum_name
        for member in ref.__members__:
            o, r = ours[member], ref[member]
            assert o.url == r.url and repr(o) == repr(r)
            om, rm = dict(o.meta), dict(r.meta)
            assert om.pop("_metrics").keys() == rm.pop("_metrics").keys()
            assert om == rm, f"{enum_name}.{member}"
            np.testing.assert_equal(o.meta["_metrics"], r.meta["_metrics"])  # NaNs of FEATURES
            assert o.transforms.keywords == r.transforms.keywords
            preset, tpreset = o.transforms(), r.transforms()
            for attr in ("crop_size", "resize_size", "mean", "std", "antialias"):
                assert getattr(preset, attr) == getattr(tpreset, attr)
    assert M.ResNet50_Weights.DEFAULT is M.ResNet50_Weights.IMAGENET1K_V2
    assert len(M.ResNet18_Weights.DEFAULT.meta["categories"]) == 1000
    assert M.ResNet18_Weights.verify("ResNet18_Weights.IMAGENET1K_V1").name == "IMAGENET1K_V1"
    with pytest.raises(TypeError, match="expected ResNet18_Weights"):
        M.resnet18(weights=M.ResNet34_Weights.DEFAULT)


def test_preset_transforms_an_image_as_torchvisions():
    pil_image = pytest.importorskip("PIL.Image")
    x = np.random.default_rng(5).integers(0, 256, (3, 40, 50), dtype=np.uint8)
    preset = M.ResNet50_Weights.IMAGENET1K_V2.transforms()
    tpreset = tv.models.ResNet50_Weights.IMAGENET1K_V2.transforms()
    preset.crop_size, preset.resize_size = [24], [30]  # small, same steps
    tpreset.crop_size, tpreset.resize_size = [24], [30]
    got = preset(sf.from_numpy(x)).numpy()
    expected = tpreset(torch.from_numpy(x)).numpy()
    assert got.shape == expected.shape == (3, 24, 24)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    image = pil_image.fromarray(x.transpose(1, 2, 0))
    np.testing.assert_allclose(preset(image).numpy(), tpreset(image).numpy(), atol=1e-6)
    assert repr(preset) == repr(tpreset)


def test_pretrained_weights_are_never_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(sf.CheckpointError, match="cannot be downloaded") as info:
        M.resnet18(weights=M.ResNet18_Weights.DEFAULT)
    assert isinstance(info.value, OSError)  # what torchvision raises offline (URLError)
    assert "resnet18-f37072fd.pth" in str(info.value) and "weights=None" in str(info.value)
    with pytest.raises(sf.CheckpointError), pytest.warns(UserWarning, match="deprecated"):
        M.mobilenet_v2(pretrained=True)
    with pytest.raises(sf.CheckpointError):
        M.get_model("vgg16", weights="DEFAULT")


def test_weights_in_torch_hubs_cache_load(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    torch.manual_seed(0)
    ref = tv.models.mobilenet_v2()
    _randomize_norms(ref)
    entry = M.MobileNet_V2_Weights.IMAGENET1K_V1
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    torch.save(ref.state_dict(), entry.cache_path)  # the file torchvision would have cached
    model = M.mobilenet_v2(weights="IMAGENET1K_V1")
    _same_state(model, ref)


def test_legacy_pretrained_false_warns_and_builds_as_torchvision():
    with pytest.warns(UserWarning) as expected:
        ref = tv.models.resnet18(pretrained=False, num_classes=4)
    with pytest.warns(UserWarning) as got:
        model = M.resnet18(pretrained=False, num_classes=4)
    assert [str(w.message) for w in got] == [str(w.message) for w in expected]
    assert list(model.state_dict()) == list(ref.state_dict())
    with pytest.warns(UserWarning, match="as positional parameter"):
        positional = M.resnet18(None, True, num_classes=4)  # weights, progress
    assert positional.fc.out_features == 4


def test_registry_as_torchvisions():
    ours = M.list_models()
    assert set(ours) <= set(tv.models.list_models())
    assert set(ours) >= {"resnet18", "resnet34", "resnet50", "vgg11", "vgg16", "mobilenet_v2"}
    for pattern in ["resnet*", "vgg1?_bn", ["vgg*", "mob*"]]:
        expected = [n for n in tv.models.list_models(include=pattern) if n in ours]
        assert M.list_models(include=pattern) == expected
    assert M.list_models(include="vgg*", exclude="*_bn") == ["vgg11", "vgg16"]
    assert M.list_models(module=M) == ours
    model = M.get_model("ResNet18", num_classes=3)
    assert isinstance(model, M.ResNet) and model.fc.out_features == 3
    assert M.get_model_builder("mobilenet_v2") is M.mobilenet_v2
    assert M.get_model_weights("resnet50") is M.ResNet50_Weights
    assert M.get_model_weights(M.vgg16) is M.VGG16_Weights
    assert M.get_weight("ResNet50_Weights.IMAGENET1K_V2") is M.ResNet50_Weights.DEFAULT
    with pytest.raises(ValueError, match="Unknown model"):
        M.get_model("resnet9000")


def test_resnet18_traces_on_meta():
    with meta:
        model = M.resnet18()
    x = sf.empty("B", 3, "H", "W", device="meta")
    lines = sf.summary(model, x).chain().splitlines()
    assert lines[0].endswith("[B, 3, H, W]") and lines[-1].endswith("[B, 1000]")
    assert any(ln.startswith("layer4") for ln in lines)
    report = sf.memory.report(model, sf.empty(8, 3, 224, 224, device="meta"))
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == M.ResNet18_Weights.DEFAULT.meta["num_params"]  # torchvision's count
    assert report.param_count == n_params and report.grads == 4 * n_params
    assert report.peak > report.params + report.grads + report.activations // 2


def test_bad_inputs_are_shapeflow_errors():
    with meta:
        model = M.resnet18(num_classes=10)
    with pytest.raises(sf.ShapeError, match="ResNet"):
        model(sf.empty(3, 64, 64, device="meta"))
    with pytest.raises(sf.ShapeError):
        model(sf.empty(1, 4, 64, 64, device="meta"))  # 4 channels where conv1 takes 3
    with pytest.raises(ValueError, match="replace_stride_with_dilation"):
        M.resnet50(replace_stride_with_dilation=[True])
    with pytest.raises(ValueError, match="num_classes"):
        M.resnet18(weights="DEFAULT", num_classes=10)
