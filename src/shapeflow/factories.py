"""Tensor factories with PyTorch's names and signatures."""

from __future__ import annotations

import functools
import importlib
import math
import operator
import warnings

import numpy as np

from . import dtypes as _dt
from .device import cpu, get_default_device, get_device
from .errors import DeviceError, DTypeError, DTypeRuntimeError, ShapeError, ShapeRuntimeError
from .random import Generator, get_rng
from .tensor import Tensor, from_numpy, tensor  # noqa: F401  (re-exported)


def _size(size) -> tuple:
    """Sizes from `f(2, 3)`, `f((2, 3))` or `f([2, 3])`; strings become symbolic dims."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, str):
            from .symbolic import as_dim

            s = as_dim(s)
        elif isinstance(s, (bool, float)) or not _is_size(s):
            raise ShapeRuntimeError(f"sizes must be non-negative ints or dims, got {s!r}")
        elif type(s) is not int and isinstance(s, (int, np.integer)):
            s = int(s)
        if type(s) is int and s < 0:
            raise ShapeRuntimeError(f"sizes must be non-negative, got {s} in {tuple(size)}")
        out.append(s)
    return tuple(out)


def _is_size(s) -> bool:
    if isinstance(s, (int, np.integer)):
        return True
    from .symbolic import is_symbolic

    return is_symbolic(s)


class layout:  # noqa: N801  (PyTorch's name: torch.layout)
    """A tensor layout; shapeflow has one, `sf.strided` (dense arrays), as torch.strided."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"shapeflow.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickles as the module-level instance


strided = layout("strided")


def check_layout(value, op: str) -> None:
    """layout= as factories take it: None or sf.strided (torch.strided too, as ported code
    passes it along); sparse layouts do not exist here."""
    if value is not None and value is not strided and str(value) != "torch.strided":
        from .errors import ArgumentError

        raise ArgumentError(f"{op}: shapeflow tensors are dense: layout must be sf.strided or "
                            f"None, got {value!r}", op=op)


def _make(size, dtype, device, requires_grad, fill):
    """A tensor of `size` whose data `fill(shape, np_dtype)` makes on the host, then moves to
    the device (not called where the device does not compute: meta).

    With no dtype: the default float dtype; with no device: the default (`with sf.device`).
    """
    shape = _size(size)
    dt = _dt.default_float if dtype is None else _dt.get_dtype(dtype)
    dev = get_default_device() if device is None else get_device(device)
    if not dev.computes:
        out = Tensor._make(None, shape, dt, dev)
        from .autograd import grad_mode  # (meta only: the cpu path stays as it was)

        if not grad_mode.hot.quiet and grad_mode.state.tracer is not None:
            grad_mode.state.tracer.factory(out, fill)  # sf.compile replays it on cpu
    else:
        if any(type(s) is not int for s in shape):
            from .symbolic import Dim

            sym = next(s for s in shape if isinstance(s, Dim))
            raise ShapeRuntimeError(
                f"a {dev} tensor needs concrete sizes, got {list(shape)}",
                hint=f"bind {sym} to a number, or use device='meta' to trace with symbols",
            )
        try:
            data = dev.from_numpy(fill(shape, dt.np))
        except (MemoryError, ValueError) as e:  # ValueError: NumPy's "array is too big"
            if isinstance(e, ValueError) and "too big" not in str(e):
                raise
            raise allocation_error(fill.__qualname__.split(".")[0], shape, dt, dev) from None
        out = Tensor._make(data, shape, dt, dev)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024
    return f"{n} bytes"


def allocation_error(op: str, shape, dtype, device, what: str = "the output") -> DeviceError:
    """The error for memory that cannot be had: which tensor, how many bytes, and the way out."""
    from .shape import format_shape

    n = 1
    for s in shape:
        n *= int(s)
    nbytes = n * dtype.itemsize
    return DeviceError(
        f"{op}: cannot allocate {what}, {format_shape(shape)} {dtype} on {device}: "
        f"{_bytes(nbytes)} ({nbytes:,} bytes) do not fit in memory", op=op,
        hint="to work with its shape alone (planning, memory estimates), create it on the "
             "meta device: device='meta' allocates nothing")


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "zeros")
    return _make(size, dtype, device, requires_grad, lambda s, d: np.zeros(s, d))


