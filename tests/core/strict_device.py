"""A strict test device: its arrays are a wrapper class, not `numpy.ndarray`.

`StrictArray` holds a NumPy array but refuses to be one: NumPy's functions reject it
(`__array__`, `__array_ufunc__` and `__array_function__` raise), and it refuses raw NumPy
arrays as operands. Its namespace `strict_xp` has NumPy's API and unwraps/wraps at the edge.
So an op that computes through `x.device.xp` / `x.device.kernels` runs here, and one that
calls `np.zeros` or `np.asarray` on its own fails loudly: the proof that a device such as
CuPy's could slot in without editing ops. Reductions give 0-d arrays, as CuPy's do.
"""

from __future__ import annotations

import operator

import numpy as np

from shapeflow.backend.reference import ReferenceKernels
from shapeflow.device import Device


class SeamError(TypeError):
    """Host NumPy data met the strict device's arrays: some code bypassed the device."""


class StrictArray:
    """A device array: a NumPy array inside, none of NumPy's protocols outside."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # np.add(strict, ...) raises TypeError

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, *args, **kwargs):
        raise SeamError("a strict device array was converted to NumPy (np.asarray or a "
                        "NumPy function): go through the device's xp or kernels")

    def __array_function__(self, func, types, args, kwargs):
        raise SeamError(f"numpy.{func.__name__} called on a strict device array: use the "
                        "device's xp namespace")

    def __array_namespace__(self, api_version=None):
        return strict_xp

    # ---- plain attributes ---------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: StrictArray(self._a.T))
    mT = property(lambda self: StrictArray(self._a.mT))
    real = property(lambda self: wrap(self._a.real))
    imag = property(lambda self: wrap(self._a.imag))

    @property
    def base(self):
        return None if self._a.base is None else StrictArray(self._a.base)

    def __getattr__(self, name: str):
        value = getattr(self._a, name)  # methods: reshape, astype, sum, copy, fill, ...
        if callable(value):
            return _wrapped(value, name)
        return wrap(value)

    # ---- Python protocols ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        return (wrap(x) for x in self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __index__(self) -> int:
        return operator.index(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    def __repr__(self) -> str:
        return f"StrictArray({self._a!r})"

    def __getitem__(self, key):
        return wrap(self._a[unwrap(key)])

    def __setitem__(self, key, value) -> None:
        self._a[unwrap(key)] = unwrap(value)

    def __copy__(self):
        return StrictArray(self._a.copy())

    def __deepcopy__(self, memo):
        return StrictArray(self._a.copy())

    def __reduce__(self):
        return (StrictArray, (self._a,))


def _binary(name: str):
    def method(self, other):
        return wrap(getattr(self._a, name)(unwrap(other)))

    method.__name__ = name
    return method


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand",
              "or", "ror", "xor", "rxor", "lshift", "rlshift", "rshift", "rrshift", "divmod",
              "rdivmod", "lt", "le", "gt", "ge", "eq", "ne", "iadd", "isub", "imul",
              "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "ilshift",
              "irshift", "imatmul"):
    setattr(StrictArray, f"__{_name}__", _binary(f"__{_name}__"))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(StrictArray, f"__{_name}__",
            (lambda n: lambda self: wrap(getattr(self._a, n)()))(f"__{_name}__"))
StrictArray.__hash__ = None


def unwrap(x, host_ok: bool = False):
    """x with every StrictArray replaced by its NumPy array; raw NumPy arrays are refused
    (they are host data that bypassed the device) unless `host_ok`."""
    if type(x) is StrictArray:
        return x._a
    if isinstance(x, np.ndarray):
        if host_ok:
            return x
        raise SeamError(f"a host NumPy array {x.dtype}{list(x.shape)} met the strict device: "
                        "some code made it with NumPy instead of the device's xp or kernels")
    if type(x) is tuple:
        return tuple(unwrap(e, host_ok) for e in x)
    if type(x) is list:
        return [unwrap(e, host_ok) for e in x]
    if type(x) is dict:
        return {k: unwrap(v, host_ok) for k, v in x.items()}
    return x


def wrap(x):
    """NumPy results as device arrays: arrays and NumPy scalars (0-d, as CuPy) wrapped."""
    if isinstance(x, np.ndarray):
        return StrictArray(x)
    if isinstance(x, np.generic):
        return StrictArray(np.asarray(x))
    if isinstance(x, tuple):  # named tuples too (linalg's svd, qr, eigh, slogdet)
        items = [wrap(e) for e in x]
        return tuple(items) if type(x) is tuple else type(x)(*items)
    if type(x) is list:
        return [wrap(e) for e in x]
    return x


def _wrapped(fn, name: str, host_ok: bool = False):
    def call(*args, **kwargs):
        return wrap(fn(*unwrap(args, host_ok), **unwrap(kwargs, host_ok)))

    call.__name__ = name
    return call


class _Ufunc:
    """A NumPy ufunc over StrictArrays, with its methods (reduce, accumulate, at, outer)."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return wrap(self._ufunc(*unwrap(args), **unwrap(kwargs)))

    def __getattr__(self, name: str):
        value = getattr(self._ufunc, name)
        return _wrapped(value, name) if callable(value) else value


# namespace functions that take host data on purpose: moving it onto the device
_HOST_IN = {"asarray", "array", "ascontiguousarray", "copy"}
# what is not data: dtypes, their info and rules, constants, error-state context managers
_PASS = {"dtype", "finfo", "iinfo", "errstate", "result_type", "promote_types", "can_cast",
         "issubdtype", "newaxis", "pi", "e", "inf", "nan", "euler_gamma", "ndarray",
         "generic", "integer", "floating", "number", "bool_", "complexfloating",
         "signedinteger", "unsignedinteger", "inexact"}


class StrictNamespace:
    """NumPy's API over StrictArrays (what CuPy is over its arrays)."""

    def __init__(self, module=np) -> None:
        self._module = module

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if name in _PASS or isinstance(value, (type, np.dtype)) and not isinstance(
                value, np.ufunc):
            return value
        if isinstance(value, type(np)):  # np.linalg, np.fft, np.random
            return StrictNamespace(value)
        if isinstance(value, np.ufunc):
            fn = _Ufunc(value)
            setattr(self, name, fn)
            return fn
        if callable(value):
            fn = _wrapped(value, name, host_ok=name in _HOST_IN)
            setattr(self, name, fn)  # cached
            return fn
        return value


strict_xp = StrictNamespace()


class StrictDevice(Device):
    """The strict device: computes with `strict_xp` and the portable kernel table."""

    __slots__ = ()
    xp = strict_xp
    kernels = ReferenceKernels(strict_xp, "strict")
    array_type = StrictArray

    def asarray(self, x, dtype=None):
        if type(x) is StrictArray:
            return x if dtype is None or x.dtype == dtype else StrictArray(x._a.astype(dtype))
        return StrictArray(np.asarray(unwrap(x), dtype))

    def zeros(self, shape, dtype):
        return StrictArray(np.zeros(shape, dtype))

    def from_numpy(self, array):
        return StrictArray(np.array(array))

    def to_numpy(self, data) -> np.ndarray:
        if type(data) is not StrictArray:
            raise SeamError(f"the strict device holds a {type(data).__name__}, not its own "
                            "array: some op stored host data on it")
        return data._a.copy()
