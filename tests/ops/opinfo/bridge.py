"""PyTorch's OpInfo database run against shapeflow, as an outside tester would: each sample
converted to shapeflow, called through the matching public name, compared with PyTorch.

An entry is *in scope* unless it is aten-internal (`_name`, `torch.ops...`), `masked.*`,
sparse, or a `*_copy` view variant; it is *found* when shapeflow has a callable under its
name (`sf.x`, `sf.linalg.x`, `F.x`, `sf.special.x`, `sf.fft.x`, or the Tensor method).
A pair (entry, dtype) *passes* when every sample checked gives PyTorch's shape, dtype and
values and, for float64 entries with autograd, PyTorch's gradients.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import types
from dataclasses import dataclass

import numpy as np
import torch

import shapeflow as sf

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "bool": torch.bool}
SAMPLES_PER_PAIR = 3  # bounded: `make test` stays under its 10 minutes
TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9),
             "complex64": (1e-4, 1e-5), "complex128": (1e-7, 1e-9)}
GRAD_TOLERANCE = (1e-5, 1e-7)
_NOT_COPY_VIEWS = {"index_copy"}  # a real op whose name ends in _copy


def in_scope(name: str) -> bool:
    """Outside the aten-internal, torch.masked, sparse and *_copy groups."""
    if name.startswith("torch.") or (name.startswith("_") and not name.startswith("__")):
        return False
    if name.startswith(("masked.", "sparse.")) or name == "to_sparse":
        return False
    return not (name.endswith("_copy") and name not in _NOT_COPY_VIEWS)


@functools.cache
def op_db() -> tuple:
    """The OpInfo entries in scope that have cpu float, int or bool support."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    # importing torch's test utilities freezes torch.backends' global flags for the whole
    # process (its own suite's rule); other tests in this worker still set them
    torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
    keep = set(DTYPES.values())
    return tuple(op for op in db if in_scope(op.name) and keep & set(op.supported_dtypes("cpu")))


def entry_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _lookup(root, dotted: str):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


class _ShapeflowAsTorch(types.ModuleType):
    """`torch` inside OpInfo's own lambdas (`lambda x, n: torch.polygamma(n, x)`) is shapeflow."""

    def __getattr__(self, name: str):
        return getattr(sf, name)


_AS_TORCH = _ShapeflowAsTorch("torch")


def _with_shapeflow(fn):
    """OpInfo's wrapper lambda with `torch` meaning shapeflow (the argument order is its own)."""
    return types.FunctionType(fn.__code__, {**fn.__globals__, "torch": _AS_TORCH}, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def shapeflow_callable(op):
    """shapeflow's function for an OpInfo entry, or None where it has none."""
    fn = _named_callable(op)
    wrapper = op.op
    if (fn is not None and isinstance(wrapper, types.FunctionType)
            and wrapper.__module__.startswith("torch.testing")):
        return _with_shapeflow(wrapper)
    return fn


def _named_callable(op):
    name = op.name
    if name.startswith("__r") and name.endswith("__"):  # __radd__: the reflected operator
        method = getattr(sf.Tensor, name, None)
        return None if method is None else (lambda x, *a, **k: method(x, *a, **k))
    if name == "__getitem__":
        return operator.getitem
    candidates = [name]
    if name.startswith("nn.functional."):
        candidates.append("nn.functional." + name.split(".", 2)[2])
    for dotted in candidates:
        try:
            fn = _lookup(sf, dotted)
        except Exception:  # noqa: BLE001  (a lazy module that fails to import has no callable)
            fn = None
        if callable(fn) and not isinstance(fn, type):
            return fn
    if "." not in name:
        method = getattr(sf.Tensor, name, None)
        if isinstance(method, property):  # t.T, t.mH
            return lambda x: getattr(x, name)
        if callable(method):
            return lambda x, *a, **k: method(x, *a, **k)
        # an entry for an in-place method only (t.cauchy_(): torch has no torch.cauchy)
        method = getattr(sf.Tensor, name + "_", None)
        if op.inplace_variant is not None and op.variant_test_name == "" and callable(method):
            return lambda x, *a, **k: method(x, *a, **k)
    return None


# ops whose values are random or uninitialized: only shape and dtype are compared
NONDETERMINISTIC = {
    "bernoulli", "normal", "normal.number_mean", "uniform", "multinomial", "rand_like",
    "randn_like", "randint_like", "randint", "empty", "empty_like", "new_empty",
    "new_empty_strided", "empty_strided", "empty_permuted", "exponential", "geometric",
    "log_normal", "cauchy", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.gumbel_softmax", "randn", "rand",
    "nn.functional.multi_head_attention_forward",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
}


def to_sf(x, requires_grad: bool = False):
    """A torch sample argument as shapeflow takes it (tensors, dtypes, nested lists)."""
    if isinstance(x, torch.Tensor):
        t = _view_of_base(x)
        if t is None:
            t = sf.tensor(x.detach().resolve_conj().resolve_neg().numpy().copy())
        if requires_grad and x.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(x, torch.dtype):
        return getattr(sf, str(x).split(".")[-1])
    if isinstance(x, torch.device):
        return "cpu"
    if isinstance(x, torch.memory_format):
        return getattr(sf, str(x).split(".")[-1])
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, torch.nn.PairwiseDistance):  # a sample's distance_function
        return sf.nn.PairwiseDistance(p=x.norm, eps=x.eps, keepdim=x.keepdim)
    if isinstance(x, list):
        return [to_sf(v, requires_grad) for v in x]
    if isinstance(x, tuple):
        return tuple(to_sf(v, requires_grad) for v in x)
    if isinstance(x, dict):
        return {k: to_sf(v, requires_grad) for k, v in x.items()}
    return x


