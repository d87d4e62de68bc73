"""Module: parameters, buffers and submodules registered by attribute, as in PyTorch."""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from .. import dtypes as _dt
from ..autograd import no_grad
from ..device import get_device, is_device_name
from ..dtypes import DType
from ..errors import (
    DeviceError,
    DTypeError,
    DTypeRuntimeError,
    ShapeError,
    ShapeflowError,
    ShapeRuntimeError,
)
from ..inspect.trace import call_module
from ..shape import format_shape
from ..tensor import Tensor, from_numpy, layout_epoch
from .parameter import Parameter


class StateDictError(ShapeflowError, RuntimeError):
    """load_state_dict met missing or unexpected keys (RuntimeError, as in PyTorch)."""

    kind = "StateDictError"


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """What register_*_hook returns: `.remove()` takes the hook off (also a context manager)."""

    _next_id = itertools.count()

    def __init__(self, *hook_dicts) -> None:
        self.id = next(RemovableHandle._next_id)
        self.hook_dicts = hook_dicts

    def remove(self) -> None:
        for d in self.hook_dicts:
            if isinstance(d, dict):
                d.pop(self.id, None)
            else:
                d.discard(self.id)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _addindent(s: str, num_spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


def _join(prefix: str, name: str) -> str:
    return prefix + ("." if prefix else "") + name


def _desc(t) -> str:
    if isinstance(t, Tensor):
        return f"{format_shape(t.shape)} {t.dtype}"
    return type(t).__name__


class Module:
    """Base of every layer and model (as `torch.nn.Module`).

    Attributes that are Parameters, Modules or registered buffers are tracked in insertion
    order; `__call__` runs `forward` between the forward pre-hooks and hooks.
    """

    training: bool

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- calling -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        # through the tracer: module path and shape chain for errors and summaries
        return call_module(self, self._call_impl, args, kwargs)

    def _call_impl(self, *args, **kwargs):
        """forward(*args, **kwargs) between the pre-hooks and the hooks."""
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise DTypeError("a forward pre-hook with kwargs must return None or a "
                                        "tuple (new_args, new_kwargs)")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        result = self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = res
        return result

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """hook(module, args) -> None or new args (with_kwargs: hook(module, args, kwargs))."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """hook(module, args, output) -> None or a new output."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    # ---- registration --------------------------------------------------------------------
    def _check_name(self, name, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        if not isinstance(name, str):
            raise DTypeError(f"{what} name should be a string, got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got {name!r}')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise DTypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (shapeflow.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ShapeError(f"cannot assign a non-leaf tensor to parameter '{name}': wrap "
                             "param.detach() in a Parameter")
        self._parameters[name] = param
        layout_epoch[0] += 1

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor the module keeps (moved by .to(), saved if persistent) that is not trained."""
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise DTypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(a Tensor or None required)")
        self._buffers[name] = tensor
        layout_epoch[0] += 1
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if not isinstance(module, Module) and module is not None:
            raise DTypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module
        layout_epoch[0] += 1

    register_module = add_module

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if params is not None and (isinstance(value, (Tensor, Module)) or name in params
                                   or name in d["_modules"] or name in d["_buffers"]):
            layout_epoch[0] += 1  # the module's state changes (sf.compile's guard)

        def remove_from(*stores):
            for s in stores:
                if name in s:
                    if isinstance(s, set):
                        s.discard(name)
                    else:
                        del s[name]

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise DTypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                f"'{name}' (shapeflow.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise DTypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (shapeflow.nn.Module or None expected)")
            self._modules[name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise DTypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(a Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        layout_epoch[0] += 1
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__())
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[:1].isdigit())

    # ---- traversal -----------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True):
        """(name, module) for this module and every submodule, each once unless told."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, _join(prefix, name), remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool):
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        seen = set()
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield _join(module_prefix, name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """(name, parameter) pairs; a parameter shared by two modules comes once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not isinstance(mod, Module) or item not in mod._modules:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}`")
        return mod._buffers[name]

    def apply(self, fn) -> Module:
        """fn(module) for every submodule (children first), then for this one."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes ---------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ShapeError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    # ---- state dict ----------------------------------------------------------------------
    def _state_entries(self, prefix: str = ""):
        """(key, module, store, local name, tensor) for each saved tensor, PyTorch's order."""
        out = []
        for module_prefix, module in self.named_modules(prefix=prefix, remove_duplicate=False):
            base = module_prefix + "." if module_prefix else ""
            for name, p in module._parameters.items():
                if p is not None:
                    out.append((base + name, module, "_parameters", name, p))
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent_buffers_set:
                    out.append((base + name, module, "_buffers", name, b))
        return out

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """name -> tensor (detached, sharing data) for every parameter and persistent buffer."""
        if destination is None:
            destination = OrderedDict()
        for key, _, _, _, t in self._state_entries(prefix):
            destination[key] = t if keep_vars else t.detach()
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into the parameters and buffers in place; returns (missing, unexpected).

        Everything is checked first: on any error (a missing or unexpected key when strict,
        a shape or dtype that does not fit) nothing in the model changes, and the message
        lists every offending key.
        """
        entries = self._state_entries()
        expected = {key: (module, store, name, t) for key, module, store, name, t in entries}
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        problems, shape_bad, dtype_bad, device_bad = [], False, False, False
        if strict:
            for k in missing:
                problems.append((k, f"missing key in state_dict (the model expects "
                                    f"{_desc(expected[k][3])})"))
            for k in unexpected:
                problems.append((k, f"unexpected key in state_dict (found "
                                    f"{_desc(state_dict[k])}, the model has no such parameter "
                                    "or buffer)"))
        plan = []
        for key, (module, store, name, target) in expected.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if type(value).__module__.startswith("torch"):  # PyTorch's weights: their values
                from ..torch_interop import torch_values

                value = torch_values(value)
            if isinstance(value, np.ndarray):
                value = from_numpy(value)
            if not isinstance(value, Tensor):
                dtype_bad = True
                problems.append((key, f"expected a Tensor, found {type(value).__name__}"))
                continue
            if tuple(value.shape) != tuple(target.shape):
                shape_bad = True
                problems.append((key, f"size mismatch: copying a param with shape "
                                      f"{format_shape(value.shape)} from checkpoint, the shape "
                                      f"in current model is {format_shape(target.shape)}"))
                continue
            if not assign and not _dt.can_cast(value.dtype, target.dtype):
                dtype_bad = True
                problems.append((key, f"dtype {value.dtype} cannot be cast to the model's "
                                      f"{target.dtype}"))
                continue
            if not assign and not value.device.computes and target.device.computes:
                device_bad = True
                problems.append((key, f"a {value.device} tensor {_desc(value)} has no data "
                                      "to copy"))
                continue
            plan.append((module, store, name, target, value))
        if problems:
            # every kind is a RuntimeError, as all of PyTorch's load_state_dict errors are
            cls = (ShapeRuntimeError if shape_bad else DTypeRuntimeError if dtype_bad else
                   DeviceError if device_bad else StateDictError)
            raise cls(
                f"Error(s) in loading state_dict for {self._get_name()}: {len(problems)} "
                f"key(s) do not fit; the model was left unchanged",
                op="load_state_dict", operands=problems,
                hint="pass strict=False to skip missing and unexpected keys (sizes must "
                "still fit)" if not shape_bad else "check that the checkpoint was saved from "
                "the same architecture and configuration",
            )
        with no_grad():
            for module, store, name, target, value in plan:
                if assign:
                    _assign(module, store, name, target, value)
                elif target.device.computes:
                    if value._data is not target._data:
                        _copy_into(target, value)
                    target._version[0] += 1
                    target._version[1] = "load_state_dict"
        return _IncompatibleKeys(missing, unexpected)

    # ---- dtype and device ----------------------------------------------------------------
    def _apply(self, fn) -> Module:
        """Replace every parameter's (and grad's) and buffer's data by fn(tensor).

        All new tensors are computed first, so an error leaves the module unchanged.
        Parameters keep their identity (optimizers holding them keep working).
        """
        done: dict[int, Tensor] = {}
        params, bufs = [], []
        with no_grad():
            for module in self.modules():
                for p in module._parameters.values():
                    if p is not None and id(p) not in done:
                        done[id(p)] = fn(p)
                        g = None if p.grad is None else fn(p.grad)
                        params.append((p, done[id(p)], g))
                for name, b in module._buffers.items():
                    if b is not None:
                        if id(b) not in done:
                            done[id(b)] = fn(b)
                        bufs.append((module, name, done[id(b)]))
        for p, new, g in params:
            if new is not p:
                _set_data(p, new)
            if g is not None and g is not p.grad:
                g = g.detach() if g.grad_fn is not None else g
                p.grad = Tensor._make(g._data, g.shape, g.dtype, g.device)
        for module, name, new in bufs:
            module._buffers[name] = new
        return self

    def to(self, *args, dtype=None, device=None, non_blocking: bool = False) -> Module:
        """Move and/or cast parameters and buffers (`m.to('meta')`, `m.to(sf.float64)`).

        A dtype applies to floating-point tensors only, as in PyTorch.
        """
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, DType):
                dtype = a
            elif isinstance(a, str) and is_device_name(a):
                device = a
            else:
                dtype = a
        if dtype is not None:
            dtype = _dt.get_dtype(dtype)
            if not dtype.is_floating_point:
                raise DTypeError(f"Module.to only accepts floating-point dtypes, got {dtype}",
                                 op="to", hint="cast integer buffers one by one if you must")
        if device is not None:
            device = get_device(device)

        def convert(t: Tensor) -> Tensor:
            dt = dtype if dtype is not None and t.dtype.is_floating_point else None
            return t.to(dtype=dt, device=device)

        return self._apply(convert)

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Give every tensor uninitialised memory on `device` (after building on meta)."""
        device = get_device(device)

        def convert(t: Tensor) -> Tensor:
            from ..factories import empty

            return empty(tuple(t.shape), dtype=t.dtype, device=device)

        return self._apply(convert)

    def cpu(self) -> Module:
        return self.to("cpu")

    def float(self) -> Module:
        return self.to(_dt.float32)

    def double(self) -> Module:
        return self.to(_dt.float64)

    def half(self) -> Module:
        return self.to(_dt.float16)

    def bfloat16(self) -> Module:
        return self.to(_dt.bfloat16)

    # ---- printing ------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr (its configuration)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _zero_grad(p: Tensor, set_to_none: bool) -> None:
    g = p.grad
    if g is None:
        return
    if set_to_none:
        p.grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad = False
    if g._data is not None:
        g._data.fill(0)
    g._version[0] += 1


def _copy_into(target: Tensor, value: Tensor) -> None:
    """Copy value's elements into target's array, cast to its dtype, across devices."""
    src, dev = value._data, target.device
    if value.device is not dev:  # through the host: the only road between two devices
        src = dev.from_numpy(value.device.to_numpy(src))
    dev.xp.copyto(target._data, src, casting="unsafe")


def _set_data(p: Tensor, new: Tensor) -> None:
    """Point p at new's data (dtype, device) in place; a new version so old graphs see it."""
    layout_epoch[0] += 1
    p._data, p.shape, p.dtype, p.device = new._data, new.shape, new.dtype, new.device
    p._version = [p._version[0] + 1, "to"]


def _assign(module: Module, store: str, name: str, target: Tensor, value: Tensor) -> None:
    if store == "_parameters":
        _set_data(target, value)
        target._version = value._version
    else:
        module._buffers[name] = value
