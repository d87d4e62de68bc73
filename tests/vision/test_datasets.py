"""shapeflow.vision.datasets against torchvision.datasets on small files in the real formats."""

import collections
import gzip
import hashlib
import os
import pickle
import urllib.error
import urllib.request

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.vision import datasets, transforms

from .torchvision_oracle import import_torchvision

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
tv = import_torchvision()

RNG = np.random.default_rng(0)


def _idx(path, a: np.ndarray, code: int = 8) -> None:
    header = (code * 256 + a.ndim).to_bytes(4, "big") + b"".join(
        s.to_bytes(4, "big") for s in a.shape)
    with open(path, "wb") as f:
        f.write(header + a.tobytes())


def _mnist(root, name="MNIST", n=(7, 5), gz=False):
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    for prefix, count in zip(("train", "t10k"), n):
        images = RNG.integers(0, 256, (count, 28, 28), dtype=np.uint8)
        labels = RNG.integers(0, 10, count, dtype=np.uint8)
        _idx(raw / f"{prefix}-images-idx3-ubyte", images)
        _idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
    if gz:
        for path in list(raw.iterdir()):
            with open(path, "rb") as f, gzip.open(str(path) + ".gz", "wb") as out:
                out.write(f.read())
            path.unlink()
    return root


def _same_sample(ours, theirs) -> None:
    (img, target), (timg, ttarget) = ours, theirs
    assert target == ttarget and type(target) is type(ttarget)
    if isinstance(timg, Image.Image):
        assert img.mode == timg.mode and np.array_equal(np.asarray(img), np.asarray(timg))
    else:
        np.testing.assert_array_equal(img.numpy(), timg.numpy())


@pytest.mark.parametrize("name", ["MNIST", "FashionMNIST"])
@pytest.mark.parametrize("train", [True, False])
def test_mnist_reads_the_idx_files_as_torchvision(tmp_path, name, train):
    root = _mnist(tmp_path, name)
    ours = getattr(datasets, name)(str(root), train=train)
    theirs = getattr(tv.datasets, name)(str(root), train=train)
    assert len(ours) == len(theirs) and ours.classes == theirs.classes
    assert ours.class_to_idx == theirs.class_to_idx
    np.testing.assert_array_equal(ours.data.numpy(), theirs.data.numpy())
    np.testing.assert_array_equal(ours.targets.numpy(), theirs.targets.numpy())
    for i in range(len(ours)):
        _same_sample(ours[i], theirs[i])
    with_t = getattr(datasets, name)(root, train=train, transform=transforms.ToTensor(),
                                     target_transform=lambda t: t + 1)
    _same_sample(with_t[2], getattr(tv.datasets, name)(
        root, train=train, transform=tv.transforms.ToTensor(), target_transform=lambda t: t + 1)[2])
    assert repr(with_t).splitlines()[:3] == repr(theirs).splitlines()[:3]


def test_mnist_reads_gzipped_idx_files(tmp_path):
    plain = datasets.MNIST(_mnist(tmp_path / "a", n=(4, 3)))
    RNG.bit_generator.state = np.random.default_rng(0).bit_generator.state
    zipped = datasets.MNIST(_mnist(tmp_path / "b", n=(4, 3), gz=True))
    RNG.bit_generator.state = np.random.default_rng(0).bit_generator.state
    again = datasets.MNIST(_mnist(tmp_path / "c", n=(4, 3)))
    assert len(zipped) == 4
    np.testing.assert_array_equal(zipped.data.numpy(), again.data.numpy())
    assert plain.data.shape == (4, 28, 28)