def ones(*size, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "ones")
    return _make(size, dtype, device, requires_grad, lambda s, d: np.ones(s, d))


def empty(*size, dtype=None, device=None, requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "empty")
    return _make(size, dtype, device, requires_grad, lambda s, d: np.empty(s, d))


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False,
         layout=None) -> Tensor:
    check_layout(layout, "full")
    if dtype is None:
        dtype = _dt.result_type(fill_value)
    return _make((size,), dtype, device, requires_grad, lambda s, d: np.full(s, fill_value, d))


def _like(t: Tensor, dtype, device):
    if not isinstance(t, Tensor):
        raise DTypeError(f"a *_like factory needs a Tensor, got {type(t).__name__} {t!r}",
                         hint="for a shape use sf.zeros(shape)")
    return t.shape, t.dtype if dtype is None else dtype, t.device if device is None else device


def zeros_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False,
               layout=None) -> Tensor:
    check_layout(layout, "zeros_like")
    s, d, dev = _like(t, dtype, device)
    return zeros(s, dtype=d, device=dev, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False,
              layout=None) -> Tensor:
    check_layout(layout, "ones_like")
    s, d, dev = _like(t, dtype, device)
    return ones(s, dtype=d, device=dev, requires_grad=requires_grad)


def empty_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False,
               layout=None) -> Tensor:
    check_layout(layout, "empty_like")
    s, d, dev = _like(t, dtype, device)
    return empty(s, dtype=d, device=dev, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, device=None,
              requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "full_like")
    s, d, dev = _like(t, dtype, device)
    return full(s, fill_value, dtype=d, device=dev, requires_grad=requires_grad)


def rand(*size, generator: Generator | None = None, dtype=None, device=None,
         requires_grad: bool = False, layout=None) -> Tensor:
    """Uniform on [0, 1)."""
    check_layout(layout, "rand")
    rng = get_rng(generator)
    return _make(size, dtype, device, requires_grad, lambda s, d: _random(rng.random, s, d))


def randn(*size, generator: Generator | None = None, dtype=None, device=None,
          requires_grad: bool = False, layout=None) -> Tensor:
    """Standard normal."""
    check_layout(layout, "randn")
    rng = get_rng(generator)
    return _make(size, dtype, device, requires_grad,
                 lambda s, d: _random(rng.standard_normal, s, d, math.sqrt(0.5)))


def _random(fn, shape, np_dtype, complex_scale: float = 1.0):
    """fn's floats of np_dtype; complex: real and imaginary parts drawn apart, times
    complex_scale (randn's: each part of variance 1/2, so |z|^2 has mean 1, as PyTorch's)."""
    if np_dtype in (np.float32, np.float64):
        return fn(shape, dtype=np_dtype)
    if np_dtype.kind == "c":
        part = np.float32 if np_dtype == np.complex64 else np.float64
        out = np.empty(shape, np_dtype)
        out.real, out.imag = fn(shape, dtype=part), fn(shape, dtype=part)
        if complex_scale != 1.0:
            out *= part(complex_scale)
        return out
    if np_dtype.kind != "f" and np_dtype.name != "bfloat16":
        raise DTypeError(f"random floats need a floating dtype, got {np_dtype}")
    return fn(shape, dtype=np.float32).astype(np_dtype)


def rand_like(t: Tensor, dtype=None, device=None, generator=None, layout=None) -> Tensor:
    check_layout(layout, "rand_like")
    s, d, dev = _like(t, dtype, device)
    return rand(s, dtype=d, device=dev, generator=generator)


def randn_like(t: Tensor, dtype=None, device=None, generator=None, layout=None) -> Tensor:
    check_layout(layout, "randn_like")
    s, d, dev = _like(t, dtype, device)
    return randn(s, dtype=d, device=dev, generator=generator)


