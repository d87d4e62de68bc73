"""embedding (rows of a table at integer indices) and one_hot."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeIndexError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..base import Op, Saved, apply, reads_data
from ..registry import public


class Embedding(Op):
    """weight[input]: rows of the table picked by integer indices."""

    name = "embedding"

    def __init__(self, padding_idx: int | None = None, scale_grad_by_freq: bool = False) -> None:
        self.padding_idx, self.by_freq = padding_idx, scale_grad_by_freq

    def infer(self, idx, w):
        ops = [("input", describe(idx)), ("weight", describe(w))]
        if not idx.dtype.is_integer:
            raise DTypeError(
                f"embedding: input must hold integer indices, got {idx.dtype}",
                op="embedding", operands=ops,
                hint=f"embedding indices must be integers; got {idx.dtype} — did you pass "
                "the embeddings instead of token ids?" if idx.dtype.is_floating_point else
                "convert the indices with .long()")
        if w.ndim != 2:
            raise ShapeRuntimeError(
                f"embedding: weight must be 2-D [num_embeddings, embedding_dim], got "
                f"{format_shape(w.shape)}", op="embedding", operands=ops)
        self.num = w.shape[0]
        return tuple(idx.shape) + (w.shape[1],), w.dtype

    def saved(self, idx, w, out):
        return (Saved.input(0),) if w.requires_grad else ()

    def forward(self, idx, w):
        _check_indices("embedding", idx, self.num, "num_embeddings",
                       f"indices must be in [0, {self.num - 1}]: check the vocabulary size "
                       "(num_embeddings) against the largest token id")
        return self.device.xp.take(w, idx, axis=0)

    def backward(self, g):
        (idx,) = self.saved_tensors
        return None, apply(EmbeddingBackward(self.num, self.padding_idx, self.by_freq), idx, g)


class EmbeddingBackward(Op):
    """d weight of embedding: a zero table with each g row added at its index."""

    name = "embedding_backward"

    def __init__(self, num: int, padding_idx: int | None, by_freq: bool = False) -> None:
        self.num, self.padding_idx, self.by_freq = num, padding_idx, by_freq

    def infer(self, idx, g):
        return (self.num, g.shape[-1]), g.dtype

    def saved(self, idx, g, out):
        return (Saved.input(0),)

    def forward(self, idx, g):
        xp = self.device.xp
        d = g.shape[-1]
        flat = idx.reshape(-1)
        # a zero table with each g row added at its index (repeated indices summed in order)
        dw = self.device.kernels.embedding_backward(flat, g.reshape(-1, d), self.num)
        if self.by_freq:  # each row's gradient divided by how often its index occurs
            counts = xp.bincount(flat, minlength=self.num)
            dw /= xp.maximum(counts, 1).astype(dw.dtype)[:, None]
        if self.padding_idx is not None:
            dw[self.padding_idx] = 0
        return dw

    def backward(self, gg):
        (idx,) = self.saved_tensors
        out = apply(Embedding(), idx, gg)
        if self.by_freq:
            xp, ids = idx.device.xp, idx._data
            counts = xp.bincount(ids.reshape(-1), minlength=self.num)
            inv = (1.0 / xp.maximum(counts, 1)[ids]).astype(gg.dtype.np)
            out = out * Tensor._make(inv, tuple(idx.shape), gg.dtype, idx.device).unsqueeze(-1)
        if self.padding_idx is not None:
            out = out * (idx != self.padding_idx).unsqueeze(-1)
        return None, out


def _check_indices(op: str, idx, n: int, what: str, hint: str) -> None:
    """ShapeError (naming the worst index) if any index is outside [0, n)."""
    if idx.size == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    if lo >= 0 and hi < n:
        return
    bad = hi if hi >= n else lo
    raise ShapeIndexError(
        f"{op}: index {bad} is out of range for {what}={n} (max index {hi}, min index {lo})",
        op=op, operands=[("input", f"{format_shape(idx.shape)} {idx.dtype}")], hint=hint)


@public(functional=True)
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of weight [num_embeddings, dim] at the integer indices input; shape input + [dim].

    padding_idx's row gets no gradient; max_norm renormalizes the rows used, in place (as
    PyTorch); `sparse` is accepted, and the gradient is dense.
    """
    if padding_idx is not None:
        n = weight.shape[0]
        if type(n) is int and not -n <= padding_idx < n:
            raise ShapeRuntimeError(f"embedding: padding_idx {padding_idx} is out of range for "
                                    f"num_embeddings={n}", op="embedding")
        if padding_idx < 0:
            padding_idx += n
    if max_norm is not None:
        if weight._data is not None and input._data is not None:
            _renorm_rows(input, weight, max_norm, norm_type)
        else:
            reads_data("embedding's max_norm renormalization")
    return apply(Embedding(padding_idx, scale_grad_by_freq), input, weight)


def _renorm_rows(input: Tensor, weight: Tensor, max_norm: float, norm_type: float) -> None:
    """PyTorch's embedding_renorm_: rows used whose norm exceeds max_norm are scaled down."""
    if not input.dtype.is_integer:
        return  # the Embedding op raises the DTypeError
    _check_indices("embedding", input._data, weight.shape[0], "num_embeddings",
                   "indices must be smaller than num_embeddings")
    xp = weight.device.xp
    rows = xp.unique(input._data)
    w = weight._data
    norms = xp.linalg.norm(w[rows].astype(_dt.float64.np), ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        w[rows[big]] *= (max_norm / (norms[big] + 1e-7)).astype(w.dtype)[:, None]
        weight._version[0] += 1


class OneHot(Op):
    name = "one_hot"
    differentiable = False

    def __init__(self, num_classes: int) -> None:
        self.num_classes = num_classes

    def infer(self, x):
        if not x.dtype.is_integer:
            raise DTypeError(f"one_hot: input must hold integer class indices, got {x.dtype}",
                             op="one_hot", operands=[("input", describe(x))],
                             hint="convert with .long()")
        return tuple(x.shape) + (self.num_classes,), _dt.int64

    def forward(self, x):
        c = self.num_classes
        _check_indices("one_hot", x, c, "num_classes",
                       f"class indices must be in [0, {c - 1}]; pass a larger num_classes")
        xp = self.device.xp
        out = xp.zeros((x.size, c), _dt.int64.np)
        out[xp.arange(x.size), x.reshape(-1)] = 1
        return out.reshape(x.shape + (c,))


@public(sf=False, functional=True)
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding [..., num_classes]; num_classes=-1 takes max + 1 from the data."""
    if num_classes == -1:
        if tensor._data is None:
            raise ShapeRuntimeError("one_hot: num_classes=-1 needs data to find the class count",
                                    op="one_hot", operands=[("input", describe(tensor))],
                                    hint="pass num_classes= explicitly on the meta device")
        if tensor.numel() == 0:
            raise ShapeRuntimeError("one_hot: cannot infer num_classes from an empty tensor",
                                    op="one_hot", hint="pass num_classes=")
        num_classes = int(tensor._data.max()) + 1
    return apply(OneHot(num_classes), tensor)
