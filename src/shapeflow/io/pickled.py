"""A restricted unpickler (PyTorch's `weights_only=True`) and the user's safe globals.

The unpickler runs no code a pickle names: it reads the opcodes itself (as PyTorch's
`torch/_weights_only_unpickler.py` does), resolves a global only through a fixed table
(tensors, storages, dtypes, plain containers) or the globals a user allowlisted with
`add_safe_globals`, calls (REDUCE) only those, builds (BUILD) only OrderedDicts and
allowlisted types, and refuses every other opcode. Anything refused raises
WeightsOnlyError, a CheckpointError that is also a `pickle.UnpicklingError`.
"""

from __future__ import annotations

import collections
import contextlib
import io
import pickle
import struct
from collections.abc import Callable, Iterator

from ..errors import CheckpointError, ShapeflowError

# modules never allowed, even allowlisted (PyTorch's list)
_BLOCKED = ("sys", "os", "posix", "nt")
# Python 2 names that protocol-2 pickles use (what pickle's own fix_imports maps)
_RENAMED = {"__builtin__": "builtins", "copy_reg": "copyreg", "torch.tensor": "torch._tensor"}

UNSAFE_MESSAGE = (
    "Re-running `sf.load` with `weights_only=False` will likely succeed, but it can result in "
    "arbitrary code execution. Do it only if you got the file from a trusted source."
)

_safe: dict = {}  # what add_safe_globals allowed: the object (or (object, name)) -> name


class WeightsOnlyError(CheckpointError, pickle.UnpicklingError):
    """A weights-only load met something it does not run: a CheckpointError that `except
    pickle.UnpicklingError` (PyTorch's error for this) also catches."""

    kind = "CheckpointError"


# ---- sf.serialization's allowlist ------------------------------------------------------------

def _name_of(entry) -> str:
    if isinstance(entry, tuple):
        if len(entry) != 2 or type(entry[1]) is not str:
            raise TypeError("add_safe_globals: a tuple entry is (object, 'module.name'), got "
                            f"{entry!r:.100}")
        return entry[1]
    module, name = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(name, str)):
        raise TypeError(f"add_safe_globals: {entry!r:.100} has no module and name: pass "
                        "(object, 'module.name')")
    return f"{module}.{name}"


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes and functions in `sf.load(..., weights_only=True)`."""
    for entry in safe_globals:
        _safe[entry] = _name_of(entry)


def get_safe_globals() -> list:
    """The classes and functions `add_safe_globals` allowed."""
    return list(_safe)


def clear_safe_globals() -> None:
    """Forget every global `add_safe_globals` allowed."""
    _safe.clear()


@contextlib.contextmanager
def safe_globals(globals_: list) -> Iterator[None]:
    """Allow these globals inside the `with` block only (as `torch.serialization.safe_globals`)."""
    added = [g for g in globals_ if g not in _safe]
    add_safe_globals(globals_)
    try:
        yield
    finally:
        for g in added:
            _safe.pop(g, None)


def user_globals() -> dict[str, object]:
    """'module.name' -> object, for each allowlisted global."""
    return {name: (g[0] if isinstance(g, tuple) else g) for g, name in _safe.items()}


def global_name(module: str, name: str) -> str:
    """The dotted name of a pickle's global, its Python 2 spellings mapped as pickle does."""
    module = _RENAMED.get(module, module)
    return f"{module}.{name}"


# ---- the restricted unpickler -----------------------------------------------------------------

def _refused(message: str, where: str, blocked: bool = False) -> WeightsOnlyError:
    """PyTorch's "Weights only load failed" text, naming sf.serialization's functions."""
    if blocked or "GLOBAL" not in message:
        text = (f"Weights only load failed. {UNSAFE_MESSAGE}\nWeightsUnpickler error: "
                f"{message}")
    else:
        text = ("Weights only load failed. This file can still be loaded, to do so you have two "
                f"options, do those steps only if you trust the source of the checkpoint.\n"
                f"\t(1) {UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with `weights_only=True` "
                "please check the recommended steps in the following error message.\n"
                f"\tWeightsUnpickler error: {message}")
    return WeightsOnlyError(f"cannot load {where}: {text}", op="load")


class _Malformed(Exception):
    """The pickle's bytes are not a well-formed pickle (stack underflow, truncation...)."""


