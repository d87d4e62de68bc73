"""shapeflow.vision.transforms against torchvision.transforms on the same PIL images and tensors."""

import subprocess
import sys

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.vision import transforms as T
from shapeflow.vision.transforms import functional as F
from shapeflow.vision.transforms import v2

from .torchvision_oracle import import_torchvision

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
tv = import_torchvision()
TT, TF = tv.transforms, tv.transforms.functional

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (23, 31, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, (19, 14), dtype=np.uint8)
FLOAT = RNG.random((2, 3, 21, 30), dtype=np.float32)


def arr(x) -> np.ndarray:
    """Either library's output as an array: PIL images by their pixels, tensors by values."""
    if isinstance(x, Image.Image):
        return np.asarray(x)
    if isinstance(x, torch.Tensor):
        return x.numpy()
    return x.numpy()


def same(a, b, atol=0.0) -> None:
    a, b = arr(a), arr(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if atol:
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=0, atol=atol)
    else:
        np.testing.assert_array_equal(a, b)


def pil_rgb():
    return Image.fromarray(RGB)


def pil_gray():
    return Image.fromarray(GRAY)


def tensors(a: np.ndarray):
    return sf.tensor(a), torch.from_numpy(a.copy())


@pytest.mark.parametrize("make", [pil_rgb, pil_gray, lambda: Image.fromarray(RGB).convert("RGBA"),
                                  lambda: Image.fromarray(GRAY > 128)])
def test_to_tensor_and_pil_to_tensor_match_torchvision(make):
    same(T.ToTensor()(make()), TT.ToTensor()(make()))
    same(T.PILToTensor()(make()), TT.PILToTensor()(make()))


@pytest.mark.parametrize("a", [RGB, GRAY, RNG.random((5, 4, 2))])
def test_to_tensor_on_ndarrays_matches_torchvision(a):
    same(T.ToTensor()(a), TT.ToTensor()(a))


def test_to_pil_image_matches_torchvision():
    for a in (FLOAT[0], FLOAT[0, :1], RGB.transpose(2, 0, 1).copy(), GRAY[None].copy()):
        ours, theirs = tensors(a)
        got, want = T.ToPILImage()(ours), TT.ToPILImage()(theirs)
        assert got.mode == want.mode
        same(got, want)
    assert T.ToPILImage()(RGB).mode == "RGB"
    with pytest.raises(sf.ShapeError, match="to_pil_image"):
        T.ToPILImage()(sf.zeros(5, 2, 2))


def test_normalize_is_exact():
    ours, theirs = tensors(FLOAT)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    same(T.Normalize(mean, std)(ours), TT.Normalize(mean, std)(theirs))
    with pytest.raises(sf.DTypeError, match="float"):
        T.Normalize(mean, std)(sf.tensor(RGB.transpose(2, 0, 1).copy()))


DETERMINISTIC = [
    ("CenterCrop", (10,), {}), ("CenterCrop", ((9, 16),), {}), ("CenterCrop", ((30, 40),), {}),
    ("Pad", (3,), {}), ("Pad", ((1, 2),), {"fill": 7}), ("Pad", ((1, 2, 3, 4),), {}),
    ("Pad", ((2, 1, 3, 0),), {"padding_mode": "edge"}),
    ("Pad", ((2, 1, 3, 2),), {"padding_mode": "reflect"}),
    ("Pad", ((2, -1, 3, 2),), {"padding_mode": "symmetric"}),
    ("Grayscale", (), {}), ("Grayscale", (3,), {}),
    ("Resize", (12,), {}), ("Resize", ((40, 17),), {}), ("Resize", (9,), {"max_size": 11}),
]


@pytest.mark.parametrize("name,args,kwargs", DETERMINISTIC)
def test_deterministic_transforms_on_pil_images_are_exact(name, args, kwargs):
    for make in (pil_rgb, pil_gray):
        if name == "Grayscale" and make is pil_gray:
            continue
        same(getattr(T, name)(*args, **kwargs)(make()), getattr(TT, name)(*args, **kwargs)(make()))


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic", "box", "hamming", "lanczos"])
def test_resize_on_pil_images_is_pils_resize(mode):
    ours = T.Resize((11, 45), interpolation=T.InterpolationMode(mode))(pil_rgb())
    same(ours, TT.Resize((11, 45), interpolation=TT.InterpolationMode(mode))(pil_rgb()))


