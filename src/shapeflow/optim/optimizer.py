"""Optimizer: parameter groups, per-parameter state, and PyTorch's state_dict format.

Each optimizer declares the buffers it keeps per parameter (`state_per_param(group)`), so a
memory report can count optimizer state before any step runs (`state_bytes(param)`).
Updates run in place on the raw arrays, through each parameter's device (`p.device.xp`, and
its kernel table's `adam` and `axpy`), bumping each updated parameter's version once per step.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from itertools import chain

import numpy as np

from .. import dtypes as _dt
from ..autograd import enable_grad
from ..device import cpu
from ..errors import DeviceError, DTypeError, ShapeError
from ..shape import format_shape
from ..tensor import Tensor, describe, from_numpy


def invalid(message: str, op: str = "optimizer") -> ShapeError:
    """An optimizer option or parameter list that breaks a rule (a ValueError, as PyTorch's)."""
    return ShapeError(message, op=op)


def check_numbers(op: str, **options) -> None:
    """Raise DTypeError naming the option when one is not a real number (a string lr...)."""
    for name, value in options.items():
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number,
                                                                     Tensor)):
                raise DTypeError(f"{op}: {name} must be a number, got {type(v).__name__} "
                                 f"{v!r}", op=op, operands=[(name, repr(value))],
                                 hint=f"pass {name} as a float, e.g. {name}=1e-3"
                                 if isinstance(v, str) else None)