def randint(low, high=None, size=None, generator: Generator | None = None, dtype=None,
            device=None, layout=None) -> Tensor:
    """Integers in [low, high) (as `torch.randint(low=0, high, size)`)."""
    check_layout(layout, "randint")
    if size is None:
        if isinstance(high, (tuple, list)):
            low, high, size = 0, low, high
        else:
            raise ShapeRuntimeError("randint needs a size")
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ShapeRuntimeError(f"randint: high ({high}) must be greater than low ({low})")
    rng = get_rng(generator)
    dtype = _dt.default_int if dtype is None else dtype
    return _make((size,), dtype, device, False,
                 lambda s, d: rng.integers(low, high, size=s).astype(d, copy=False))


def randperm(n: int, generator: Generator | None = None, dtype=None, device=None,
             layout=None) -> Tensor:
    check_layout(layout, "randperm")
    rng = get_rng(generator)
    dtype = _dt.default_int if dtype is None else dtype
    return _make(((n,),), dtype, device, False,
                 lambda s, d: rng.permutation(n).astype(d, copy=False))


def arange(start, end=None, step=1, dtype=None, device=None,
           requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "arange")
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ShapeRuntimeError("arange: step must be nonzero")
    if _is_symbolic(start) or _is_symbolic(end):
        return _symbolic_arange(start, end, step, dtype, device, requires_grad)
    if dtype is None:
        dtype = _dt.result_type(start, end, step)
    dt = _dt.get_dtype(dtype)
    if dt is _dt.int64 and not all(type(v) is int for v in (start, end, step)):
        # PyTorch truncates the bounds and step to int64 before counting (narrower ints
        # count on the float values, as NumPy does below)
        start, end, step = (int(v) if math.isfinite(v) else v for v in (start, end, step))
        if step == 0:
            raise ShapeRuntimeError("arange: step must be nonzero (after truncating it to "
                                    f"{dt})", op="arange")
    n = _arange_length(start, end, step, dt)
    return _make(((n,),), dt, device, requires_grad,
                 lambda s, d: (start + step * np.arange(n, dtype=np.float64)).astype(d)
                 if dt.is_floating_point else np.arange(start, end, step, dtype=d))


def _arange_length(start, end, step, dt: _dt.DType) -> int:
    """How many values arange gives, checked as PyTorch checks (and for integer overflow)."""
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise ShapeRuntimeError(f"arange: unsupported range: {start} -> {end}", op="arange")
    if (end - start) * step < 0:
        raise ShapeRuntimeError(
            f"arange: upper bound and lower bound inconsistent with step sign (start={start}, "
            f"end={end}, step={step})", op="arange")
    n = max(0, math.ceil((end - start) / step))
    if dt.is_integer and n:
        info = np.iinfo(dt.np)
        last = start + step * (n - 1)
        if not (info.min <= start <= info.max and info.min <= last <= info.max):
            from .errors import DTypeRuntimeError

            raise DTypeRuntimeError(
                f"arange: the values {start} .. {last} overflow {dt} (range {info.min} .. "
                f"{info.max}); nothing was allocated", op="arange",
                hint="use a wider integer dtype such as int64")
    return n


def _is_symbolic(x) -> bool:
    return type(x) is not int and not isinstance(x, (float, bool, np.number))


def _symbolic_arange(start, end, step, dtype, device, requires_grad) -> Tensor:
    """arange(0, L) with a symbolic bound: a shape of (end - start) // step, on meta only."""
    if type(step) is not int or step < 0:
        raise ShapeRuntimeError(
            f"arange: a symbolic bound needs a positive integer step, got {step}")
    n = end - start if step == 1 else (end - start + step - 1) // step
    dt = _dt.default_int if dtype is None else _dt.get_dtype(dtype)
    return _make(((n,),), dt, device, requires_grad, ArangeFill(start, end, step))


class ArangeFill:
    """The values of arange(start, end, step) once its symbolic bounds are numbers (sf.compile
    binds them: its tape keeps this fill and evaluates `start` and `end` per shape)."""

    def __init__(self, start, end, step: int) -> None:
        self.start, self.end, self.step = start, end, step

    def __call__(self, shape, np_dtype) -> np.ndarray:
        return np.arange(self.start, self.end, self.step, dtype=np_dtype)


