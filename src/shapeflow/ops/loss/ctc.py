"""Connectionist temporal classification (ctc_loss): the negative log-likelihood of a label
sequence summed over every alignment of it to the input frames, by the alpha-beta recursion
in log space (one step per frame, vectorized over the batch and label positions)."""

from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..base import X0, Op, Saved, apply
from ..movement.index_arrays import host
from ..registry import public
from ._common import _reduction

_OP = "ctc_loss"


class _Plan:
    """The host-side description of a batch: extended labels (blank, l1, blank, l2, ...,
    blank) padded to K = 2 * max target length + 1, the lengths, and where a label may be
    reached by skipping the blank before it."""

    def __init__(self, targets: list[list[int]], input_lengths: list[int], blank: int) -> None:
        n = len(targets)
        smax = max((len(t) for t in targets), default=0)
        self.K = 2 * smax + 1
        ext = host.full((n, self.K), blank, dtype=host.int64)
        for i, t in enumerate(targets):
            ext[i, 1:2 * len(t):2] = t
        skip = host.zeros((n, self.K), dtype=bool)
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
        self.ext, self.skip = ext, skip
        self.target_lengths = host.asarray([len(t) for t in targets], dtype=host.int64)
        self.input_lengths = host.asarray(input_lengths, dtype=host.int64)
        self.valid = host.arange(self.K)[None, :] < (2 * self.target_lengths + 1)[:, None]


def _shift(xp, a, by: int, fill):
    """a moved by `by` positions along the last axis (right if by > 0), fill entering."""
    out = xp.full(a.shape, fill, dtype=a.dtype)
    if by > 0:
        out[..., by:] = a[..., :-by]
    else:
        out[..., :by] = a[..., -by:]
    return out


def _alpha(xp, lp_ext, skip, valid):
    """log alpha[t, n, s]: all prefixes of alignments that end frame t at extended label s."""
    T, n, K = lp_ext.shape
    ninf = -math.inf
    alpha = xp.full((T, n, K), ninf, dtype=lp_ext.dtype)
    if T == 0:
        return alpha
    alpha[0, :, 0] = lp_ext[0, :, 0]
    if K > 1:
        alpha[0, :, 1] = xp.where(valid[:, 1], lp_ext[0, :, 1], ninf)
    for t in range(1, T):
        a = alpha[t - 1]
        two = xp.where(skip, _shift(xp, a, 2, ninf), ninf)
        step = xp.logaddexp(xp.logaddexp(a, _shift(xp, a, 1, ninf)), two) + lp_ext[t]
        alpha[t] = xp.where(valid, step, ninf)
    return alpha


def _nll(xp, alpha, plan: _Plan, dev):
    """-log p(target | input) per sample: the two alignment ends at its last frame."""
    n = alpha.shape[1]
    rows = host.arange(n)
    last = host.maximum(plan.input_lengths - 1, 0)
    end = 2 * plan.target_lengths
    a_end = alpha[dev.from_numpy(last), dev.from_numpy(rows), dev.from_numpy(end)]
    a_pre = alpha[dev.from_numpy(last), dev.from_numpy(rows),
                  dev.from_numpy(host.maximum(end - 1, 0))]
    a_pre = xp.where(dev.from_numpy(end > 0), a_pre, -math.inf)
    ll = xp.logaddexp(a_end, a_pre)
    # no frames: only the empty target has an alignment
    ll = xp.where(dev.from_numpy(plan.input_lengths > 0), ll,
                  xp.where(dev.from_numpy(end == 0), 0.0, -math.inf))
    return -ll


def _gathered(xp, lp, plan: _Plan, dev):
    """log_probs at each sample's extended labels: [T, N, K]."""
    idx = xp.broadcast_to(dev.from_numpy(plan.ext)[None], (lp.shape[0],) + plan.ext.shape)
    return xp.take_along_axis(lp, idx, axis=2)