def check_porting_flags(op: str, capturable: bool = False, differentiable: bool = False) -> None:
    """PyTorch's implementation switches. `fused`/`foreach` (any value, not checked here)
    choose among PyTorch's implementations of one update; shapeflow has one, updating each
    parameter in a single pass (a compiled kernel where one is built), so they change
    nothing. `capturable`/`differentiable` ask for what shapeflow does not do: True raises."""
    if capturable:
        raise invalid(f"{op}: capturable=True (a step CUDA graphs can capture) is not "
                      "implemented in shapeflow: it has no cuda device and captures no graphs; "
                      "pass capturable=False", op)
    if differentiable:
        raise invalid(f"{op}: differentiable=True (autograd through step()) is not implemented "
                      "in shapeflow: step() updates the parameters in place, outside the graph; "
                      "pass differentiable=False", op)


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base of the optimizers (as `torch.optim.Optimizer`).

    `params` is an iterable of tensors or of dicts (parameter groups, each with 'params' and
    options overriding `defaults`). `state[p]` holds each parameter's buffers.

    Subclasses implement `step` and `state_per_param(group) -> list[str]`, the names of the
    buffers (each the size of the parameter) kept for every parameter of a group.
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:  # master_weights=True groups step through fp32 copies
            from .master_weights import with_master_weights

            cls.step = with_master_weights(cls.__dict__["step"])

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise DTypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {describe(params)}")
        groups = list(params)
        if not groups:
            raise invalid("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(dict(g))

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (with its own options) to optimize."""
        if not isinstance(param_group, dict):
            raise DTypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise DTypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise DTypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if p.grad_fn is not None:
                raise invalid(f"can't optimize a non-leaf Tensor {describe(p)}")
        param_group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise invalid(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise invalid("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ---- memory declaration ----------------------------------------------------------------
    def state_per_param(self, group: dict) -> list[str]:
        """Names of the buffers (each shaped like the parameter) kept per parameter of group."""
        return []

    def _group_of(self, param: Tensor) -> dict:
        for g in self.param_groups:
            if any(p is param for p in g["params"]):
                return g
        raise invalid(f"the parameter {describe(param)} is not in this optimizer")

    def state_bytes(self, param: Tensor):
        """Bytes of optimizer state kept for `param`: its declared buffers (not step counters).

        Computed from the declaration, so it works before the first step and on meta.
        """
        names = self.state_per_param(self._group_of(param))
        return len(names) * param.numel() * param.dtype.itemsize

    def total_state_bytes(self):
        """state_bytes summed over every parameter."""
        total = 0
        for g in self.param_groups:
            for p in g["params"]:
                total = total + self.state_bytes(p)
        return total

    # ---- stepping ----------------------------------------------------------------------------
    def _check_devices(self) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                if not p.device.computes:
                    raise DeviceError(
                        f"{type(self).__name__}.step: a parameter {describe(p)} is on the "
                        f"{p.device} device and has no data to update",
                        op=f"{type(self).__name__}.step",
                        hint="meta models plan shapes and memory (see state_bytes); move the "
                        "model to cpu (model.to_empty(device='cpu') then re-initialise) to train",
                    )
        if not getattr(self, "_warned_no_grad", False):
            self._warn_params_without_grad()

    def _warn_params_without_grad(self) -> None:
        """Warn once when some parameters got gradients and others none (a broken graph)."""
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        missing = [p for p in params if p.grad is None]
        if not missing or len(missing) == len(params):
            return
        self._warned_no_grad = True
        import warnings

        from ..inspect import trace

        model = trace.last_root() if trace.last_root is not None else None
        names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
        listed = ", ".join(names.get(id(p), f"[{list(p.shape)}]") for p in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        warnings.warn(
            f"{type(self).__name__}.step: {len(missing)} of {len(params)} parameters have no "
            f"grad ({listed}{more}); the loss does not reach them. "
            "sf.explain_no_grad(loss, model) shows where the graph broke.",
            stacklevel=4,
        )

    def _closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def step(self, closure=None):
        raise NotImplementedError

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's .grad (None by default, or zeros in place)."""
        from ..nn.module import _zero_grad

        for g in self.param_groups:
            for p in g["params"]:
                _zero_grad(p, set_to_none)

    # ---- state dict ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]} as PyTorch.

        The state's tensors are the optimizer's own (as in PyTorch): deep-copy the dict for a
        snapshot that later steps do not change.
        """
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            key = index[id(p)] if isinstance(p, Tensor) and id(p) in index else p
            state[key] = dict(s)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state_dict (this or PyTorch's format); on any error nothing changes."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ShapeError(
                f"loaded state dict has {len(saved_groups)} parameter groups, the optimizer "
                f"has {len(self.param_groups)}", op="load_state_dict")
        for i, (g, sg) in enumerate(zip(self.param_groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ShapeError(
                    f"loaded state dict contains a parameter group that doesn't match the size "
                    f"of optimizer's group: group {i} has {len(sg['params'])} parameters in the "
                    f"state dict, {len(g['params'])} in the optimizer", op="load_state_dict")
        id_map = dict(zip(chain.from_iterable(sg["params"] for sg in saved_groups),
                          chain.from_iterable(g["params"] for g in self.param_groups)))
        new_state: defaultdict = defaultdict(dict)
        problems = []
        for key, values in state_dict["state"].items():
            param = id_map.get(key)
            if param is None:
                new_state[key] = copy.deepcopy(values)
                continue
            out = {}
            for name, v in values.items():
                if name == "step":
                    out[name] = _as_step(v)
                    continue
                arr = _as_array(v)
                if arr is None:
                    out[name] = copy.deepcopy(v)
                    continue
                if arr.ndim and tuple(arr.shape) != tuple(param.shape):
                    problems.append((f"state[{key}][{name!r}]",
                                     f"{format_shape(arr.shape)} for a parameter "
                                     f"{describe(param)}"))
                    continue
                if param.device.computes and arr.dtype.kind == "f" and not (
                        arr.dtype == np.float32 and param.dtype.itemsize == 2):
                    arr = arr.astype(param.dtype.np)  # a copy: the state is ours alone
                else:  # (float32 state of a 16-bit parameter: its master weights' kept)
                    arr = arr.copy()
                out[name] = _on_device(arr, param)
            new_state[param] = out
        if problems:
            raise ShapeError("optimizer state does not fit the parameters; the optimizer was "
                             "left unchanged", op="load_state_dict", operands=problems)
        new_groups = []
        for g, sg in zip(self.param_groups, saved_groups):
            ng = copy.deepcopy({k: v for k, v in sg.items() if k != "params"})
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.state = new_state
        self.param_groups = new_groups

    def __repr__(self) -> str:
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(g):
                if key != "params":
                    s += f"    {key}: {g[key]}\n"
        return s + ")"

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def _as_array(v):
    """A state value's host NumPy array (None for what holds no array: numbers, meta)."""
    if isinstance(v, Tensor):
        return v.device.to_numpy(v._data) if v.device.computes else None
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach") and hasattr(v, "numpy"):  # a torch tensor
        return v.detach().cpu().numpy()
    return None


def _as_step(v) -> Tensor:
    arr = _as_array(v)
    value = float(arr) if arr is not None else float(v)
    return from_numpy(np.array(value, dtype=np.float32))


def new_step() -> Tensor:
    """A step counter as PyTorch keeps it: a 0-d float32 tensor on the host (the cpu)."""
    return from_numpy(np.zeros((), dtype=np.float32))


def zeros_state(p: Tensor) -> Tensor:
    """A state buffer of zeros shaped like `p`, on p's device."""
    return Tensor._make(p.device.xp.zeros_like(p._data), p.shape, p.dtype, p.device)


def _on_device(arr: np.ndarray, param: Tensor) -> Tensor:
    """A host array of loaded state as a tensor on param's device (cpu for a meta one)."""
    device = param.device if param.device.computes else cpu
    return Tensor._make(device.from_numpy(arr), arr.shape, _dt.from_numpy_dtype(arr.dtype),
                        device)