def linspace(start, end, steps: int, dtype=None, device=None,
             requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "linspace")
    if steps < 0:
        raise ShapeRuntimeError(f"linspace: number of steps must be non-negative, got {steps}",
                                op="linspace")
    if dtype is not None and _dt.get_dtype(dtype) is _dt.bool_:
        from .errors import DTypeNotImplementedError

        raise DTypeNotImplementedError("linspace: not implemented for bool", op="linspace",
                                       hint="use a float or integer dtype and compare")
    return _make(((steps,),), dtype, device, requires_grad,
                 lambda s, d: np.linspace(start, end, steps, dtype=np.float64).astype(d))


def eye(n: int, m: int | None = None, dtype=None, device=None,
        requires_grad: bool = False, layout=None) -> Tensor:
    check_layout(layout, "eye")
    m = n if m is None else m
    return _make(((n, m),), dtype, device, requires_grad, lambda s, d: np.eye(n, m, dtype=d))


# ---- sf.tensor of lists that hold tensors, read as torch.tensor reads them ----------------

_shape_of, _dtype_of = operator.attrgetter("shape"), operator.attrgetter("dtype")
_device_of, _data_of = operator.attrgetter("device"), operator.attrgetter("_data")
_grad_of = operator.attrgetter("requires_grad")


def from_tensor_list(data, dtype=None) -> tuple[np.ndarray, _dt.DType]:
    """torch.tensor's reading of (nested) lists holding tensors: the host array and its dtype.

    Each tensor is one scalar (it must have one element, whatever its shape); the shape comes
    from the first entries; the dtype promotes every leaf's (a Python float counts as the
    default float, an int as int64), unless `dtype` is given.
    """
    target = None if dtype is None else _dt.get_dtype(dtype)
    if all(issubclass(t, Tensor) for t in set(map(type, data))):
        arr, found = _flat_tensors(data, target)
    else:
        arr, found = _nested(data, target)
    return arr, target or _promote(found)


def _flat_tensors(data, target):
    """A flat list of tensors, the common case (`[loss.detach() for ...]`): attribute reads
    mapped over the list at C speed, one np.array call, no Python loop per tensor."""
    devices = set(map(_device_of, data))
    if devices != {cpu}:
        arrays = [t._need_data("tensor") for t in data]  # meta raises; cuda copies to host
    else:
        arrays = list(map(_data_of, data))
    shapes = set(map(_shape_of, data))
    for s in shapes:
        if math.prod(s) != 1:
            i = next(i for i, t in enumerate(data) if t.shape == s)
            raise _not_a_scalar(data[i], f"data[{i}]")
    found = dict.fromkeys(map(_dtype_of, data))  # a dict: first-seen order, as PyTorch promotes
    _check_cast(found, target)
    if any(map(_grad_of, data)):
        _warn_grad()
    np_dtype = (target or _promote(found)).np
    if len(shapes) == 1:  # one shape: np.array stacks them, and the extra ones go
        return _convert(arrays, np_dtype).reshape(len(data)), found
    return _convert([a.reshape(()) for a in arrays], np_dtype), found


def _nested(data, target):
    """Nested lists mixing tensors, numbers and arrays: one walk collects leaves and dtypes."""
    sizes, first = [], data
    while isinstance(first, (list, tuple)) or (isinstance(first, np.ndarray) and first.ndim):
        sizes.append(len(first))
        if not sizes[-1]:
            break
        first = first[0]
    leaves, found, grads = [], {}, []  # found: leaf dtypes in first-seen order
    tensor_dtypes: dict = {}

    def leaf(x, path: str):
        if isinstance(x, Tensor):
            if math.prod(x.shape) != 1:
                raise _not_a_scalar(x, f"data{path}")
            tensor_dtypes[x.dtype] = found[x.dtype] = None
            if x.requires_grad:
                grads.append(True)
            return x._need_data("tensor").reshape(())
        if isinstance(x, np.ndarray):
            if x.ndim:
                raise DTypeError(f"tensor: data{path} is a {list(x.shape)} NumPy array where a "
                                 "number belongs: only 0-d arrays are read as scalars",
                                 op="tensor")
            found[_dt.from_numpy_dtype(x.dtype)] = None
            return x
        found[_scalar_dtype(x, path)] = None
        return x

    def walk(x, depth: int, path: str) -> None:
        if depth == len(sizes):
            leaves.append(leaf(x, path))
            return
        if isinstance(x, Tensor):  # a tensor where a row belongs: its rows, as tensors
            host = x._need_data("tensor")
            if host.ndim:
                if x.requires_grad:
                    grads.append(True)
                x = [Tensor._make(r, r.shape, x.dtype, cpu) for r in host]
        if not (isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim)):
            raise DTypeError(
                f"tensor: data{path} is {_what(x)} where a sequence of {sizes[depth]} belongs "
                f"(the shape {sizes} comes from the first entries)", op="tensor",
                hint="give every row the same nesting")
        if len(x) != sizes[depth]:
            raise ShapeError(
                f"tensor: expected a sequence of length {sizes[depth]} at dim {depth} "
                f"(data{path} has {len(x)})", op="tensor",
                hint="pad the rows to one length, or stack tensors with sf.stack")
        for i, y in enumerate(x):
            walk(y, depth + 1, f"{path}[{i}]")

    walk(data, 0, "")
    _check_cast(tensor_dtypes, target)
    if grads:
        _warn_grad()
    np_dtype = (target or _promote(found)).np
    return _convert(leaves, np_dtype).reshape(sizes), found


