"""Small real datasets bundled with shapeflow (no downloads): digits, and a text corpus.

The files live in `shapeflow/data/files/`; its README.md says where each came from.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

import numpy as np

from ..device import cpu
from ..dtypes import float32, int64
from ..errors import ShapeError
from ..tensor import Tensor
from .dataset import Dataset, TensorDataset

FILES = Path(__file__).parent / "files"
CORPORA = {"shakespeare": "shakespeare.txt.gz"}


@functools.lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(FILES / "digits.npz") as f:
        arrays = f["images"], f["labels"], f["test"]
    for a in arrays:
        a.flags.writeable = False  # cached: every call copies before handing out
    return arrays


def digits(split: str = "train", normalize: bool = True) -> TensorDataset:
    """The 8x8 handwritten digits (UCI, 1,797 images of 0-9): images [N, 1, 8, 8], labels [N].

    Images are float32: pixel counts 0..16 divided by 16 into [0, 1] (or left as 0..16 with
    `normalize=False`); labels are int64. `split` is "train" (1,437 images), "test" (360:
    36 of each digit) or "all" (1,797, in the file's order). The split is fixed: it was drawn
    once, stratified by class with NumPy's `default_rng(0)`, and is stored in the file, so it
    is the same on every machine and NumPy version.
    """
    images, labels, test = _digits_arrays()
    if split == "train":
        keep = ~test
    elif split == "test":
        keep = test
    elif split == "all":
        keep = np.ones_like(test)
    else:
        raise ShapeError(f"digits: split must be 'train', 'test' or 'all', got {split!r}")
    x = images[keep].astype(np.float32)[:, None, :, :]
    if normalize:
        x /= np.float32(16.0)
    y = labels[keep].astype(np.int64)
    return TensorDataset(Tensor._make(x, x.shape, float32, cpu),
                         Tensor._make(y, y.shape, int64, cpu))


@functools.lru_cache(maxsize=4)
def text_corpus(name: str = "shakespeare") -> str:
    """A bundled public-domain English text (str) for character-level language modelling.

    "shakespeare": Hamlet, Macbeth, Romeo and Juliet and The Tempest (Project Gutenberg
    texts, public domain), 517,571 ASCII characters, 76 distinct.
    """
    if name not in CORPORA:
        raise ShapeError(f"text_corpus: unknown corpus {name!r}; bundled: {', '.join(CORPORA)}")
    with gzip.open(FILES / CORPORA[name], "rb") as f:
        return f.read().decode("utf-8")


class CharDataset(Dataset):
    """Windows of a text as character ids: sample i is (x, y), x = ids[i:i+block_size] and y the
    same window shifted by one (the next character at each position), both int64 [block_size].

    The split is fixed: `train_ids` are the first 90% of the text's ids, `val_ids` the last 10%
    (`val_fraction`); `split="train"` or `"val"` draws the windows from that part only, and
    `split=None` from the whole text. `vocab` (the sorted characters of the whole text, or the
    one given), `stoi`, `itos`, `encode` and `decode` map between text and ids.
    """

    def __init__(self, text: str, block_size: int, split: str | None = None, vocab=None,
                 val_fraction: float = 0.1) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ShapeError(f"CharDataset: block_size must be a positive int, got {block_size!r}")
        if split not in (None, "train", "val"):
            raise ShapeError(f"CharDataset: split must be None, 'train' or 'val', got {split!r}")
        if not 0 <= val_fraction < 1:
            raise ShapeError(f"CharDataset: val_fraction must lie in [0, 1), got {val_fraction}")
        self.vocab = sorted(set(text)) if vocab is None else list(vocab)
        self.stoi = {ch: i for i, ch in enumerate(self.vocab)}
        self.itos = dict(enumerate(self.vocab))
        self.block_size = block_size
        self.split = split
        self.ids = np.asarray(self.encode(text), dtype=np.int64)
        cut = int(len(self.ids) * (1 - val_fraction))
        self.train_ids, self.val_ids = self.ids[:cut], self.ids[cut:]
        self.data = {None: self.ids, "train": self.train_ids, "val": self.val_ids}[split]
        if len(self.data) <= block_size:
            raise ShapeError(
                f"CharDataset: {len(self.data)} characters"
                f"{'' if split is None else ' in the ' + split + ' split'} hold no window of "
                f"block_size + 1 = {block_size + 1}",
                hint="use a longer text or a smaller block_size",
            )
        self._offsets = np.arange(block_size, dtype=np.int64)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """Character ids of `text`; ValueError names a character outside the vocabulary."""
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as e:
            raise ShapeError(f"CharDataset.encode: character {e.args[0]!r} is not in the "
                             "vocabulary") from None

    def decode(self, ids) -> str:
        """The text of a sequence of ids (a list, a NumPy array or a 1-d tensor)."""
        if isinstance(ids, Tensor):
            ids = ids._need_data("decode")
        return "".join(self.itos[int(i)] for i in np.asarray(ids).reshape(-1))

    def __len__(self) -> int:
        return len(self.data) - self.block_size

    def __getitem__(self, index):
        n = len(self)
        i = int(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {index} out of range for a dataset of {n} windows")
        x = self.data[i:i + self.block_size]
        y = self.data[i + 1:i + 1 + self.block_size]
        return (Tensor._make(x, x.shape, int64, cpu), Tensor._make(y, y.shape, int64, cpu))

    def _batch(self, indices: np.ndarray) -> list:
        # [B, T] windows by one fancy-index: rows start at the indices, columns step by one
        if len(indices) and (indices.min() < 0 or indices.max() >= len(self)):
            raise IndexError(f"window index out of range for a dataset of {len(self)} windows")
        rows = indices[:, None] + self._offsets
        x, y = self.data[rows], self.data[rows + 1]
        return [Tensor._make(x, x.shape, int64, cpu), Tensor._make(y, y.shape, int64, cpu)]


def char_lm(block_size: int, split: str = "train", corpus: str = "shakespeare") -> CharDataset:
    """A CharDataset of a bundled corpus: "train" is its first 90%, "val" the last 10%.

    Both splits share the vocabulary of the whole text, so ids mean the same in each.
    """
    if split not in ("train", "val"):
        raise ShapeError(f"char_lm: split must be 'train' or 'val', got {split!r}")
    return CharDataset(text_corpus(corpus), block_size, split=split)
