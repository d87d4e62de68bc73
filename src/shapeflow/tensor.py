"""Tensor: data with a dtype and a device, and its place in the graph.

This file holds what a tensor *is*: its data, shape, dtype, device and autograd fields.
Methods that run ops, factories or the engine (`t.exp()`, `t + u`, `t.to()`, `t.backward()`)
are attached in `_methods.py`: those sit above this file (docs/design.md, "Layers").
"""

from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .device import Device, cpu, get_default_device, get_device, meta
from .dtypes import DType
from .errors import DeviceError, DTypeError, GraphError, ShapeError, ShapeflowError
from .shape import Shape, format_shape, known_shape
from .shape import _known as _known_shapes

_new = object.__new__  # bound once: Tensor._make runs for every op


class Tensor:
    """An n-dimensional array with a dtype, a device and (optionally) a gradient."""

    __slots__ = (
        "_data", "shape", "dtype", "device", "requires_grad", "_grad", "grad_fn",
        "_version", "_base", "_hooks", "_origin", "__weakref__",
    )
    __array_priority__ = 1000  # so `ndarray + Tensor` defers to Tensor.__radd__

    def __init__(self, data, dtype=None, device=None, requires_grad: bool = False) -> None:
        t = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        for name in ("_data", "shape", "dtype", "device", "requires_grad", "_grad", "grad_fn",
                     "_version", "_base", "_hooks", "_origin"):
            setattr(self, name, getattr(t, name))

    @classmethod
    def _make(cls, data, shape, dtype: DType, device: Device) -> Tensor:
        """Wrap an array (or None on meta) without checks: the ops' fast path."""
        t = _new(cls)
        t._data = data
        if type(shape) is not Shape:
            try:
                shape = _known_shapes[shape]
            except (KeyError, TypeError, ShapeflowError):  # new, a list, or symbolic
                shape = known_shape(shape)
        t.shape = shape
        t.dtype = dtype
        t.device = device
        t.requires_grad = False
        t._grad = None
        t.grad_fn = None
        t._version = [0, None]
        t._base = None
        t._hooks = None
        t._origin = None
        return t

    # ---- the gradient: checked on assignment, as PyTorch does ------------------------
    @property
    def grad(self) -> Tensor | None:
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not (type(value) is Tensor and value.shape == self.shape
                                      and value.dtype is self.dtype
                                      and value.device is self.device):
            _check_grad(self, value)
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    # ---- .data: the same values outside the graph, as PyTorch's ----------------------
    @property
    def data(self) -> Tensor:
        """This tensor's data as a new tensor outside the graph (shared, not copied).

        Unlike detach(), in-place changes through it are not counted by autograd, as in PyTorch."""
        out = Tensor._make(self._data, self.shape, self.dtype, self.device)
        out._origin = "data"
        return out

    @data.setter
    def data(self, value: Tensor) -> None:
        _set_data(self, value)

    # ---- basic properties -------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        from .shape import normalize_dim

        d = normalize_dim(dim, self.ndim, "size")
        if not self.shape:  # PyTorch: IndexError, a 0-d tensor has no dim 0
            from .errors import ShapeIndexError

            raise ShapeIndexError(f"size: dim {dim} given for a 0-d tensor, which has no dims",
                                  op="size")
        return self.shape[d]

    def numel(self):
        return self.shape.numel()

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.shape.numel() * self.dtype.itemsize

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def is_meta(self) -> bool:
        return self.device is meta  # PyTorch's question about that one device

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def version(self) -> int:
        """How many in-place changes this tensor (or a view of its data) has seen."""
        return self._version[0]

    # ---- data out -----------------------------------------------------------------------
    def _need_data(self, what: str):
        if not self.device.computes:
            raise DeviceError(
                f"{what}: a {self.device} tensor {describe(self)} has shape and dtype but no "
                "data",
                op=what,
                hint="run the model on cpu tensors to get values; meta traces shapes and memory",
            )
        return self.device.to_numpy(self._data)  # the host array itself on cpu

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (shared, not copied); the graph does not follow it."""
        if self.requires_grad:
            raise GraphError(
                f"numpy() on a tensor that requires grad {describe(self)}: the graph cannot "
                "follow the array",
                op="numpy",
                hint="call .detach().numpy() if you only need the values",
            )
        return self._need_data("numpy")

    def __array__(self, dtype=None, copy=None):
        """The data itself (np.asarray(t) shares memory); a copy if asked or converted."""
        arr = self._need_data("__array__")
        if dtype is not None:
            arr = arr.astype(dtype, copy=bool(copy))
        elif copy:
            arr = arr.copy()
        return arr

    def item(self):
        """The value of a one-element tensor as a Python number."""
        arr = self._need_data("item")
        if self.requires_grad:
            from .autograd import breaks

            breaks.note("item", "item()")
        if arr.size != 1:
            from .errors import ShapeRuntimeError

            raise ShapeRuntimeError(
                f"item(): only a one-element tensor converts to a Python number, got "
                f"{describe(self)}",
                op="item",
            )
        return arr.reshape(()).item() if self.dtype is not _dt.bfloat16 else float(arr.reshape(()))

    def tolist(self):
        arr = self._need_data("tolist")
        if self.dtype in (_dt.bfloat16,):
            arr = arr.astype(np.float32)
        return arr.tolist()

    def __len__(self) -> int:
        if not self.shape:
            raise DTypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        if self.numel() != 1:
            from .errors import ShapeRuntimeError

            raise ShapeRuntimeError(
                f"the truth value of a tensor with {self.numel()} elements is ambiguous",
                hint="use .any() or .all()",
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point:
            raise DTypeError("only integer tensors can be used as an index")
        return int(self.item())

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        if not self.shape:
            raise DTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- autograd fields -----------------------------------------------------------------
    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self.grad_fn is not None and not requires_grad:
            raise GraphError(
                "requires_grad_(False) on a non-leaf tensor: it is part of a graph",
                hint="use .detach() to get a tensor outside the graph",
            )
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise DTypeError(
                f"only floating-point and complex tensors can require gradients, got "
                f"{self.dtype}",
                op="requires_grad_",
                hint="convert with .float() first",
            )
        self.requires_grad = requires_grad
        return self

    def detach(self) -> Tensor:
        """The same data, outside the graph."""
        if self.requires_grad:
            from .autograd import breaks

            breaks.note("detach", "detach()")
        out = Tensor._make(self._data, self.shape, self.dtype, self.device)
        out._version = self._version
        out._origin = "detach"
        return out

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self.requires_grad = False
        self._origin = "detach"
        return self

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a return value replaces it."""
        if not self.requires_grad:
            raise GraphError("register_hook on a tensor that does not require grad")
        if self.grad_fn is not None:
            if self.grad_fn.hooks is None:
                self.grad_fn.hooks = []
            self.grad_fn.hooks.append(hook)
            hooks = self.grad_fn.hooks
        else:
            if self._hooks is None:
                self._hooks = []
            self._hooks.append(hook)
            hooks = self._hooks
        return _RemovableHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call hook(self) once backward has accumulated this leaf's gradient into .grad."""
        if not self.requires_grad or self.grad_fn is not None:
            raise GraphError("register_post_accumulate_grad_hook: only a leaf tensor that "
                             "requires grad accumulates a .grad")
        if self._hooks is None:
            self._hooks = []
        wrapped = PostAccumulateHook(hook)
        self._hooks.append(wrapped)
        return _RemovableHandle(self._hooks, wrapped)

    def retain_grad(self) -> None:
        """Keep .grad of a non-leaf tensor after backward (calling it again changes nothing)."""
        if self.grad_fn is None:
            return
        import weakref

        # one keeper per tensor: a second would add the same gradient into .grad again
        for hook in self.grad_fn.hooks or ():
            if getattr(hook, "_retains", None) is not None and hook._retains() is self:
                return
        ref = weakref.ref(self)

        def keep(grad):
            t = ref()
            if t is not None:
                t.grad = grad if t.grad is None else t.grad + grad
            return None

        keep._retains = ref
        self.register_hook(keep)

    # ---- conversion --------------------------------------------------------------------
    def float(self, memory_format=None) -> Tensor:
        return self.to(_dt.float32, memory_format=memory_format)

    def double(self, memory_format=None) -> Tensor:
        return self.to(_dt.float64, memory_format=memory_format)

    def half(self, memory_format=None) -> Tensor:
        return self.to(_dt.float16, memory_format=memory_format)

    def bfloat16(self, memory_format=None) -> Tensor:
        return self.to(_dt.bfloat16, memory_format=memory_format)

    def long(self, memory_format=None) -> Tensor:
        return self.to(_dt.int64, memory_format=memory_format)

    def int(self, memory_format=None) -> Tensor:
        return self.to(_dt.int32, memory_format=memory_format)

    def short(self, memory_format=None) -> Tensor:
        return self.to(_dt.int16, memory_format=memory_format)

    def char(self, memory_format=None) -> Tensor:
        return self.to(_dt.int8, memory_format=memory_format)

    def byte(self, memory_format=None) -> Tensor:
        return self.to(_dt.uint8, memory_format=memory_format)

    def bool(self, memory_format=None) -> Tensor:
        return self.to(_dt.bool_, memory_format=memory_format)

    def cfloat(self, memory_format=None) -> Tensor:
        return self.to(_dt.complex64, memory_format=memory_format)

    def cdouble(self, memory_format=None) -> Tensor:
        return self.to(_dt.complex128, memory_format=memory_format)

    def chalf(self, memory_format=None) -> Tensor:
        raise DTypeError("chalf: shapeflow has no complex32 (NumPy has no half-precision "
                         "complex)", op="chalf", hint="use .cfloat() (complex64)")

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def new_tensor(self, data) -> Tensor:
        return tensor(data, dtype=self.dtype, device=self.device)

    # ---- printing -----------------------------------------------------------------------
    def __repr__(self) -> str:
        extras = []
        if not self.device.computes:
            body = "..."
        else:
            arr = self.device.to_numpy(self._data)
            if self.dtype is _dt.bfloat16:
                arr = arr.astype(np.float32)
            body = np.array2string(
                arr, separator=", ", precision=4, threshold=200, edgeitems=3,
                prefix="tensor(", floatmode="maxprec_equal",
            )
        extras.append(f"shape={format_shape(self.shape)}")
        extras.append(f"dtype={self.dtype}")
        if self.device is not cpu:  # as PyTorch prints: the default device goes unnamed
            extras.append(f"device={self.device}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"tensor({body}, {', '.join(extras)})"

    __str__ = __repr__


class PostAccumulateHook:
    """A leaf hook that runs with the leaf once its .grad holds this backward's gradient."""

    __slots__ = ("fn",)
    registered = 0  # how many were made: backward watches leaves only if any exist

    def __init__(self, fn) -> None:
        self.fn = fn
        PostAccumulateHook.registered += 1


class _RemovableHandle:
    __slots__ = ("hooks", "hook")

    def __init__(self, hooks: list, hook) -> None:
        self.hooks, self.hook = hooks, hook

    def remove(self) -> None:
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


def describe(t) -> str:
    """`[2, 5, 64] float32 cpu`: how errors show an operand.

    A torch tensor here is an operand of a shapeflow op, and that is the error to report:
    describing one raises shapeflow._porting's mixing error instead.
    """
    if not isinstance(t, Tensor):
        from .torch_interop import is_torch_tensor, mixing_error

        if is_torch_tensor(t):
            raise mixing_error(t)
        return f"{type(t).__name__} {t!r}"
    return f"{format_shape(t.shape)} {t.dtype} {t.device}"


def _infer_dtype(data, kinds: set | None = None) -> DType:
    """PyTorch's dtype for Python data: bool, int64, or float32; NumPy scalars keep theirs."""
    if isinstance(data, np.generic):
        return _dt.from_numpy_dtype(data.dtype)
    try:
        arr = np.asarray(data)
    except ValueError:
        raise _ragged_error(data) from None
    if isinstance(data, (list, tuple)) and arr.dtype.kind in "biuf":
        found = kinds
        if found is None:  # (tensor() walks them first, and passes them)
            found = set()
            _leaf_kinds(data, found)
        if any(not isinstance(k, str) for k in found):  # NumPy values among the leaves
            out = None
            for k in found:
                dt = (_dt.from_numpy_dtype(k) if not isinstance(k, str) else
                      _dt.bool_ if k == "b" else _dt.default_int if k == "i" else
                      _dt.default_float)
                out = dt if out is None else _dt.promote_types(out, dt)
            return out
    if arr.dtype == np.bool_:
        return _dt.bool_
    if arr.dtype.kind in "iu":
        return _dt.default_int
    if arr.dtype.kind == "f":
        return _dt.default_float
    if arr.dtype.kind == "c":  # Python complex numbers: complex64 with the float32 default
        return _dt.default_complex()
    if arr.dtype.kind == "O":  # None or another object: PyTorch's RuntimeError (a TypeError too)
        from .errors import DTypeRuntimeError

        raise DTypeRuntimeError(f"tensor: could not infer a dtype for data of NumPy kind "
                                f"{arr.dtype} (an element is not a number)", op="tensor")
    raise DTypeError(f"cannot make a tensor from data of NumPy kind {arr.dtype}")


# Bumped whenever a tensor takes another array (`t.data = ...`) or a module another parameter,
# buffer or child: a compiled region (sf.compile) compares it to see that the module state it
# traced is still the state its replay reads, in one comparison per call.
layout_epoch = [0]


def _set_data(t: Tensor, value) -> None:
    """`t.data = value`: t takes value's array, shape and dtype (as PyTorch's set_data)."""
    layout_epoch[0] += 1
    op = "data assignment"
    if not isinstance(value, Tensor):
        kind = type(value)
        name = f"{kind.__module__}.{kind.__name__}".removeprefix("builtins.")
        raise DTypeError(f"{op}: t.data must be set to a Tensor, got {name}", op=op,
                         operands=[("tensor", describe(t))],
                         hint="write `t.data = sf.tensor(values)`, or copy the values in "
                         "place with `t.data.copy_(sf.tensor(values))`")
    if value.device.computes != t.device.computes:
        raise DeviceError(f"{op}: a {value.device} tensor's data cannot replace a "
                          f"{t.device} tensor's", op=op,
                          operands=[("tensor", describe(t)), ("data", describe(value))],
                          hint=f"move it first: value.to({str(t.device)!r})")
    if t.requires_grad and not (value.dtype.is_floating_point or value.dtype.is_complex):
        from .errors import DTypeRuntimeError

        raise DTypeRuntimeError(
            f"{op}: data set to a tensor that requires gradients must be floating point, "
            f"got {value.dtype}", op=op, operands=[("tensor", describe(t))],
            hint="convert with .float() first, or set requires_grad_(False)")
    # no version bump, as in PyTorch: graphs already recorded read the new data
    t._data, t.shape, t.dtype, t.device = value._data, value.shape, value.dtype, value.device


def _check_grad(t: Tensor, g) -> None:
    """Raise as PyTorch does when `t.grad = g` does not fit t: kind, device, dtype, shape."""
    op, ops = "grad assignment", [("tensor", describe(t))]
    if not isinstance(g, Tensor):
        raise DTypeError(f"{op}: expected a Tensor or None, got {type(g).__name__}", op=op,
                         operands=ops)
    ops.append(("grad", describe(g)))
    if g.device is not t.device:
        raise DeviceError(f"{op}: a gradient on {g.device} for a tensor on {t.device}", op=op,
                          operands=ops, hint="move it first: g.to(t.device)")
    if g.dtype is not t.dtype:
        raise DTypeError(f"{op}: a {g.dtype} gradient for a {t.dtype} tensor", op=op,
                         operands=ops, hint="cast it first: g.to(t.dtype)")
    if g.shape != t.shape:
        raise ShapeError(
            f"{op}: a gradient of shape {format_shape(g.shape)} for a tensor of shape "
            f"{format_shape(t.shape)}: the gradient and the tensor must be the same size",
            op=op, operands=ops,
            hint="a broadcastable gradient would train wrongly: give one of the tensor's shape")


def _leaf_kinds(data, found: set) -> None:
    """The kinds of data's leaves: NumPy dtypes, or 'b' / 'i' / 'f' for Python numbers.

    Walks the types of each list at C speed (set(map(type))), not its elements one by one."""
    for t in set(map(type, data)):
        if t is list or t is tuple:
            for x in data:
                if type(x) is t:
                    _leaf_kinds(x, found)
        elif t is np.ndarray:
            found.update(x.dtype for x in data if type(x) is np.ndarray)
        elif issubclass(t, np.generic):
            found.add(np.dtype(t))
        elif issubclass(t, Tensor):
            found.add(Tensor)
        else:
            found.add("b" if t is bool else "i" if issubclass(t, int) else "f")


def _ragged_error(data) -> ShapeError:
    """Where a nested list stops being rectangular: its first entry of another length."""
    shape, first = [], data
    while isinstance(first, (list, tuple)):
        shape.append(len(first))
        if not first:
            break
        first = first[0]

    def desc(n):
        return "a number" if n is None else f"a list of {n}"

    def find(x, depth, path):
        n = len(x) if isinstance(x, (list, tuple)) else None
        want = shape[depth] if depth < len(shape) else None
        if n != want:
            return path, n, want
        for i, y in enumerate(x if n else ()):
            bad = find(y, depth + 1, f"{path}[{i}]")
            if bad:
                return bad
        return None

    bad = find(data, 0, "")
    where = (f": data{bad[0]} is {desc(bad[1])}, but data{'[0]' * bad[0].count('[')} is "
             f"{desc(bad[2])}" if bad else "")
    return ShapeError(f"tensor: nested lists must be rectangular{where}", op="tensor",
                      operands=[("expected", f"{shape} (from the first entries)")],
                      hint="pad the rows to one length, or keep them as separate tensors")


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, numbers, arrays or tensors)."""
    device = get_default_device() if device is None else get_device(device)
    if isinstance(data, Tensor):
        src = data.detach()
        dt = _dt.get_dtype(dtype) if dtype is not None else data.dtype
        out = src.to(dtype=dt, device=device, copy=True)
        out = Tensor._make(out._data, out.shape, out.dtype, out.device)
    else:
        if type(data).__module__.startswith("torch"):  # a PyTorch tensor: its values, copied
            from .torch_interop import torch_values

            data = torch_values(data)
        if isinstance(data, np.ndarray):
            dt = _dt.get_dtype(dtype) if dtype is not None else _dt.from_numpy_dtype(data.dtype)
        elif isinstance(data, (list, tuple)):
            kinds: set = set()
            _leaf_kinds(data, kinds)  # one walk of the leaves' types: tensors among them?
            if Tensor in kinds:  # each tensor one scalar, as PyTorch reads them
                data, dt = _from_tensor_list(data, dtype)
            else:
                dt = _dt.get_dtype(dtype) if dtype is not None else _infer_dtype(data, kinds)
        else:
            dt = _dt.get_dtype(dtype) if dtype is not None else _infer_dtype(data)
        try:
            arr = np.array(data, dtype=dt.np)
        except (ValueError, TypeError) as e:
            raise DTypeError(f"cannot make a tensor from {type(data).__name__}: {e}") from None
        out = Tensor._make(device.from_numpy(arr), arr.shape, dt, device)
    if requires_grad:
        out.requires_grad_(True)
    return out


# factories.from_tensor_list, installed by factories (a layer above this file)
_from_tensor_list = None


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """`data` as a tensor, without a copy where it already is one of the right kind."""
    if isinstance(data, Tensor) and (dtype is None or _dt.get_dtype(dtype) is data.dtype) and (
        device is None or get_device(device) is data.device
    ):
        return data
    # only cpu shares memory with a NumPy array: the array is its data
    if isinstance(data, np.ndarray) and dtype is None and (
            device == "cpu" if device is not None else get_default_device() is cpu):
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a NumPy array."""
    if not isinstance(array, np.ndarray):
        kind = type(array)
        name = f"{kind.__module__}.{kind.__name__}".removeprefix("builtins.")
        raise DTypeError(f"from_numpy expects a numpy.ndarray, got {name}",
                         hint="sf.tensor(x) copies the values of a torch tensor or a list")
    return Tensor._make(array, array.shape, _dt.from_numpy_dtype(array.dtype), cpu)
