"""Einstein summation (einsum): the equation parsed once, one primitive, gradients as einsums."""

from __future__ import annotations

import builtins
import string

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import dims_equal
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import LAYER_INPUT, Op, Saved, apply
from ..reduce import expand_to
from ..registry import public

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
        if dt.is_bool:
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


@public()
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
