"""Linear algebra: matmul for every rank PyTorch accepts, outer, einsum."""

from __future__ import annotations

import builtins
import string

from ..autograd.autocast_state import hot as _autocast_hot
from ..device import cpu
from ..dtypes import float32, float64, promote_types
from ..errors import DTypeError, ShapeError, ShapeRuntimeError
from ..shape import broadcast_shapes, dims_equal, format_shape, prod_dims
from ..tensor import Tensor, describe
from . import autocast as _autocast
from .base import LAYER_INPUT, Op, Saved, apply
from .reduce import expand_to

_A = Saved.input(0, LAYER_INPUT)
_B = Saved.input(1, LAYER_INPUT)
# what matmul keeps: each operand's gradient needs the other operand
_KEEP_B_A, _KEEP_B, _KEEP_A = (_B, _A), (_B,), (_A,)
# Below this many multiply-adds a float product runs as the array's own .dot(): a call into
# the kernel table costs ~5,000 instructions, a 4x4 matmul with grad ~22,000 in all, and
# under it the cpu table would run NumPy's product too (no MKL: its ctypes call costs more).
_DOT_MACS = cpu.kernels.MIN_MACS


def check_matmul(a, b, op: str = "matmul") -> None:
    """The contract of a @ b on the operands as given: ranks, dtypes, contraction size."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeRuntimeError(
            f"{op}: both operands need at least 1 dim", op=op,
            operands=[("a", describe(a)), ("b", describe(b))], hint="use * for scalars")
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"{op}: operands have different dtypes ({a.dtype} and {b.dtype})",
            op=op, operands=[("a", describe(a)), ("b", describe(b))],
            hint=f"cast one with .to({promote_types(a.dtype, b.dtype)})")
    if a.dtype.category == 0:
        raise DTypeError(f"{op}: bool tensors cannot be multiplied", op=op,
                         operands=[("a", describe(a)), ("b", describe(b))])
    sa, sb = a.shape, b.shape
    k_a, k_b = sa[-1], (sb[0] if b.ndim == 1 else sb[-2])
    same = dims_equal(k_a, k_b)
    if same:
        return
    rule = (f"({k_a} != {k_b})" if same is False else f"(cannot tell whether {k_a} == {k_b})")
    raise ShapeRuntimeError(
        f"{op}: contraction mismatch: {format_shape(sa)} @ {format_shape(sb)} {rule}",
        op=op, operands=[("a", describe(a)), ("b", describe(b))],
        hint=_transpose_hint(sa, sb))


class Matmul(Op):
    """a @ b for operands of 2 or more dims; batch dims broadcast."""

    name = "matmul"
    dot = False  # set by infer
    fold = False  # infer: a is batched and b a matrix, so b's gradient is one 2-D product

    def infer(self, a, b):
        sa, sb = a.shape, b.shape
        if len(sa) == 2 and len(sb) == 2:  # the common case, unpacked (no Shape indexing)
            (m, k), (k2, n) = sa, sb
            dt = a.dtype
            if a._data is not None:  # a computing device: concrete sizes, plain int arithmetic
                if k != k2 or dt is not b.dtype:
                    check_matmul(a, b)
                # small float products: .dot, decided here on ints rather than in forward
                # (or in the table) on array attributes
                self.dot = m * k * n < _DOT_MACS and (dt is float32 or dt is float64)
                return (m, n), dt
            if dt is not b.dtype or not dims_equal(k, k2):
                check_matmul(a, b)
            return (m, n), dt
        if a.dtype is not b.dtype or not dims_equal(sa[-1], sb[-2]):
            check_matmul(a, b)
        self.fold = len(sb) == 2
        batch = broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]), "matmul (batch dims)")
        return tuple(batch) + (sa[-2], sb[-1]), a.dtype

    def saved(self, a, b, out):
        if a.requires_grad:
            return _KEEP_B_A if b.requires_grad else _KEEP_B
        return _KEEP_A if b.requires_grad else ()

    def forward(self, a, b):
        return a.dot(b) if self.dot else self.device.kernels.matmul(a, b)

    def backward(self, g):
        saved = list(self.saved_tensors)
        b = saved.pop(0) if self.needs_grad(0) else None
        a = saved.pop(0) if self.needs_grad(1) else None
        if a is not None and self.fold:
            # b [k, n] met every matrix of a: one [k, rows] @ [rows, n] product sums them in
            # the accumulator (as PyTorch folds them), not after rounding each one
            # rows spelled out, not -1: a zero-size k or n leaves -1 unsolvable
            rows = prod_dims(tuple(a.shape[:-1]))
            return (g @ b.mT if b is not None else None,
                    a.reshape(rows, a.shape[-1]).mT @ g.reshape(rows, g.shape[-1]))
        # the engine sums over batch dims an operand was broadcast along
        return (g @ b.mT if b is not None else None, a.mT @ g if a is not None else None)


def _transpose_hint(sa, sb) -> str | None:
    if len(sa) >= 2 and dims_equal(sa[-2], sb[0] if len(sb) == 1 else sb[-2]):
        return "the first operand looks transposed: try a.mT @ b (or a.transpose(-2, -1))"
    if len(sb) >= 2 and dims_equal(sa[-1], sb[-1]):
        return "the second operand looks transposed: try a @ b.mT"
    return None


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """PyTorch's matmul: 1-D operands gain a dim for the product and lose it after."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if len(a.shape) >= 2 and len(b.shape) >= 2:
        return apply(Matmul(), a, b)
    check_matmul(a, b)
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    out = apply(Matmul(), a2, b2)
    shape = tuple(out.shape)
    if b.ndim == 1:
        shape = shape[:-1]
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:] if b.ndim != 1 else shape[:-1]
    return out.reshape(shape)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """The outer product of two 1-D tensors."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeRuntimeError("outer: both operands must be 1-D", op="outer",
                                operands=[("a", describe(a)), ("b", describe(b))])
    return a.unsqueeze(1) * b.unsqueeze(0)


def _rank_error(op: str, what: str, a: Tensor, b: Tensor) -> ShapeError:
    return ShapeRuntimeError(f"{op}: {what}, got {a.ndim}-D and {b.ndim}-D operands", op=op,
                             operands=[("a", describe(a)), ("b", describe(b))],
                             hint="use matmul (or @) for other ranks")


def mm(a: Tensor, b: Tensor) -> Tensor:
    """The product of two matrices (2-D only; matmul broadcasts, mm does not)."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if a.ndim != 2 or b.ndim != 2:
        raise _rank_error("mm", "both operands must be 2-D matrices", a, b)
    check_matmul(a, b, "mm")
    return apply(Matmul(), a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """A batch of matrix products: [B, n, m] @ [B, m, p] -> [B, n, p], with no broadcasting."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if a.ndim != 3 or b.ndim != 3:
        raise _rank_error("bmm", "both operands must be 3-D batches of matrices", a, b)
    check_matmul(a, b, "bmm")
    if not dims_equal(a.shape[0], b.shape[0]):
        raise ShapeRuntimeError(
            f"bmm: batch sizes differ ({a.shape[0]} and {b.shape[0]})", op="bmm",
            operands=[("a", describe(a)), ("b", describe(b))],
            hint="bmm does not broadcast the batch dim: use matmul (or @) to broadcast")
    return apply(Matmul(), a, b)


def mv(a: Tensor, b: Tensor) -> Tensor:
    """A matrix times a vector: [n, m] @ [m] -> [n]."""
    if a.ndim != 2 or b.ndim != 1:
        raise _rank_error("mv", "expected a 2-D matrix and a 1-D vector", a, b)
    check_matmul(a, b, "mv")
    return matmul(a, b)


def dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of the same size (a 0-d tensor)."""
    if a.ndim != 1 or b.ndim != 1:
        raise _rank_error("dot", "both operands must be 1-D", a, b)
    check_matmul(a, b, "dot")
    return matmul(a, b)


# ---- einsum -----------------------------------------------------------------------------
_LETTERS = string.ascii_letters  # einsum subscripts: [a-zA-Z], as in PyTorch and NumPy
_LETTER_SET = frozenset(_LETTERS)
_OPTIMIZE_WORK = 4096  # above this many multiply-adds NumPy's optimized path (BLAS) pays off


def _einsum_error(message: str, xs, specs=None, hint=None) -> ShapeError:
    names = [f"operand {i}" + (f" '{specs[i]}'" if specs else "") for i in range(len(xs))]
    return ShapeRuntimeError(f"einsum: {message}", op="einsum",
                             operands=[(n, describe(x)) for n, x in zip(names, xs)], hint=hint)


def _split_term(term: str, where: str, equation: str, xs):
    """(letters before '...', has '...', letters after) of one side of an equation."""
    before, sep, after = term.partition("...")
    if "." in before or "." in after:
        raise _einsum_error(f"{where} has a '.' that is not part of one '...' in "
                            f"{equation!r}", xs, hint="write '...' once per operand")
    for c in before + after:
        if c not in _LETTER_SET:
            raise _einsum_error(f"invalid subscript {c!r} in {where} of {equation!r}: "
                                "subscripts must be in [a-zA-Z]", xs)
    return before, bool(sep), after


class Einsum(Op):
    """Einstein summation; size-1 dims broadcast (as in PyTorch), '...' covers the rest."""

    name = "einsum"

    def __init__(self, equation: str) -> None:
        self.equation = equation

    def infer(self, *xs):
        self._parse(xs)
        dt = xs[0].dtype
        for x in xs[1:]:
            if x.dtype is not dt:
                raise DTypeError(
                    f"einsum: operands have different dtypes ({dt} and {x.dtype})",
                    op="einsum", operands=[(f"operand {i}", describe(t))
                                           for i, t in enumerate(xs)],
                    hint="cast them to one dtype with .to(...)")
        if dt.category == 0:
            raise DTypeError("einsum: bool tensors cannot be multiplied", op="einsum",
                             operands=[(f"operand {i}", describe(t)) for i, t in
                                       enumerate(xs)], hint="convert with .int() or .float()")
        self.sizes = self._sizes(xs)
        self.shapes = [x.shape for x in xs]
        self.dtype = dt
        return tuple(self.sizes[c] for c in self.out), dt

    def _parse(self, xs) -> None:
        """Canonical specs: one letter per dim of each operand, '...' dims given letters."""
        equation = self.equation
        eq = equation.replace(" ", "")
        lhs, arrow, rhs = eq.partition("->")
        if "->" in rhs or ("-" in eq and not arrow) or ">" in lhs:
            raise _einsum_error(f"malformed equation {equation!r}: use one '->'", xs)
        terms = lhs.split(",")
        if len(terms) != len(xs):
            raise _einsum_error(
                f"the equation {equation!r} has {len(terms)} operand(s) but "
                f"{len(xs)} tensor(s) were given", xs,
                hint="give one tensor per comma-separated term")
        used = set(eq) & _LETTER_SET
        parts, n_ell = [], 0
        for i, (term, x) in enumerate(zip(terms, xs)):
            before, ell, after = _split_term(term, f"operand {i}", equation, xs)
            named = len(before) + len(after)
            if named > x.ndim or (not ell and named != x.ndim):
                raise _einsum_error(
                    f"operand {i} has {x.ndim} dims but its subscripts {term!r} name "
                    f"{named}", xs, terms,
                    hint=None if ell else "add '...' to stand for the other dims")
            k = x.ndim - named if ell else 0
            n_ell = max(n_ell, k)
            parts.append((before, k, after))
        free = [c for c in _LETTERS if c not in used]
        if n_ell > len(free):
            raise _einsum_error(f"{equation!r} uses more dims than there are subscripts", xs)
        self.ell = ell_letters = "".join(free[:n_ell])
        self.specs = [b + ell_letters[n_ell - k:] + a for b, k, a in parts]
        if arrow:
            before, ell, after = _split_term(rhs, "the output", equation, xs)
            out = before + (ell_letters if ell else "") + after
            for c in before + after:
                if (before + after).count(c) > 1:
                    raise _einsum_error(f"output subscript {c} appears more than once in the "
                                        "output", xs, terms)
                if c not in lhs:
                    raise _einsum_error(f"output subscript {c} does not appear in the equation "
                                        "for any input operand", xs, terms)
        else:  # implicit: the '...' dims, then the letters seen once, in alphabetical order
            once = sorted(c for c in set(lhs) & _LETTER_SET if lhs.count(c) == 1)
            out = ell_letters + "".join(once)
        self.out = out
        self.terms = terms

    def _sizes(self, xs) -> dict:
        """Each letter's size; 1 broadcasts; a mismatch names the letter and both operands."""
        sizes, first = {}, {}
        for i, (spec, x) in enumerate(zip(self.specs, xs)):
            here = {}
            for c, s in zip(spec, x.shape):
                if c in here:  # a repeated letter (a diagonal): the sizes must be equal
                    if dims_equal(here[c], s) is not True:
                        raise _einsum_error(
                            f"subscript {c} is repeated for operand {i} but the sizes don't "
                            f"match, {here[c]} != {s}", xs, self.terms)
                    continue
                here[c] = s
                prev = sizes.get(c)
                if prev is None or (type(prev) is int and prev == 1):
                    sizes[c], first[c] = s, i
                    continue
                if (type(s) is int and s == 1) or dims_equal(prev, s):
                    continue
                what = (f"subscript {c}" if c not in self.ell else
                        f"'...' dim {self.ell.index(c) - len(self.ell)}")
                unsure = dims_equal(prev, s) is None
                raise _einsum_error(
                    f"{what} has size {prev} in operand {first[c]} but size {s} in operand "
                    f"{i}" + (" (cannot tell whether they are equal)" if unsure else ""),
                    xs, self.terms,
                    hint="sizes of one subscript must be equal (or 1, which broadcasts)")
        return sizes

    def saved(self, *xs, out):
        need = [x.requires_grad for x in xs]
        # operand j's gradient needs every other operand
        self.keep_idx = [j for j in range(len(xs))
                         if builtins.any(need[i] for i in range(len(xs)) if i != j)]
        return tuple(Saved.input(j, LAYER_INPUT) for j in self.keep_idx)

    def forward(self, *arrays):
        xp = self.device.xp
        sizes = self.sizes
        ops = []
        for spec, arr in zip(self.specs, arrays):
            want = tuple(sizes[c] for c in spec)
            ops.append(arr if arr.shape == want else xp.broadcast_to(arr, want))
        npd = self.dtype.np
        if self.dtype.is_floating_point and self.dtype.itemsize == 2:
            ops = [a.astype(xp.float32) for a in ops]  # accumulate half types in float32
        work = 1
        for s in sizes.values():
            work *= s
        optimize = len(ops) > 2 or work > _OPTIMIZE_WORK
        eq = ",".join(self.specs) + "->" + self.out
        out = xp.einsum(eq, *ops, optimize=optimize)
        out = xp.asarray(out)
        if out.dtype != npd:
            out = out.astype(npd)
        elif builtins.any(xp.may_share_memory(out, a) for a in arrays):
            out = out.copy()  # NumPy returns views for transposes and diagonals
        return out

    def backward(self, g):
        saved = dict(zip(self.keep_idx, self.saved_tensors))
        n = len(self.specs)
        grads = []
        for i, spec in enumerate(self.specs):
            if not self.needs_grad(i):
                grads.append(None)
                continue
            others = [(self.specs[j], saved[j]) for j in range(n) if j != i]
            uniq = "".join(dict.fromkeys(spec))
            present = set(self.out).union(*(set(s) for s, _ in others))
            target = "".join(c for c in uniq if c in present)
            eq = ",".join([self.out] + [s for s, _ in others]) + "->" + target
            gi = apply(Einsum(eq), g, *(t for _, t in others))
            # Letters only in operand i were summed in forward, and letters that were size 1
            # everywhere else were broadcast: the gradient is constant along them, so expand
            # it back (the engine sums it where operand i itself was the broadcast one).
            own = dict(zip(spec, self.shapes[i]))
            keep = tuple(gi.shape[target.index(c)] if c in present else 1 for c in uniq)
            want = tuple(own[c] if type(k) is int and k == 1 else k for c, k in zip(uniq, keep))
            if len(target) < len(uniq):
                gi = gi.reshape(keep)
            if not builtins.all(a is b for a, b in zip(want, keep)):
                gi = expand_to(gi, want)
            if len(uniq) < len(spec):
                gi = self._onto_diagonal(gi, uniq, spec, g)
            grads.append(gi)
        return tuple(grads)

    def _onto_diagonal(self, gi: Tensor, uniq: str, spec: str, g: Tensor) -> Tensor:
        """Place the gradient of a repeated subscript (ii) on the diagonal: gi * identity."""
        used = set("".join(self.specs) + self.out)
        fresh = iter(c for c in _LETTERS if c not in used)
        renamed, eyes, seen = [], [], set()
        for c in spec:
            if c not in seen:
                seen.add(c)
                renamed.append(c)
                continue
            f = next(fresh, None)
            if f is None:
                raise ShapeRuntimeError(
                    "einsum: too many subscripts to differentiate this diagonal",
                                 op="einsum")
            renamed.append(f)
            eyes.append((c + f, _identity(gi.shape[uniq.index(c)], g)))
        eq = ",".join([uniq] + [s for s, _ in eyes]) + "->" + "".join(renamed)
        return apply(Einsum(eq), gi, *(e for _, e in eyes))


def _identity(n, like: Tensor) -> Tensor:
    """The n x n identity on like's device (meta: shape only, n may be symbolic)."""
    data = like.device.xp.eye(n, dtype=like.dtype.np)
    return Tensor._make(data, (n, n), like.dtype, like.device)


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation over the operands, as torch.einsum ('bij,bjk->bik', a, b)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ShapeRuntimeError("einsum: at least one operand is needed", op="einsum")
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise DTypeError(f"einsum: operand {i} is a {type(x).__name__}, not a tensor",
                             op="einsum")
    if _autocast_hot.on and len(operands) > 1:  # sf.autocast: PyTorch's runs bmm
        operands = _autocast.lower(*operands)
    return apply(Einsum(equation), *operands)


METHODS = ("matmul", "outer", "mm", "bmm", "mv", "dot")
__all__ = [*METHODS, "einsum"]
