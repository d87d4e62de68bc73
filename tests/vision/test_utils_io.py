"""shapeflow.vision.utils (make_grid, save_image) and .io (read_image) against torchvision / PIL."""

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.vision import io, utils

from .torchvision_oracle import import_torchvision

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
tv = import_torchvision()

RNG = np.random.default_rng(0)
BATCH = (RNG.standard_normal((5, 3, 6, 7)) * 2).astype(np.float32)


@pytest.mark.parametrize("kwargs", [
    {}, {"nrow": 2}, {"nrow": 3, "padding": 0}, {"padding": 3, "pad_value": 0.5},
    {"normalize": True}, {"normalize": True, "scale_each": True},
    {"normalize": True, "value_range": (-1.0, 1.5)},
    {"normalize": True, "value_range": (-1.0, 1.5), "scale_each": True, "nrow": 4},
])
def test_make_grid_matches_torchvision(kwargs):
    got = utils.make_grid(sf.tensor(BATCH), **kwargs)
    want = tv.utils.make_grid(torch.from_numpy(BATCH.copy()), **kwargs)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("a", [BATCH[:1], BATCH[0], BATCH[0, :1], BATCH[0, 0], BATCH[:, :1]])
def test_make_grid_of_one_image_gray_images_and_lists(a):
    got = utils.make_grid(sf.tensor(a), nrow=2)
    want = tv.utils.make_grid(torch.from_numpy(a.copy()), nrow=2)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    as_list = utils.make_grid([sf.tensor(x) for x in BATCH], nrow=4)
    np.testing.assert_array_equal(as_list.numpy(), tv.utils.make_grid(
        [torch.from_numpy(x.copy()) for x in BATCH], nrow=4).numpy())


def test_make_grid_errors_are_shapeflow_errors():
    with pytest.raises(sf.ShapeError, match="shapes differ"):
        utils.make_grid([sf.zeros(3, 2, 2), sf.zeros(3, 2, 3)])
    with pytest.raises(sf.DTypeError, match="tuple"):
        utils.make_grid(sf.tensor(BATCH), normalize=True, value_range=[0, 1])


@pytest.mark.parametrize("kwargs", [{}, {"nrow": 2, "normalize": True}])
def test_save_image_writes_torchvisions_png(tmp_path, kwargs):
    images = RNG.random((3, 3, 5, 4), dtype=np.float32)
    utils.save_image(sf.tensor(images), tmp_path / "ours.png", **kwargs)
    tv.utils.save_image(torch.from_numpy(images.copy()), tmp_path / "theirs.png", **kwargs)
    ours, theirs = (np.asarray(Image.open(tmp_path / f"{n}.png")) for n in ("ours", "theirs"))
    assert ours.shape == theirs.shape and np.array_equal(ours, theirs)
    utils.save_image(sf.tensor(images), tmp_path / "ours.bin", format="PNG")
    assert Image.open(tmp_path / "ours.bin").format == "PNG"


PIXELS = RNG.integers(0, 256, (9, 11, 4), dtype=np.uint8)


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA"])
def test_read_image_reads_pngs_unchanged_as_uint8_chw(tmp_path, mode):
    img = Image.fromarray(PIXELS).convert(mode)
    img.save(tmp_path / "x.png")
    got = io.read_image(tmp_path / "x.png")
    want = np.asarray(img)
    want = want[:, :, None] if want.ndim == 2 else want
    assert got.dtype == sf.uint8 and tuple(got.shape) == (want.shape[2], 9, 11)
    np.testing.assert_array_equal(got.numpy(), want.transpose(2, 0, 1))


@pytest.mark.parametrize("mode,channels", [("GRAY", 1), ("GRAY_ALPHA", 2), ("RGB", 3),
                                           ("RGB_ALPHA", 4)])
def test_read_image_modes(tmp_path, mode, channels):
    Image.fromarray(PIXELS[:, :, :3]).save(tmp_path / "x.png")
    got = io.read_image(str(tmp_path / "x.png"), io.ImageReadMode[mode])
    pil_mode = {"GRAY": "L", "GRAY_ALPHA": "LA", "RGB": "RGB", "RGB_ALPHA": "RGBA"}[mode]
    want = np.asarray(Image.open(tmp_path / "x.png").convert(pil_mode))
    want = want[:, :, None] if want.ndim == 2 else want
    assert got.shape == (channels, 9, 11)
    np.testing.assert_array_equal(got.numpy(), want.transpose(2, 0, 1))


def test_read_image_jpeg_and_palette_and_decode_image(tmp_path):
    Image.fromarray(PIXELS[:, :, :3]).save(tmp_path / "x.jpg", quality=90)
    got = io.read_image(tmp_path / "x.jpg")
    np.testing.assert_array_equal(got.numpy(),
                                  np.asarray(Image.open(tmp_path / "x.jpg")).transpose(2, 0, 1))
    Image.fromarray(PIXELS[:, :, :3]).convert("P").save(tmp_path / "p.png")
    palette = io.read_image(tmp_path / "p.png")
    assert palette.shape == (3, 9, 11)
    np.testing.assert_array_equal(palette.numpy(), np.asarray(
        Image.open(tmp_path / "p.png").convert("RGB")).transpose(2, 0, 1))
    data = io.read_file(tmp_path / "x.jpg")
    assert data.dtype == sf.uint8 and data.shape[0] == (tmp_path / "x.jpg").stat().st_size
    np.testing.assert_array_equal(io.decode_image(data).numpy(), got.numpy())


def test_write_png_round_trips_and_errors_are_clear(tmp_path):
    chw = sf.tensor(PIXELS.transpose(2, 0, 1).copy())
    io.write_png(chw, tmp_path / "w.png")
    np.testing.assert_array_equal(io.read_image(tmp_path / "w.png").numpy(), chw.numpy())
    with pytest.raises(io.ImageReadError, match="no such file"):
        io.read_image(tmp_path / "missing.png")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(io.ImageReadError, match="cannot decode"):
        io.read_image(tmp_path / "bad.png")
    with pytest.raises(sf.DTypeError, match="uint8"):
        io.write_png(sf.zeros(3, 2, 2), tmp_path / "f.png")