def test_mnist_missing_and_corrupt_files_raise_dataset_errors(tmp_path):
    with pytest.raises(datasets.DatasetError, match="download=True") as info:
        datasets.MNIST(tmp_path)
    assert isinstance(info.value, RuntimeError)  # torchvision raises RuntimeError here
    root = _mnist(tmp_path)
    (root / "MNIST" / "raw" / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x09\x09")
    with pytest.raises(datasets.DatasetError, match="idx file"):
        datasets.MNIST(root)


def _offline(monkeypatch):
    calls = []

    def urlopen(*args, **kwargs):
        calls.append(args[0].full_url if hasattr(args[0], "full_url") else args[0])
        raise urllib.error.URLError("no network")
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return calls


def test_download_offline_is_a_clear_error(tmp_path, monkeypatch):
    calls = _offline(monkeypatch)
    with pytest.raises(datasets.DownloadError, match="could not download") as info:
        datasets.MNIST(tmp_path, download=True)
    assert isinstance(info.value, sf.ShapeflowError) and "no network" in str(info.value)
    assert calls == [m + "train-images-idx3-ubyte.gz" for m in datasets.MNIST.mirrors]
    with pytest.raises(datasets.DownloadError, match="cifar-10-python.tar.gz"):
        datasets.CIFAR10(tmp_path, download=True)
    assert not any(p.name.endswith(".part") for p in tmp_path.rglob("*"))


def test_download_is_skipped_when_the_files_are_there(tmp_path, monkeypatch):
    calls = _offline(monkeypatch)
    assert len(datasets.MNIST(_mnist(tmp_path), download=True)) == 7
    root = _cifar(tmp_path / "c", datasets.CIFAR10)
    assert len(_checked(datasets.CIFAR10, root)(root, download=True)) == 5 * 3
    assert calls == []


def _batch(n, fine=False):
    data = RNG.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = RNG.integers(0, 100 if fine else 10, n).tolist()
    return {"data": data, ("fine_labels" if fine else "labels"): labels,
            "filenames": [f"{i}.png" for i in range(n)]}


def _cifar(root, cls):
    folder = root / cls.base_folder
    folder.mkdir(parents=True)
    fine = cls.base_folder == "cifar-100-python"
    for name, _ in cls.train_list:
        (folder / name).write_bytes(pickle.dumps(_batch(3 if not fine else 6, fine)))
    for name, _ in cls.test_list:
        (folder / name).write_bytes(pickle.dumps(_batch(4, fine)))
    key = cls.meta["key"]
    names = [f"class{i}" for i in range(100 if fine else 10)]
    (folder / cls.meta["filename"]).write_bytes(pickle.dumps({key: names}))
    return root


def _checked(cls, root):
    """cls with md5s of the files under root: torchvision's checks pass on the small files."""
    def md5(name):
        return hashlib.md5((root / cls.base_folder / name).read_bytes()).hexdigest()
    return type(cls.__name__, (cls,), {
        "train_list": [[n, md5(n)] for n, _ in cls.train_list],
        "test_list": [[n, md5(n)] for n, _ in cls.test_list],
        "meta": {**cls.meta, "md5": md5(cls.meta["filename"])}})


@pytest.mark.parametrize("name", ["CIFAR10", "CIFAR100"])
@pytest.mark.parametrize("train", [True, False])
def test_cifar_reads_the_pickled_batches_as_torchvision(tmp_path, name, train):
    root = _cifar(tmp_path, getattr(datasets, name))
    ours = _checked(getattr(datasets, name), root)(root, train=train)
    theirs = _checked(getattr(tv.datasets, name), root)(str(root), train=train)
    assert len(ours) == len(theirs) and ours.classes == theirs.classes
    assert ours.targets == theirs.targets and np.array_equal(ours.data, theirs.data)
    for i in range(len(ours)):
        _same_sample(ours[i], theirs[i])
    ours.transform, theirs.transform = transforms.ToTensor(), tv.transforms.ToTensor()
    _same_sample(ours[1], theirs[1])


def test_cifar_checks_md5_and_refuses_foreign_pickles(tmp_path):
    root = _cifar(tmp_path, datasets.CIFAR10)
    with pytest.raises(datasets.DatasetError, match="not found or corrupted"):
        datasets.CIFAR10(root)  # the small files do not have the real md5s
    checked = _checked(datasets.CIFAR10, root)
    foreign = pickle.dumps(collections.OrderedDict())  # a class no CIFAR batch holds
    (root / "cifar-10-batches-py" / "test_batch").write_bytes(foreign)
    with pytest.raises(datasets.DatasetError, match="not found or corrupted"):
        checked(root, train=False)
    evil = _checked(datasets.CIFAR10, root)
    with pytest.raises(datasets.DatasetError, match="refusing"):
        evil(root, train=False)


def _folder(root):
    for cls, files in {"dog": ["b.png", "a.jpg", "sub/c.PNG", "notes.txt"],
                       "cat": ["z.bmp", "y.png"], "empty_not": ["x.png"]}.items():
        for f in files:
            path = root / cls / f
            path.parent.mkdir(parents=True, exist_ok=True)
            if f.endswith(".txt"):
                path.write_text("not an image")
                continue
            img = Image.fromarray(RNG.integers(0, 256, (6, 5, 3), dtype=np.uint8))
            fmt = {"png": "PNG", "jpg": "JPEG", "bmp": "BMP"}[f.rsplit(".", 1)[1].lower()]
            (img.convert("L") if f == "y.png" else img).save(path, format=fmt)
    (root / "stray.png").write_bytes(b"")  # files at the top are no class
    return root


def test_image_folder_matches_torchvision(tmp_path):
    root = _folder(tmp_path)
    ours, theirs = datasets.ImageFolder(str(root)), tv.datasets.ImageFolder(str(root))
    assert ours.classes == theirs.classes and ours.class_to_idx == theirs.class_to_idx
    assert ours.samples == theirs.samples and ours.imgs == theirs.imgs
    assert ours.targets == theirs.targets and len(ours) == len(theirs) == 6
    for i in range(len(ours)):
        _same_sample(ours[i], theirs[i])


def test_dataset_folder_extensions_is_valid_file_and_loaders(tmp_path):
    root = _folder(tmp_path)

    def loader(path):
        return os.path.getsize(path)
    for kwargs in ({"extensions": (".png",)}, {"extensions": ".png"},
                   {"is_valid_file": lambda p: "a" in os.path.basename(p)}):
        allow = {"allow_empty": True}
        ours = datasets.DatasetFolder(root, loader, **kwargs, **allow)
        theirs = tv.datasets.DatasetFolder(str(root), loader, **kwargs, **allow)
        assert ours.samples == theirs.samples and [ours[i] for i in range(len(ours))] == \
            [theirs[i] for i in range(len(theirs))]
    with pytest.raises(datasets.FolderNotFoundError, match="no valid file for the classes"):
        datasets.DatasetFolder(root, loader, extensions=(".bmp",))
    with pytest.raises(FileNotFoundError, match="class folder"):
        datasets.ImageFolder(root / "cat")
    with pytest.raises(sf.ShapeError, match="Both extensions and is_valid_file"):
        datasets.DatasetFolder(root, loader)


def test_fake_data_shapes_types_and_repeatability():
    ours = datasets.FakeData(size=5, image_size=(3, 8, 6), num_classes=4)
    theirs = tv.datasets.FakeData(size=5, image_size=(3, 8, 6), num_classes=4)
    (img, target), (timg, ttarget) = ours[2], theirs[2]
    assert len(ours) == len(theirs) and img.size == timg.size and img.mode == timg.mode
    assert type(target) is type(ttarget) and 0 <= target < 4
    assert np.array_equal(np.asarray(ours[2][0]), np.asarray(img)) and ours[2][1] == target
    assert not np.array_equal(np.asarray(ours[3][0]), np.asarray(img))
    gray = datasets.FakeData(2, (1, 4, 4), transform=transforms.ToTensor())[0][0]
    assert gray.shape == (1, 4, 4) and gray.dtype == sf.float32
    with pytest.raises(IndexError):
        ours[5]