def _view_of_base(x: torch.Tensor):
    """A contiguous torch view into a bigger base (as_strided's partial_views samples) as the
    same view in shapeflow: a slice of the converted base, so ops that read the storage
    (as_strided) see the base's other elements too. None for anything else."""
    base = x._base
    if base is None or not x.is_contiguous() or not base.is_contiguous():
        return None
    start = x.storage_offset() - base.storage_offset()
    flat = sf.tensor(base.detach().resolve_conj().resolve_neg().numpy().copy()).reshape(-1)
    return flat[start:start + x.numel()].reshape(tuple(x.shape))


def _leaves(x) -> list:
    if isinstance(x, (torch.Tensor, sf.Tensor)):
        return [x]
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _leaves(v)]
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v)]
    return []


def _outputs(x) -> list:
    """Every tensor in an op's result, in order (namedtuples and lists flattened)."""
    return _leaves(x)


def _numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().resolve_conj().resolve_neg()
        if t._is_zerotensor():  # a gradient PyTorch knows to be zero, without its data
            return np.zeros(tuple(t.shape), dtype=str(t.dtype).split(".")[-1])
        return (t.float() if t.dtype in (torch.bfloat16, torch.float16) else t).numpy()
    return np.asarray(t.detach().float().numpy() if str(t.dtype) in ("bfloat16", "float16")
                      else t.detach().numpy())


def _dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


@dataclass
class Outcome:
    ok: bool
    reason: str = ""


# ops whose index outputs may order equal values either way (PyTorch leaves it unspecified;
# shapeflow keeps input order): indices pass when they select the values PyTorch's select
TIES_IN_ANY_ORDER = {"sort", "argsort", "topk", "kthvalue", "msort", "mode", "median",
                     "nanmedian"}