class RestrictedUnpickler:
    """Unpickle `data` calling nothing but `allowed` globals (and allowlisted ones)."""

    def __init__(self, data: bytes, where: str, allowed: dict[str, object],
                 persistent_load: Callable, build: Callable | None = None) -> None:
        self.file = io.BytesIO(data)
        self.where, self.allowed, self.persistent_load = where, allowed, persistent_load
        self.user = user_globals()
        self.callables = {id(v) for v in allowed.values()} | {id(v) for v in self.user.values()}
        self.build = build  # a hook for BUILD on the table's own types (None: refuse)

    def read(self, n: int) -> bytes:
        b = self.file.read(n)
        if len(b) != n:
            raise _Malformed("the pickle ends in the middle of an opcode")
        return b

    def readline(self) -> bytes:
        line = self.file.readline()
        if not line.endswith(b"\n"):
            raise _Malformed("the pickle ends in the middle of a GLOBAL")
        return line[:-1]

    def load(self):
        """The unpickled object; WeightsOnlyError or CheckpointError for anything refused."""
        try:
            return self._load()
        except (_Malformed, IndexError, KeyError, EOFError, UnicodeDecodeError,
                struct.error) as e:
            raise CheckpointError(f"cannot load {self.where}: corrupted pickle data.pkl "
                                  f"({type(e).__name__}: {str(e):.100})", op="load") from None
        except (TypeError, ValueError, OverflowError, MemoryError, RecursionError) as e:
            if isinstance(e, ShapeflowError):
                raise
            raise CheckpointError(f"cannot load {self.where}: data.pkl holds a call that "
                                  f"failed ({type(e).__name__}: {str(e):.200})",
                                  op="load") from None

    def _global(self, module: str, name: str):
        full = global_name(module, name)
        module = full.rsplit(".", 1)[0]
        if module.split(".")[0] in _BLOCKED:
            raise _refused(f"Trying to load unsupported GLOBAL {full} whose module {module} is "
                           "blocked.", self.where, blocked=True)
        if full in self.allowed:
            return self.allowed[full]
        if full in self.user:
            return self.user[full]
        shown = full.removeprefix("builtins.")
        if full.split(".")[0] == "torch":  # torch's own names: allowlisting cannot help
            raise _refused(f"Unsupported global: GLOBAL {full} is not one shapeflow rebuilds "
                           "(it rebuilds tensors, parameters, storages, dtypes, torch.Size and "
                           "torch.device)", self.where, blocked=True)
        raise _refused(
            f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
            f"`sf.serialization.add_safe_globals([{shown}])` or the "
            f"`sf.serialization.safe_globals([{shown}])` context manager to allowlist this "
            "global if you trust this class/function.", self.where)

    def _load(self):  # noqa: C901  (one branch per opcode, as pickle's own loop)
        stack: list = []
        marks: list[list] = []
        memo: dict[int, object] = {}
        read, op = self.read, pickle
        while True:
            key = read(1)
            if key == op.PROTO:
                if read(1)[0] > 5:
                    raise _Malformed("unknown pickle protocol")
            elif key == op.FRAME:
                read(8)
            elif key == op.STOP:
                if len(stack) != 1 or marks:
                    raise _Malformed("STOP with a stack of other than one object")
                return stack[0]
            elif key == op.GLOBAL:
                module = self.readline().decode("utf-8")
                stack.append(self._global(module, self.readline().decode("utf-8")))
            elif key == op.STACK_GLOBAL:
                name, module = stack.pop(), stack.pop()
                if type(name) is not str or type(module) is not str:
                    raise _Malformed("STACK_GLOBAL of other than two str")
                stack.append(self._global(module, name))
            elif key == op.REDUCE:
                args, func = stack.pop(), stack[-1]
                if id(func) not in self.callables or type(args) is not tuple:
                    raise _refused(f"Trying to call reduce for unrecognized function {func!r:.100}",
                                   self.where)
                stack[-1] = func(*args)
            elif key == op.NEWOBJ:
                args, cls = stack.pop(), stack.pop()
                if (id(cls) not in self.callables or not isinstance(cls, type)
                        or type(args) is not tuple):
                    raise _refused("Can only create new object for classes allowlisted via "
                                   f"`add_safe_globals` but got {cls!r:.100}", self.where)
                stack.append(cls.__new__(cls, *args))
            elif key == op.BUILD:
                state, inst = stack.pop(), stack[-1]
                self._build(inst, state)
            elif key == op.BINPERSID:
                stack.append(self.persistent_load(stack.pop()))
            elif key == op.MARK:
                marks.append(stack)
                stack = []
            elif key == op.POP_MARK:
                stack = marks.pop()
            elif key == op.POP:
                stack.pop()
            elif key == op.DUP:
                stack.append(stack[-1])
            elif key in (op.TUPLE, op.APPENDS, op.SETITEMS, op.ADDITEMS, op.FROZENSET):
                items, stack = stack, marks.pop()
                if key == op.TUPLE:
                    stack.append(tuple(items))
                elif key == op.FROZENSET:
                    stack.append(frozenset(items))
                elif key == op.APPENDS:
                    _of(stack[-1], list, "extend").extend(items)
                elif key == op.ADDITEMS:
                    _of(stack[-1], set, "add to").update(items)
                else:
                    if len(items) % 2:
                        raise _Malformed("SETITEMS with an odd number of items")
                    target = _dict(stack[-1])
                    for i in range(0, len(items), 2):
                        target[items[i]] = items[i + 1]
            elif key == op.APPEND:
                item = stack.pop()
                _of(stack[-1], list, "append to").append(item)
            elif key == op.SETITEM:
                v, k = stack.pop(), stack.pop()
                _dict(stack[-1])[k] = v
            elif key in (op.TUPLE1, op.TUPLE2, op.TUPLE3):
                n = 1 + (op.TUPLE1, op.TUPLE2, op.TUPLE3).index(key)
                if len(stack) < n:
                    raise _Malformed("a tuple of more items than the stack holds")
                stack[-n:] = [tuple(stack[-n:])]
            elif key in _CONSTANTS:
                stack.append(_CONSTANTS[key]())
            elif key == op.BININT:
                stack.append(struct.unpack("<i", read(4))[0])
            elif key == op.BININT1:
                stack.append(read(1)[0])
            elif key == op.BININT2:
                stack.append(struct.unpack("<H", read(2))[0])
            elif key == op.LONG1:
                stack.append(pickle.decode_long(read(read(1)[0])))
            elif key == op.LONG4:
                stack.append(pickle.decode_long(read(self._size(4, "<i"))))
            elif key == op.BINFLOAT:
                stack.append(struct.unpack(">d", read(8))[0])
            elif key in (op.BINUNICODE, op.SHORT_BINUNICODE, op.BINUNICODE8):
                fmt = {op.BINUNICODE: "<I", op.SHORT_BINUNICODE: "<B", op.BINUNICODE8: "<Q"}[key]
                stack.append(str(read(self._size(struct.calcsize(fmt), fmt)), "utf-8",
                                 "surrogatepass"))
            elif key in (op.SHORT_BINSTRING, op.BINSTRING):
                fmt = "<B" if key == op.SHORT_BINSTRING else "<i"
                stack.append(read(self._size(struct.calcsize(fmt), fmt)).decode("ascii"))
            elif key in (op.SHORT_BINBYTES, op.BINBYTES, op.BINBYTES8):
                fmt = {op.SHORT_BINBYTES: "<B", op.BINBYTES: "<I", op.BINBYTES8: "<Q"}[key]
                stack.append(read(self._size(struct.calcsize(fmt), fmt)))
            elif key in (op.BINGET, op.LONG_BINGET):
                i = read(1)[0] if key == op.BINGET else struct.unpack("<I", read(4))[0]
                stack.append(memo[i])
            elif key in (op.BINPUT, op.LONG_BINPUT):
                i = read(1)[0] if key == op.BINPUT else struct.unpack("<I", read(4))[0]
                memo[i] = stack[-1]
            elif key == op.MEMOIZE:
                memo[len(memo)] = stack[-1]
            else:
                raise _refused(f"Unsupported operand {key[0] if key else 'EOF'} "
                               f"({_opname(key)})", self.where)

    def _size(self, width: int, fmt: str) -> int:
        """A length prefix, checked against what is left of the pickle before reading."""
        (n,) = struct.unpack(fmt, self.read(width))
        if n < 0 or n > len(self.file.getbuffer()) - self.file.tell():
            raise _Malformed(f"a length of {n} bytes runs past the end of the pickle")
        return n

    def _build(self, inst, state) -> None:
        if type(inst) is collections.OrderedDict:  # a state dict's _metadata
            if not (type(state) is dict and all(type(k) is str for k in state)):
                raise _Malformed("BUILD of an OrderedDict with a state that is no str dict")
            inst.__dict__.update(state)
        elif self.build is not None and self.build(inst, state):
            pass
        elif id(type(inst)) in {id(v) for v in self.user.values()}:
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
                return
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            if state:
                inst.__dict__.update(state)
            for k, v in (slots or {}).items():
                setattr(inst, k, v)
        else:
            raise _refused("Can only build Tensor, Parameter, OrderedDict or types allowlisted "
                           f"via `add_safe_globals`, but got {type(inst)}", self.where)


_CONSTANTS = {
    pickle.NONE: lambda: None, pickle.NEWTRUE: lambda: True, pickle.NEWFALSE: lambda: False,
    pickle.EMPTY_TUPLE: tuple, pickle.EMPTY_LIST: list, pickle.EMPTY_DICT: dict,
    pickle.EMPTY_SET: set,
}


def _of(obj, cls: type, what: str):
    if type(obj) is not cls:
        raise _Malformed(f"can only {what} {cls.__name__}s, but got {type(obj)}")
    return obj


def _dict(obj):
    if type(obj) not in (dict, collections.OrderedDict, collections.Counter):
        raise _Malformed("can only SETITEM(S) for dict, collections.OrderedDict, "
                         f"collections.Counter, but got {type(obj)}")
    return obj


def _opname(key: bytes) -> str:
    for name in dir(pickle):
        if name.isupper() and getattr(pickle, name) == key:
            return name
    return "unknown"