@pytest.mark.parametrize("name,args,kwargs", [d for d in DETERMINISTIC if d[0] != "Resize"])
@pytest.mark.parametrize("a", [FLOAT, RGB.transpose(2, 0, 1).copy()])
def test_deterministic_transforms_on_tensors_are_exact(name, args, kwargs, a):
    if name == "Pad" and kwargs.get("padding_mode") == "symmetric" and a.ndim == 4:
        a = a[0]  # torchvision's symmetric mode takes at most 3 dims
    ours, theirs = tensors(a)
    same(getattr(T, name)(*args, **kwargs)(ours), getattr(TT, name)(*args, **kwargs)(theirs))


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(7, 11), (50, 64), (9, 70), [10]])
def test_resize_on_tensors_matches_torch_interpolate(mode, antialias, size):
    im = T.InterpolationMode(mode)
    for a in (FLOAT, RGB.transpose(2, 0, 1).copy()):
        ours, theirs = tensors(a)
        got = T.Resize(size, im, antialias=antialias)(ours)
        want = TT.Resize(size, TT.InterpolationMode(mode), antialias=antialias)(theirs)
        if a.dtype == np.uint8:  # float32 sums in another order may round .5 the other way
            same(got, want, atol=1)
            assert (arr(got) != arr(want)).mean() < 0.01
        else:
            same(got, want, atol=2e-6)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_resize_on_tensors_is_exact(mode):
    for size in [(7, 11), (50, 64), (42, 62)]:
        ours, theirs = tensors(FLOAT)
        same(F.resize(ours, size, T.InterpolationMode(mode)),
             TF.resize(theirs, size, TF.InterpolationMode(mode)))


def test_flips_with_fixed_decisions_are_exact():
    for make in (pil_rgb, lambda: tensors(FLOAT)[0]):
        theirs = arr(make())
        assert np.array_equal(arr(T.RandomHorizontalFlip(p=1.0)(make())), theirs[..., ::-1, :]
                              if isinstance(make(), Image.Image) else theirs[..., ::-1])
        same(T.RandomHorizontalFlip(p=0.0)(make()), make())
    same(T.RandomVerticalFlip(p=1.0)(pil_rgb()), TT.RandomVerticalFlip(p=1.0)(pil_rgb()))
    same(T.RandomHorizontalFlip(p=1.0)(pil_rgb()), TT.RandomHorizontalFlip(p=1.0)(pil_rgb()))
    ours, theirs = tensors(FLOAT)
    same(T.RandomVerticalFlip(p=1.0)(ours), TT.RandomVerticalFlip(p=1.0)(theirs))
    same(T.RandomHorizontalFlip(p=1.0)(ours), TT.RandomHorizontalFlip(p=1.0)(theirs))


def test_random_flip_probability_and_seeding():
    flip = T.RandomHorizontalFlip(p=0.3)
    img = sf.tensor(np.arange(6.0, dtype=np.float32).reshape(1, 2, 3))
    sf.manual_seed(0)
    runs = [float(flip(img).numpy()[0, 0, 0]) for _ in range(2000)]
    assert abs(np.mean(np.array(runs) == 2.0) - 0.3) < 0.04
    sf.manual_seed(0)
    assert [float(flip(img).numpy()[0, 0, 0]) for _ in range(2000)] == runs


def test_random_crops_with_their_params_match_torchvision():
    sf.manual_seed(3)
    img = pil_rgb()
    for _ in range(20):
        i, j, h, w = T.RandomCrop.get_params(img, (10, 12))
        assert 0 <= i <= 23 - 10 and 0 <= j <= 31 - 12 and (h, w) == (10, 12)
        same(F.crop(img, i, j, h, w), TF.crop(img, i, j, h, w))
        ours, theirs = tensors(FLOAT)
        same(F.crop(ours, i - 5, j - 5, h, w), TF.crop(theirs, i - 5, j - 5, h, w))
        i, j, h, w = T.RandomResizedCrop.get_params(img, (0.2, 0.9), (0.5, 2.0))
        assert i >= 0 and i + h <= 23 and j >= 0 and j + w <= 31
        same(F.resized_crop(img, i, j, h, w, [16, 16]), TF.resized_crop(img, i, j, h, w, [16, 16]))
        same(F.resized_crop(ours, i, j, h, w, [16, 16]),
             TF.resized_crop(theirs, i, j, h, w, [16, 16]), atol=2e-6)
    assert T.RandomCrop(8)(img).size == (8, 8)
    assert T.RandomCrop(30, pad_if_needed=True)(img).size == (30, 30)
    assert T.RandomResizedCrop(12)(img).size == (12, 12)
    with pytest.raises(sf.ShapeError, match="larger than the input image"):
        T.RandomCrop(40)(img)


def test_random_resized_crop_area_follows_scale():
    sf.manual_seed(0)
    img = Image.new("RGB", (100, 100))
    areas = [h * w / 1e4 for _, _, h, w in
             (T.RandomResizedCrop.get_params(img, (0.2, 0.6), (3 / 4, 4 / 3))
              for _ in range(500))]
    assert min(areas) > 0.18 and max(areas) < 0.62 and abs(np.mean(areas) - 0.4) < 0.03


@pytest.mark.parametrize("fn,factor", [("adjust_brightness", 1.4), ("adjust_contrast", 0.6),
                                       ("adjust_saturation", 1.7), ("adjust_hue", 0.2),
                                       ("adjust_hue", -0.45)])
def test_color_adjustments_match_torchvision(fn, factor):
    same(getattr(F, fn)(pil_rgb(), factor), getattr(TF, fn)(pil_rgb(), factor))
    ours, theirs = tensors(FLOAT)
    same(getattr(F, fn)(ours, factor), getattr(TF, fn)(theirs, factor), atol=1e-5)
    ours, theirs = tensors(RGB.transpose(2, 0, 1).copy())
    got, want = getattr(F, fn)(ours, factor), getattr(TF, fn)(theirs, factor)
    same(got, want, atol=1)
    assert (arr(got) != arr(want)).mean() < 0.01