class CtcLoss(Op):
    """Per-sample CTC negative log-likelihood of log_probs [T, N, C]; output [N]."""

    name = "ctc_loss"

    def __init__(self, plan: _Plan | None, k: int, zero_infinity: bool) -> None:
        self.plan, self.K, self.zero_infinity = plan, k, zero_infinity

    def infer(self, lp):
        return (lp.shape[1],), lp.dtype

    def saved(self, lp, out):
        return (X0, Saved.new("log_alpha", (lp.shape[0], lp.shape[1], self.K), lp.dtype))

    def forward(self, lp):
        dev = self.device
        xp = dev.xp
        plan = self.plan
        lp_ext = _gathered(xp, lp, plan, dev)
        alpha = _alpha(xp, lp_ext, dev.from_numpy(plan.skip), dev.from_numpy(plan.valid))
        self.log_alpha = alpha
        nll = _nll(xp, alpha, plan, dev).astype(lp.dtype)
        if self.zero_infinity:
            nll = xp.where(xp.isinf(nll), xp.zeros((), dtype=nll.dtype), nll)
        return nll

    def backward(self, grad):
        lp, alpha = self.saved_tensors
        return (apply(CtcLossBackward(self.plan, self.zero_infinity), grad, lp, alpha),)


class CtcLossBackward(Op):
    """PyTorch's gradient of ctc_loss: exp(lp) - exp(log(sum of alpha beta at label c) + nll -
    lp) per frame before the input's end, zero after it. (It is the gradient with respect to
    the logits when log_probs = log_softmax(logits), which is how ctc is used.)"""

    name = "ctc_loss_backward"
    differentiable = False

    def __init__(self, plan: _Plan, zero_infinity: bool) -> None:
        self.plan, self.zero_infinity = plan, zero_infinity

    def infer(self, g, lp, alpha):
        return tuple(lp.shape), lp.dtype

    def forward(self, g, lp, alpha):
        dev = self.device
        xp = dev.xp
        plan = self.plan
        T, n, C = lp.shape
        ninf = -math.inf
        lp_ext = _gathered(xp, lp, plan, dev)
        skip, valid = dev.from_numpy(plan.skip), dev.from_numpy(plan.valid)
        skip_next = _shift(xp, skip, -2, False)  # s + 2 is reachable from s
        lengths = dev.from_numpy(plan.input_lengths)
        rows, end = host.arange(n), 2 * plan.target_lengths
        beta = xp.full(alpha.shape, ninf, dtype=alpha.dtype)
        last = host.maximum(plan.input_lengths - 1, 0)
        has = plan.input_lengths > 0
        for ends in (end, end - 1):
            ok = has & (ends >= 0)
            t_i, n_i, s_i = last[ok], rows[ok], ends[ok]
            beta[dev.from_numpy(t_i), dev.from_numpy(n_i), dev.from_numpy(s_i)] = \
                lp_ext[dev.from_numpy(t_i), dev.from_numpy(n_i), dev.from_numpy(s_i)]
        for t in range(T - 2, -1, -1):
            b = beta[t + 1]
            two = xp.where(skip_next, _shift(xp, b, -2, ninf), ninf)
            step = xp.logaddexp(xp.logaddexp(b, _shift(xp, b, -1, ninf)), two) + lp_ext[t]
            inside = (t < lengths - 1)[:, None] & valid
            beta[t] = xp.where(inside, step, beta[t])
        nll = _nll(xp, alpha, plan, dev)
        ab = alpha + beta
        top = ab.max(axis=2, keepdims=True)
        top = xp.where(xp.isfinite(top), top, 0.0)
        onehot = (dev.from_numpy(plan.ext)[:, :, None] == xp.arange(C)[None, None, :])
        sums = xp.matmul(xp.swapaxes(xp.exp(ab - top), 0, 1), onehot.astype(ab.dtype))
        sums = xp.swapaxes(sums, 0, 1)  # [T, N, C]: sum over the label positions holding c
        pos = sums > 0
        lcab = xp.where(pos, xp.log(xp.where(pos, sums, 1.0)) + top, ninf)
        finite = xp.isfinite(nll)
        safe = xp.where(finite, nll, 0.0)[None, :, None]
        # an impossible target (nll inf) gives NaN, as PyTorch's, without inf - inf warnings
        expo = xp.where(finite[None, :, None], lcab + safe - lp, math.nan)
        res = xp.exp(lp) - xp.exp(expo)
        live = xp.arange(T)[:, None] < lengths[None, :]  # frames past the input's end: zero
        if self.zero_infinity:
            live = live & ~xp.isinf(nll)[None, :]
        res = xp.where(live[:, :, None], res * g[None, :, None], 0.0)
        return res.astype(lp.dtype)


def _ints(op: str, x, what: str) -> list[int]:
    """Lengths given as a tensor, list or tuple, as a list of ints."""
    if isinstance(x, Tensor):
        if x.dtype.is_floating_point or x.dtype.is_bool:
            raise DTypeError(f"{op}: {what} must hold integers, got {x.dtype}", op=op,
                             operands=[(what, describe(x))])
        if x._data is None:
            return None
        return [int(v) for v in host.asarray(x.tolist()).reshape(-1)]
    if isinstance(x, int):
        return [x]
    return [int(v) for v in x]


