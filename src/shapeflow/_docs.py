"""One-line docstrings for the public functions defined without one (PyTorch keeps its own
the same way, in torch/_torch_docs.py): `help(sf.empty)` says what it does. A docstring
written at the definition wins; these fill only the gaps."""

from __future__ import annotations

import contextlib
import sys

_UNARY = {
    "abs": "|x|, elementwise.", "ceil": "The smallest integer >= x, elementwise.",
    "cos": "cos(x), elementwise.", "exp": "e ** x, elementwise.",
    "expm1": "e ** x - 1, elementwise, exact for small x.",
    "floor": "The largest integer <= x, elementwise.", "log": "The natural log of x, elementwise.",
    "log1p": "log(1 + x), elementwise, exact for small x.", "neg": "-x, elementwise.",
    "negative": "-x, elementwise (an alias of neg).", "reciprocal": "1 / x, elementwise.",
    "round": "x rounded to the nearest integer (halves to even), elementwise.",
    "rsqrt": "1 / sqrt(x), elementwise.", "sign": "-1, 0 or 1 by the sign of x, elementwise.",
    "sin": "sin(x), elementwise.", "sqrt": "The square root of x, elementwise.",
    "square": "x * x, elementwise.", "tanh": "tanh(x), elementwise.",
    "trunc": "x rounded toward zero, elementwise.",
    "relu": "max(x, 0), elementwise.", "sigmoid": "1 / (1 + e ** -x), elementwise.",
    "silu": "x * sigmoid(x), elementwise (swish).",
    "gelu": "x * Phi(x), elementwise; approximate='tanh' for the tanh formula.",
    "softplus": "log(1 + e ** (beta * x)) / beta, elementwise; linear above threshold.",
    "elu": "x if x > 0 else alpha * (e ** x - 1), elementwise.",
    "leaky_relu": "x if x > 0 else negative_slope * x, elementwise.",
    "isfinite": "Whether each element is finite (bool).", "isinf": "Whether each element is "
    "+-inf (bool).", "isnan": "Whether each element is NaN (bool).",
    "logical_not": "not x, elementwise (bool).",
}
_BINARY = {
    "add": "a + alpha * b, broadcast.", "sub": "a - alpha * b, broadcast.",
    "subtract": "a - alpha * b, broadcast (an alias of sub).",
    "rsub": "b - alpha * a, broadcast (a reversed sub).", "mul": "a * b, broadcast.",
    "multiply": "a * b, broadcast (an alias of mul).",
    "div": "a / b, broadcast; rounding_mode 'trunc' or 'floor' for integer division.",
    "divide": "a / b, broadcast (an alias of div).",
    "true_divide": "a / b, broadcast, in floating point (an alias of div).",
    "floor_divide": "a // b, broadcast: the quotient rounded down.",
    "fmod": "The remainder of a / b with the sign of a (C's fmod), broadcast.",
    "remainder": "a % b with the sign of b (Python's %), broadcast.",
    "pow": "a ** b, broadcast.", "maximum": "The larger of a and b, elementwise, broadcast.",
    "minimum": "The smaller of a and b, elementwise, broadcast.",
    "eq": "a == b, elementwise, broadcast (bool).", "ne": "a != b, elementwise (bool).",
    "lt": "a < b, elementwise (bool).", "le": "a <= b, elementwise (bool).",
    "gt": "a > b, elementwise (bool).", "ge": "a >= b, elementwise (bool).",
    "less": "a < b, elementwise (bool; an alias of lt).",
    "less_equal": "a <= b, elementwise (bool; an alias of le).",
    "greater": "a > b, elementwise (bool; an alias of gt).",
    "greater_equal": "a >= b, elementwise (bool; an alias of ge).",
    "logical_and": "a and b, elementwise (bool).", "logical_or": "a or b, elementwise (bool).",
    "logical_xor": "a xor b, elementwise (bool).",
    "clamp": "x limited to [min, max] (either may be None or a tensor).",
    "clip": "x limited to [min, max] (an alias of clamp).",
}
_REDUCE = {
    "sum": "The sum over dim (all dims when None); keepdim keeps them as size 1.",
    "mean": "The mean over dim (all dims when None); keepdim keeps them as size 1.",
    "prod": "The product over dim (all dims when None).",
    "std": "The standard deviation over dim, with Bessel's correction unless correction=0.",
    "amax": "The maximum over dim (all dims when empty); the gradient splits among ties.",
    "amin": "The minimum over dim (all dims when empty); the gradient splits among ties.",
    "argmin": "The index of the minimum over dim (of the flattened tensor when None).",
    "all": "Whether every element (over dim) is true.",
    "any": "Whether any element (over dim) is true.",
    "cumsum": "The running sum along dim.",
}
_MOVEMENT = {
    "reshape": "x with a new shape of the same numel (a view when the layout allows).",
    "view": "x seen with a new shape of the same numel, sharing its storage.",
    "flatten": "x with dims start_dim..end_dim merged into one.",
    "unflatten": "x with dim split into sizes.",
    "squeeze": "x without its size-1 dims (only dim, when given).",
    "unsqueeze": "x with a size-1 dim inserted at dim.",
    "permute": "x with its dims reordered (a view).",
    "transpose": "x with dims dim0 and dim1 swapped (a view).",
    "swapaxes": "x with two dims swapped (an alias of transpose).",
    "swapdims": "x with two dims swapped (an alias of transpose).",
    "movedim": "x with dims moved from source to destination positions (a view).",
    "moveaxis": "x with dims moved from source to destination (an alias of movedim).",
    "expand": "x broadcast to a larger shape without copying (-1 keeps a size).",
    "broadcast_to": "x broadcast to shape without copying.",
    "narrow": "The slice start:start+length of x along dim (a view).",
    "select": "x indexed at index along dim, that dim removed (a view).",
    "unbind": "The slices of x along dim, that dim removed, as a tuple.",
    "cat": "The tensors joined along an existing dim.",
    "concat": "The tensors joined along an existing dim (an alias of cat).",
    "concatenate": "The tensors joined along an existing dim (an alias of cat).",
    "stack": "The tensors joined along a new dim.",
    "split": "x cut along dim into pieces of a size, or of the sizes listed.",
    "chunk": "x cut along dim into `chunks` pieces of equal size (the last may be smaller).",
    "clone": "A copy of x with its own storage; gradients flow back to x.",
    "contiguous": "x in row-major layout (x itself when it already is).",
    "flip": "x with the order of elements reversed along dims.",
    "repeat": "x tiled sizes[i] times along each dim.",
    "tril": "x with elements above the diagonal-th diagonal zeroed.",
    "triu": "x with elements below the diagonal-th diagonal zeroed.",
    "gather": "Values of x along dim at index: out[i][j] = x[i][index[i][j]] for dim 1.",
    "scatter_add": "x with src added at index along dim (duplicates accumulate).",
    "index_select": "The entries of x at index (1-D) along dim.",
    "index_add": "x with alpha * source added at index along dim.",
    "masked_fill": "x with value where mask (broadcast) is true.",
    "cast": "x converted to dtype (a copy when the dtype changes).",
}
_FACTORIES = {
    "empty": "An uninitialized tensor of the size given (names such as 'B' make a symbolic "
    "dim on the meta device).",
    "zeros": "A tensor of zeros of the size given.", "ones": "A tensor of ones of the size given.",
    "full": "A tensor of the size given filled with fill_value.",
    "empty_like": "An uninitialized tensor of t's shape (and dtype and device unless given).",
    "zeros_like": "Zeros of t's shape (and dtype and device unless given).",
    "ones_like": "Ones of t's shape (and dtype and device unless given).",
    "full_like": "fill_value in t's shape (and dtype and device unless given).",
    "rand_like": "Uniform random numbers in [0, 1) of t's shape.",
    "randn_like": "Standard normal random numbers of t's shape.",
    "randperm": "A random permutation of 0 .. n-1 (int64).",
    "arange": "Numbers from start to end (excluded) by step: arange(5) is 0 .. 4.",
    "linspace": "`steps` numbers evenly spaced from start to end, both included.",
    "eye": "An n x m identity matrix (m = n when None).",
    "initial_seed": "The seed the default generator started from.",
    "seed": "Seed the default generator from the OS's entropy; the seed used.",
    "is_grad_enabled": "Whether operations record the graph for backward now.",
}
DOCS = {**_UNARY, **_BINARY, **_REDUCE, **_MOVEMENT, **_FACTORIES}


def apply(namespace: dict) -> None:
    """Give each function of `namespace` (and nn.functional's ops) its line, if it has none."""
    activation = sys.modules.get(__package__ + ".ops.activation")
    extra = {n: getattr(activation, n) for n in ("elu", "leaky_relu")
             if activation is not None and hasattr(activation, n)}
    for name, obj in [*namespace.items(), *extra.items()]:
        doc = DOCS.get(name)
        if doc and callable(obj) and not (getattr(obj, "__doc__", None) or "").strip():
            with contextlib.suppress(AttributeError, TypeError):  # a builtin: nothing to fill
                obj.__doc__ = doc