def test_color_jitter_draws_from_shapeflows_generator():
    jitter = T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    sf.manual_seed(5)
    first = arr(jitter(pil_rgb()))
    sf.manual_seed(5)
    assert np.array_equal(arr(jitter(pil_rgb())), first)
    assert not np.array_equal(arr(jitter(pil_rgb())), first)
    order, b, c, s, h = T.ColorJitter.get_params(jitter.brightness, jitter.contrast,
                                                 jitter.saturation, jitter.hue)
    assert sorted(order) == [0, 1, 2, 3] and 0.6 <= b <= 1.4 and -0.1 <= h <= 0.1
    assert T.ColorJitter().brightness is None
    with pytest.raises(sf.ShapeError, match="hue"):
        T.ColorJitter(hue=0.7)


def test_compose_lambda_and_repr():
    pipeline = T.Compose([T.Resize(16), T.CenterCrop(14), T.ToTensor(),
                          T.Normalize([0.5] * 3, [0.25] * 3), T.Lambda(lambda t: t * 2)])
    theirs = TT.Compose([TT.Resize(16), TT.CenterCrop(14), TT.ToTensor(),
                         TT.Normalize([0.5] * 3, [0.25] * 3), TT.Lambda(lambda t: t * 2)])
    same(pipeline(pil_rgb()), theirs(pil_rgb()))
    assert "CenterCrop(size=(14, 14))" in repr(pipeline)


def test_v2_transforms_match_torchvision_v2():
    import torchvision.transforms.v2 as V
    same(v2.ToImage()(pil_rgb()), V.ToImage()(pil_rgb()).as_subclass(torch.Tensor))
    img = v2.ToImage()(pil_rgb())
    same(v2.ToDtype(sf.float32, scale=True)(img),
         V.ToDtype(torch.float32, scale=True)(V.ToImage()(pil_rgb())).as_subclass(torch.Tensor))
    pipeline = v2.Compose([v2.ToImage(), v2.ToDtype(sf.float32, scale=True),
                           v2.CenterCrop(12), v2.Normalize([0.5] * 3, [0.2] * 3)])
    theirs = V.Compose([V.ToImage(), V.ToDtype(torch.float32, scale=True),
                        V.CenterCrop(12), V.Normalize([0.5] * 3, [0.2] * 3)])
    same(pipeline(pil_rgb()), theirs(pil_rgb()).as_subclass(torch.Tensor))


def test_v2_applies_one_draw_to_every_image_of_a_sample():
    a, b = pil_rgb(), Image.fromarray(RGB[::-1].copy())
    crop = v2.RandomCrop(9)
    sf.manual_seed(1)
    out_a, out_b, label = crop(a, b, 3)
    assert label == 3 and out_a.size == out_b.size == (9, 9)
    # same window in both: b is a upside down, so flipping b's window back gives a's
    sf.manual_seed(1)
    i, j, h, w = T.RandomCrop.get_params(a, (9, 9))
    same(out_a, F.crop(a, i, j, h, w))
    same(out_b, F.crop(b, i, j, h, w))
    sample = {"image": sf.tensor(FLOAT[0]), "mask": sf.tensor(FLOAT[1]), "label": 1}
    out = v2.RandomHorizontalFlip(p=1.0)(sample)
    assert np.array_equal(out["image"].numpy(), FLOAT[0][..., ::-1])
    assert out["mask"] is sample["mask"] and out["label"] == 1  # only the first tensor


def test_bad_inputs_raise_shapeflow_errors():
    with pytest.raises(sf.DTypeError, match="PIL image or a shapeflow Tensor"):
        T.CenterCrop(3)(np.zeros((4, 4)))
    with pytest.raises(sf.ShapeError, match="padding_mode"):
        T.Pad(1, padding_mode="wrap")(pil_rgb())
    with pytest.raises(sf.DTypeError, match="callable"):
        T.Lambda(3)


def test_vision_never_imports_torch_and_names_pillow_when_missing():
    code = ("import sys, shapeflow.vision as tv; "
            "from shapeflow.vision import datasets, transforms, utils, io; "
            "transforms.ToTensor(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
    code = ("import sys; sys.modules['PIL'] = None; import shapeflow.vision as tv\n"
            "try:\n    tv.transforms.ToPILImage()(tv.utils.make_grid([__import__('shapeflow')"
            ".zeros(3, 2, 2)]))\nexcept ImportError as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "MissingPillowError" in out.stdout and "pip install pillow" in out.stdout, out


@pytest.mark.parametrize("size", [0, -1, (4, 0), (-2, 3)])
def test_resize_to_a_size_below_one_raises_as_torchvision(size):
    with pytest.raises(RuntimeError, match="greater than 0"):
        tv.transforms.Resize(size)(torch.zeros(3, 4, 4))
    with pytest.raises(sf.ShapeError, match="greater than 0") as e:
        T.Resize(size)(sf.zeros(3, 4, 4))
    assert isinstance(e.value, RuntimeError)