def _split_targets(targets: Tensor, target_lengths: list[int], n: int) -> list[list[int]]:
    """Each sample's label ids, from padded [N, S] targets or the concatenated 1-D form."""
    flat = [int(v) for v in host.asarray(targets.tolist()).reshape(-1)]
    if targets.ndim == 2:
        width = targets.shape[1]
        return [flat[i * width:i * width + k] for i, k in enumerate(target_lengths)]
    out, at = [], 0
    for k in target_lengths:
        out.append(flat[at:at + k])
        at += k
    return out


@public(functional=True)
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """CTC loss of log_probs [T, N, C] (or [T, C]) for targets padded [N, S] or concatenated;
    'mean' divides each loss by its target length, then averages over the batch."""
    reduction = _reduction(_OP, None, None, reduction)
    ops = [("log_probs", describe(log_probs)), ("targets", describe(targets))]
    if not log_probs.dtype.is_floating_point:
        raise DTypeError(f"{_OP}: log_probs must be floating point, got {log_probs.dtype}",
                         op=_OP, operands=ops)
    if targets.dtype.is_floating_point or targets.dtype.is_bool:
        raise DTypeError(f"{_OP}: targets must hold integer class ids, got {targets.dtype}",
                         op=_OP, operands=ops, hint="use targets.long()")
    batched = log_probs.ndim == 3
    if log_probs.ndim not in (2, 3):
        raise ShapeRuntimeError(f"{_OP}: log_probs must be [T, N, C] or [T, C], got "
                                f"{format_shape(log_probs.shape)}", op=_OP, operands=ops)
    lp = log_probs if batched else log_probs.unsqueeze(1)
    if not batched:
        targets = targets.reshape(1, -1)
    T, n, C = lp.shape
    if targets.ndim not in (1, 2) or (targets.ndim == 2 and targets.shape[0] != n):
        raise ShapeRuntimeError(f"{_OP}: targets must be [{n}, S] (padded) or 1-D (all "
                                f"targets concatenated), got {format_shape(targets.shape)}",
                                op=_OP, operands=ops)
    if not 0 <= blank < C:
        raise ShapeError(f"{_OP}: blank {blank} must be a class in [0, {C})", op=_OP,
                         operands=ops)
    in_len = _ints(_OP, input_lengths, "input_lengths")
    tg_len = _ints(_OP, target_lengths, "target_lengths")
    for name, got in (("input_lengths", in_len), ("target_lengths", tg_len)):
        if got is not None and len(got) != n:
            raise ShapeRuntimeError(f"{_OP}: {name} must have one length per sample ({n}), "
                                    f"got {len(got)}", op=_OP, operands=ops)
    plan = None
    if lp._data is not None and targets._data is not None and None not in (in_len, tg_len):
        if any(not 0 <= k <= T for k in in_len):
            raise ShapeRuntimeError(f"{_OP}: input_lengths {in_len} must lie in [0, {T}]",
                                    op=_OP, operands=ops)
        limit = targets.shape[1] if targets.ndim == 2 else targets.shape[0]
        if any(k < 0 for k in tg_len) or (targets.ndim == 2 and max(tg_len) > limit) or (
                targets.ndim == 1 and sum(tg_len) > limit):
            raise ShapeRuntimeError(f"{_OP}: target_lengths {tg_len} exceed the targets "
                                    f"{format_shape(targets.shape)}", op=_OP, operands=ops)
        labels = _split_targets(targets, tg_len, n)
        if any(not 0 <= c < C or c == blank for row in labels for c in row):
            raise ShapeRuntimeError(f"{_OP}: target ids must be classes in [0, {C}) other than "
                                    f"blank {blank}", op=_OP, operands=ops)
        plan = _Plan(labels, in_len, blank)
        k = plan.K
    elif tg_len is not None:
        k = 2 * max(tg_len, default=0) + 1
    else:  # meta with tensor lengths: the longest target the targets could hold
        k = 2 * (targets.shape[1] if targets.ndim == 2 else targets.shape[0]) + 1
    loss = apply(CtcLoss(plan, k, zero_infinity), lp)
    if reduction == "mean":
        from ...factories import tensor

        lengths = (target_lengths if isinstance(target_lengths, Tensor)
                   else tensor(tg_len, device=lp.device)).reshape(n)
        return (loss / lengths.clamp(min=1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.reshape(())