def _scalar_dtype(x, path: str) -> _dt.DType:
    """The dtype a Python or NumPy scalar leaf counts as (PyTorch's: int64, default float)."""
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":  # before float: np.float64 is one
        return _dt.from_numpy_dtype(x.dtype)
    if isinstance(x, bool):
        return _dt.bool_
    if isinstance(x, int):
        return _dt.default_int
    if isinstance(x, float):
        return _dt.default_float
    if isinstance(x, (list, tuple)):
        raise DTypeError(f"tensor: data{path} is a {type(x).__name__} where a number belongs "
                         "(the shape comes from the first entries)", op="tensor",
                         hint="give every row the same nesting")
    if isinstance(x, (str, bytes, complex, np.generic)):
        raise DTypeError(f"tensor: invalid data type {type(x).__name__} at data{path}",
                         op="tensor")
    raise DTypeRuntimeError(f"tensor: could not infer the dtype of {type(x).__name__} at "
                            f"data{path}", op="tensor")


def _promote(found) -> _dt.DType:
    try:
        return functools.reduce(_dt.promote_types, found)
    except DTypeRuntimeError as e:  # uint16/32/64 with another integer type
        raise DTypeRuntimeError(f"tensor: the elements' dtypes do not promote: {e.args[0]}",
                                op="tensor", hint="cast the tensors to one dtype first, or "
                                "pass dtype=") from None


def _check_cast(tensor_dtypes, target) -> None:
    # PyTorch reads a tensor leaf as an index for an integer or bool dtype: a float one fails
    if target is not None and not target.is_floating_point:
        bad = next((d for d in tensor_dtypes if d.is_floating_point), None)
        if bad is not None:
            raise DTypeError(f"tensor: a {bad} tensor cannot be read as a {target} element; "
                             "only integer tensors of one element can", op="tensor",
                             hint=f"cast the tensors first (t.to(sf.{target})), or build the "
                                  f"tensor then cast it")


def _convert(values: list, np_dtype) -> np.ndarray:
    try:
        return np.array(values, dtype=np_dtype)
    except (ValueError, TypeError, OverflowError) as e:
        raise DTypeError(f"tensor: cannot convert the data to {np_dtype}: {e}",
                         op="tensor") from None


def _not_a_scalar(t: Tensor, where: str) -> ShapeError:
    return ShapeError(
        f"tensor: {where} is a {list(t.shape)} tensor, but only one-element tensors can be "
        "read as scalars in a list", op="tensor",
        hint="to stack tensors into a new dim, use sf.stack(tensors)")


def _what(x) -> str:
    return f"a {list(x.shape)} tensor" if isinstance(x, Tensor) else f"a {type(x).__name__}"


def _warn_grad() -> None:
    warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to "
                  "unexpected behavior.\nConsider using tensor.detach() first.", UserWarning,
                  stacklevel=5)  # the caller of sf.tensor


# tensor() reads lists of tensors with it (the module by path: sf.tensor is the function)
importlib.import_module(".tensor", __package__)._from_tensor_list = from_tensor_list