def _select_same_values(x: np.ndarray, ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Some axis along which both index arrays pick equal values of x (keepdim or not)."""
    if x.ndim == 0:
        return np.array_equal(ours, theirs)
    for axis in range(x.ndim):
        for a, b in ((ours, theirs), (np.expand_dims(ours, axis), np.expand_dims(theirs, axis))):
            try:
                picked = np.take_along_axis(x, a, axis), np.take_along_axis(x, b, axis)
            except (ValueError, IndexError):
                continue
            if np.array_equal(*picked, equal_nan=x.dtype.kind == "f"):
                return True
    return False


def _compare(sf_out, torch_out, values: bool, ties_of: np.ndarray | None = None) -> str:
    s_list, t_list = _outputs(sf_out), _outputs(torch_out)
    if not t_list:  # a Python number or bool
        if isinstance(sf_out, sf.Tensor):
            sf_out = sf_out.item()
        if isinstance(torch_out, float) and math.isnan(torch_out):
            return "" if isinstance(sf_out, float) and math.isnan(sf_out) else "value"
        return "" if sf_out == torch_out else f"value {sf_out!r} != {torch_out!r}"
    if len(s_list) != len(t_list):
        return f"{len(s_list)} outputs, PyTorch {len(t_list)}"
    for i, (s, t) in enumerate(zip(s_list, t_list)):
        rtol, atol = TOLERANCE.get(_dtype_name(t), (0, 0))
        if tuple(s.shape) != tuple(t.shape):
            return f"output {i} shape {tuple(s.shape)} != {tuple(t.shape)}"
        if _dtype_name(s) != _dtype_name(t):
            return f"output {i} dtype {_dtype_name(s)} != {_dtype_name(t)}"
        if values:
            a, b = _numpy(s), _numpy(t)
            if a.dtype.kind in "fc":
                if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                    return f"output {i} values differ (max {np.nanmax(np.abs(a - b)):.3g})"
            elif not np.array_equal(a, b) and not (
                    ties_of is not None and _select_same_values(ties_of, a, b)):
                return f"output {i} values differ"
    return ""


def _grads(sf_out, torch_out, sf_args, torch_args) -> str:
    """Gradients of sum(out * cotangent) for every float64 input requiring grad."""
    pairs = [(s, t) for s, t in zip(_outputs(sf_out), _outputs(torch_out))
             if t.dtype == torch.float64 and t.requires_grad]
    if not pairs:
        return ""
    rng = np.random.default_rng(0)
    cot = [rng.standard_normal(tuple(t.shape)) for _, t in pairs]
    t_in = [x for x in _leaves(torch_args) if x.requires_grad]
    s_in = [x for x in _leaves(sf_args) if x.requires_grad]
    if len(t_in) != len(s_in):
        return "inputs requiring grad differ"
    t_grads = torch.autograd.grad([t for _, t in pairs], t_in, [torch.tensor(c) for c in cot],
                                  allow_unused=True)
    for x in s_in:
        x.grad = None
    # an output shapeflow knows to be constant (floor division) contributes zero, as in PyTorch
    terms = [(s * sf.tensor(c)).sum() for (s, _), c in zip(pairs, cot) if s.requires_grad]
    if terms:
        sum(terms[1:], terms[0]).backward()
    for i, (s, t) in enumerate(zip(s_in, t_grads)):
        if t is None:
            continue
        if s.grad is None:
            if np.any(_numpy(t)):
                return f"input {i} got no gradient"
            continue
        if not np.allclose(_numpy(s.grad), _numpy(t), *GRAD_TOLERANCE, equal_nan=True):
            return f"input {i} gradient differs"
    return ""


def run_pair(op, dtype: str) -> Outcome:
    """Check up to SAMPLES_PER_PAIR samples of one entry at one dtype."""
    fn = shapeflow_callable(op)
    if fn is None:
        return Outcome(False, "no callable")
    tdtype = DTYPES[dtype]
    grad = (dtype == "float64" and op.supports_autograd
            and tdtype in op.supported_backward_dtypes("cpu"))
    values = entry_id(op) not in NONDETERMINISTIC and op.name not in NONDETERMINISTIC
    torch.manual_seed(0)
    checked = 0
    samples = op.sample_inputs("cpu", tdtype, requires_grad=grad)
    for sample in itertools.islice(samples, SAMPLES_PER_PAIR * 3):
        try:
            t_out = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # noqa: BLE001  (a sample PyTorch itself refuses is no test)
            continue
        t_out = sample.output_process_fn_grad(t_out)
        s_args = to_sf([sample.input, list(sample.args), dict(sample.kwargs)], grad)
        try:
            s_out = fn(s_args[0], *s_args[1], **s_args[2])
            s_out = sample.output_process_fn_grad(s_out)
        except Exception as err:  # noqa: BLE001  (recorded, not raised: this is a census)
            return Outcome(False, f"raised {type(err).__name__}: {str(err)[:120]}")
        # a dropout sample (sdpa's dropout_p) draws: its values are PyTorch's generator's
        sample_values = values and not sample.kwargs.get("dropout_p")
        try:
            ties = (_numpy(sample.input) if op.name in TIES_IN_ANY_ORDER
                    and isinstance(sample.input, torch.Tensor) else None)
            reason = _compare(s_out, t_out, sample_values, ties)
        except Exception as err:  # noqa: BLE001
            reason = f"comparison raised {type(err).__name__}: {str(err)[:100]}"
        if not reason and grad and sample_values:
            try:
                reason = _grads(s_out, t_out, s_args,
                                [sample.input, list(sample.args), dict(sample.kwargs)])
            except Exception as err:  # noqa: BLE001
                reason = f"backward raised {type(err).__name__}: {str(err)[:100]}"
        if reason:
            return Outcome(False, reason)
        checked += 1
        if checked == SAMPLES_PER_PAIR:
            break
    return Outcome(True, f"{checked} samples") if checked else Outcome(False, "no usable sample")


def pairs(op) -> list[str]:
    """The dtypes of DTYPES this entry supports on cpu."""
    supported = set(op.supported_dtypes("cpu"))
    return [name for name, d in DTYPES.items() if d in supported]
