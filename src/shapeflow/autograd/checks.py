"""Check an op's backward against float64 central differences."""

from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..tensor import Tensor


def _outputs(fn, inputs):
    out = fn(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, seed: int = 0) -> bool:
    """True if fn's analytic gradients match finite differences (inputs should be float64).

    Compares d/dx of sum(out * v) for a fixed random v per output, which checks every
    entry of the vector-Jacobian product at the cost of 2 * numel forward calls.
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    rng = np.random.default_rng(seed)
    outs = _outputs(fn, inputs)
    vs = [rng.standard_normal(o.shape) if o.dtype.is_floating_point else None for o in outs]

    def scalar(args) -> float:
        from ..autograd.grad_mode import no_grad

        with no_grad():
            res = _outputs(fn, args)
        return float(sum((o._data.astype(np.float64) * v).sum()
                         for o, v in zip(res, vs) if v is not None))

    from .engine import grad as autograd_grad

    total = None
    for o, v in zip(outs, vs):
        if v is None or not o.requires_grad:
            continue
        term = (o * Tensor._make(v.astype(o.dtype.np), v.shape, o.dtype, o.device)).sum()
        total = term if total is None else total + term
    if total is None:
        raise GraphError("gradcheck: no output requires grad")
    analytic = autograd_grad(total, [inputs[i] for i in wrt], allow_unused=True)
    for k, i in enumerate(wrt):
        x = inputs[i]
        base = x._data.copy()
        numeric = np.zeros(base.shape, dtype=np.float64)
        flat = numeric.reshape(-1)
        for j in range(base.size):
            args = list(inputs)
            plus, minus = base.copy(), base.copy()
            plus.reshape(-1)[j] += eps
            minus.reshape(-1)[j] -= eps
            args[i] = Tensor._make(plus, x.shape, x.dtype, x.device)
            f_plus = scalar(args)
            args[i] = Tensor._make(minus, x.shape, x.dtype, x.device)
            f_minus = scalar(args)
            flat[j] = (f_plus - f_minus) / (2 * eps)
        a = np.zeros_like(numeric) if analytic[k] is None else analytic[k]._data.astype(np.float64)
        if not np.allclose(a, numeric, atol=atol, rtol=rtol):
            if not raise_exception:
                return False
            err = np.abs(a - numeric).max()
            raise GraphError(
                f"gradcheck: analytic and numerical gradients of input {i} differ "
                f"(max abs difference {err:.3g})\n analytic:\n{a}\n numerical:\n{numeric}",
                op="gradcheck",
            )
    return True
