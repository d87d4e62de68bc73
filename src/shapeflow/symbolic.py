"""Symbolic dims: named positive integers and the size expressions shapes make of them.

A `Dim` is a polynomial (integer coefficients, rational after an exact division)
over atoms: symbols, and `x // k` / `x % k` that no declared fact simplifies.
Arithmetic whose result has no symbols left returns a plain `int`; a comparison
that cannot be decided raises `ShapeError` in the user's names.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable
from contextlib import contextmanager
from fractions import Fraction
from functools import lru_cache
from numbers import Integral

from .errors import ShapeError

__all__ = [
    "Dim", "as_dim", "assume", "dim_eq", "dim_le", "dim_lt", "dims", "divides", "evaluator",
    "exact_div", "is_symbolic", "prod",
]

_INF = math.inf


class _Op:
    """An atom `arg // k` or `arg % k` (k > 1) that facts could not simplify."""

    __slots__ = ("op", "arg", "k", "key", "_hash")

    def __init__(self, op: str, arg: Dim, k: int) -> None:
        self.op, self.arg, self.k = op, arg, k
        # A structural, total sort key: symbols (0, name) sort before these.
        self.key = (1, op, k, tuple((_mono_key(m), c) for m, c in arg._terms))
        self._hash = hash((op, k, arg._terms))

    def __eq__(self, other: object) -> bool:
        return (type(other) is _Op and self._hash == other._hash and self.op == other.op
                and self.k == other.k and self.arg._terms == other.arg._terms)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        (m, c), *more = self.arg._terms
        inner = str(self.arg)
        if more or type(c) is not int or c < 0 or (len(m) == 1 and type(m[0]) is _Op):
            inner = f"({inner})"
        return f"{inner}//{self.k}" if self.op == "//" else f"{inner} % {self.k}"


def _atom_key(a) -> tuple:
    return (0, a) if type(a) is str else a.key


@lru_cache(maxsize=65536)
def _mono_key(m: tuple) -> tuple:
    # Higher degree first, then by name: the print order, and a monomial order for division.
    return (-len(m), tuple(_atom_key(a) for a in m))


@lru_cache(maxsize=65536)
def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    if not m1 or not m2:
        return m1 or m2
    return tuple(sorted(m1 + m2, key=_atom_key))


def _num(c):
    """A Fraction that is a whole number becomes an int (ints stay the fast path)."""
    return c.numerator if type(c) is Fraction and c.denominator == 1 else c


def _binary(fn, both: bool = False):
    """The operator method(s) for `fn(a, b)`: ints and Dims on either side, else NotImplemented."""
    def op(self, other):
        o = _coerce(other)
        return NotImplemented if o is None else fn(self, o)

    def rop(self, other):
        o = _coerce(other)
        return NotImplemented if o is None else fn(o, self)

    return (op, rop) if both else op


class Dim:
    """A named positive-integer size, or an expression of them (immutable and hashable).

    `Dim("H", multiple_of=16)` states a fact. Symbols are identified by name; where
    one name meets different facts, the stronger (lcm) fact holds for both.
    """

    __slots__ = ("_terms", "_facts", "_names", "_hash", "_bounds", "_str")

    def __new__(cls, name: str, multiple_of: int = 1) -> Dim:
        if not isinstance(name, str) or not name.isidentifier():
            raise ShapeError(f"a dim name must be an identifier, got {name!r}")
        if isinstance(multiple_of, bool) or not isinstance(multiple_of, Integral) \
                or multiple_of < 1:
            raise ShapeError(f"multiple_of must be a positive int, got {multiple_of!r}")
        return _symbol(name, int(multiple_of))

    # -- what it is -------------------------------------------------------------------
    @property
    def free_names(self) -> frozenset[str]:
        """The names of the symbols this expression uses."""
        return self._names

    @property
    def name(self) -> str | None:
        """The symbol's name if this Dim is a bare symbol, else None."""
        (m, c), *more = self._terms
        return m[0] if not more and c == 1 and len(m) == 1 and type(m[0]) is str else None

    @property
    def facts(self) -> dict[str, int]:
        """`{name: multiple_of}` for every symbol in the expression."""
        return dict(self._facts)

    def __str__(self) -> str:
        if self._str is None:
            self._str = _format(self._terms)
        return self._str

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __hash__(self) -> int:
        return self._hash

    def __bool__(self) -> bool:
        return True  # dims are positive

    def __reduce__(self):
        return (_new, (self._terms, self._facts, self._names))

    def __copy__(self) -> Dim:
        return self

    def __deepcopy__(self, memo) -> Dim:
        return self

    def __index__(self) -> int:
        names = " and ".join(sorted(self._names))
        raise ShapeError(
            f"{self} is symbolic; bind it before using it as an int",
            hint=f"give {names} sizes with .subs(...), or trace on device='meta'")

    __int__ = __index__
    __float__ = __index__

    # -- arithmetic and comparison (comparisons: bool when decidable, else ShapeError) -------
    # (lambdas, because the functions they call are defined below the class)
    __add__ = __radd__ = _binary(lambda a, b: _add(a, b))
    __sub__, __rsub__ = _binary(lambda a, b: _add(a, _mul(b, -1)), both=True)
    __mul__ = __rmul__ = _binary(lambda a, b: _mul(a, b))
    __floordiv__, __rfloordiv__ = _binary(lambda a, b: _floordiv_any(a, b), both=True)
    __mod__, __rmod__ = _binary(lambda a, b: _mod_any(a, b), both=True)
    __truediv__, __rtruediv__ = _binary(lambda a, b: exact_div(a, b), both=True)
    __eq__ = _binary(lambda a, b: _decided(dim_eq(a, b), a, "==", b))
    __ne__ = _binary(lambda a, b: not _decided(dim_eq(a, b), a, "!=", b))
    __lt__ = _binary(lambda a, b: _decided(dim_lt(a, b), a, "<", b))
    __le__ = _binary(lambda a, b: _decided(dim_le(a, b), a, "<=", b))
    __gt__ = _binary(lambda a, b: _decided(dim_lt(b, a), a, ">", b))
    __ge__ = _binary(lambda a, b: _decided(dim_le(b, a), a, ">=", b))

    def __neg__(self) -> Dim:
        return _scale(self, -1)

    def __pos__(self) -> Dim:
        return self

    def __pow__(self, e):
        if isinstance(e, bool) or not isinstance(e, Integral) or e < 0:
            return NotImplemented
        out = 1
        for _ in range(int(e)):
            out = _mul(out, self)
        return out

    # -- evaluation ---------------------------------------------------------------------
    def subs(self, **values: int | Dim) -> int | Dim:
        """Bind some symbols to sizes (or expressions); an int once none is left."""
        env = {n: _check_value(n, v, self._facts[n]) for n, v in values.items()
               if n in self._names}
        if not env:
            return self
        out = _subst(self, env)
        if type(out) is Fraction:
            bound = ", ".join(f"{n}={v}" for n, v in env.items())
            raise ShapeError(f"{self} is not a whole number at {bound}",
                             hint="a '/' in a dim string states that the division is exact")
        return out

    def evaluate(self, env: dict[str, int]) -> int:
        """The size at `env` (a dict name -> int that binds every symbol)."""
        missing = sorted(self._names - env.keys())
        if missing:
            raise ShapeError(f"cannot evaluate {self}: bind {_join(missing)}")
        out = self.subs(**{n: env[n] for n in self._names})
        if type(out) is not int:
            raise ShapeError(f"evaluating {self} at {env} left the symbolic {out}")
        return out


def _python(x: Dim) -> str:
    """x as a Python expression over `e[name]` (integer arithmetic, exact)."""
    den = 1
    for _, c in x._terms:
        if type(c) is Fraction:
            den = math.lcm(den, c.denominator)
    parts = []
    for m, c in x._terms:
        factors = [str(int(c * den))] + [
            f"e[{a!r}]" if type(a) is str else f"(({_python(a.arg)}){a.op}{a.k})" for a in m]
        parts.append("*".join(factors))
    body = " + ".join(parts) or "0"
    return f"({body})//{den}" if den != 1 else f"({body})"


def evaluator(x: int | Dim):
    """A fast function env -> int of a size (sf.compile binds many sizes per shape): what
    `x.evaluate(env)` gives, without the symbolic algebra on each call."""
    if type(x) is not Dim:
        return lambda e, v=x: v
    return eval(f"lambda e: {_python(x)}")  # names are identifiers (Dim checks them)


def _new(terms: tuple, facts: dict, names: frozenset) -> Dim:
    d = object.__new__(Dim)
    d._terms, d._facts, d._names = terms, facts, names
    d._hash = hash(terms)
    d._bounds = d._str = None
    return d


@lru_cache(maxsize=4096)
def _symbol(name: str, multiple_of: int) -> Dim:
    return _new((((name,), 1),), {name: multiple_of}, frozenset((name,)))


def _build(coeffs: dict, facts: dict):
    """The canonical Dim of `{monomial: coeff}`, or the number if no symbol is left."""
    items = [(m, _num(c)) for m, c in coeffs.items() if c]
    if not items:
        return 0
    if len(items) == 1 and not items[0][0]:
        return items[0][1]
    items.sort(key=lambda t: _mono_key(t[0]))
    names = set()
    for m, _ in items:
        for a in m:
            if type(a) is str:
                names.add(a)
            else:
                names |= a.arg._names
    if len(names) != len(facts):  # something cancelled: drop its facts
        facts = {n: facts[n] for n in names}
    return _new(tuple(items), facts, frozenset(names))


def _coerce(x):
    """An int or Dim operand, or None (so the operator returns NotImplemented)."""
    if type(x) is int or isinstance(x, Dim):
        return x
    if isinstance(x, Integral):
        return int(x)
    return None


def _operand(x, what: str = "a size"):
    o = _coerce(x)
    if o is None:
        raise ShapeError(f"{what} must be an int or a Dim, got {x!r}")
    return o


# -- polynomial arithmetic (operands: int, Fraction or Dim) --------------------------------
def _merge(a: Dim, b: Dim):
    """Both operands under one set of facts: the lcm where a name has two."""
    fa, fb = a._facts, b._facts
    if fa is fb:
        return a, b, fa
    merged = fa | fb
    clash = [n for n in (fa.keys() & fb.keys()) if fa[n] != fb[n]]
    if not clash:
        return a, b, merged
    for n in clash:
        merged[n] = math.lcm(fa[n], fb[n])
    return _refact(a, merged), _refact(b, merged), merged


def _refact(x: Dim, facts: dict):
    sub = {n: facts[n] for n in x._names}
    if all(type(a) is str for m, _ in x._terms for a in m):
        return _new(x._terms, sub, x._names)  # facts only change `//` and `%` atoms
    return _subst(x, {n: _symbol(n, m) for n, m in sub.items()})


def _add(a, b):
    if not isinstance(a, Dim):
        if not isinstance(b, Dim):
            return _num(a + b)
        a, b = b, a
    if not isinstance(b, Dim):
        if not b:
            return a
        t = a._terms
        if not t[-1][0]:  # the constant sorts last
            c = _num(t[-1][1] + b)
            t = t[:-1] + ((((), c),) if c else ())
        else:
            t = t + (((), b),)
        return _new(t, a._facts, a._names)
    a, b, facts = _merge(a, b)
    if not isinstance(a, Dim) or not isinstance(b, Dim):
        return _add(a, b)
    d = dict(a._terms)
    for m, c in b._terms:
        d[m] = d.get(m, 0) + c
    return _build(d, facts)


def _scale(x: Dim, n):
    if not n:
        return 0
    if n == 1:
        return x
    return _new(tuple((m, _num(c * n)) for m, c in x._terms), x._facts, x._names)


def _mul(a, b):
    if not isinstance(a, Dim):
        return _num(a * b) if not isinstance(b, Dim) else _scale(b, a)
    if not isinstance(b, Dim):
        return _scale(a, b)
    a, b, facts = _merge(a, b)
    if not isinstance(a, Dim) or not isinstance(b, Dim):
        return _mul(a, b)
    d = {}
    for m1, c1 in a._terms:
        for m2, c2 in b._terms:
            m = _mono_mul(m1, m2)
            d[m] = d.get(m, 0) + c1 * c2
    return _build(d, facts)


def _term_divisible(m: tuple, c, k: int, facts: dict) -> bool:
    """Whether c*m is a multiple of k for every value: m is a multiple of its symbols' facts."""
    f = 1
    for a in m:
        if type(a) is str:
            f *= facts[a]
    if type(c) is int:
        return (c * f) % k == 0
    return (c.numerator * f) % (c.denominator * k) == 0


def _floordiv(x: Dim, k: int):
    """x // k for k > 0: terms divisible by k leave as exact quotients, the rest stays an atom."""
    if k == 1:
        return x
    facts = x._facts
    quot, rest = {}, {}
    for m, c in x._terms:
        if (c % k == 0) if not m else _term_divisible(m, c, k, facts):
            quot[m] = c // k if type(c) is int and c % k == 0 else Fraction(c) / k
        else:
            rest[m] = c  # a constant that k does not divide stays inside: (H - 3)//2
    q = _build(quot, facts)
    r = _build(rest, facts)
    if not isinstance(r, Dim):
        return _add(q, math.floor(Fraction(r) / k))
    lo, hi = _bounds(r)
    (m, c), *more = r._terms
    if lo != -_INF and hi != _INF and lo // k == hi // k:
        part = lo // k  # the quotient is known from the bounds: (H % 16)//16 == 0
    elif not more and c == 1 and len(m) == 1 and type(m[0]) is _Op and m[0].op == "//":
        part = _floordiv(m[0].arg, m[0].k * k)  # (x//a)//b == x//(a*b)
    else:
        part = _new((((_Op("//", r, k),), 1),), r._facts, r._names)
    return _add(q, part)


def _mod(x: Dim, k: int):
    """x % k for k > 0: terms divisible by k drop out; 0 when all of x is provably divisible."""
    if k == 1:
        return 0
    facts = x._facts
    rest = {}
    for m, c in x._terms:
        if not m:
            rest[m] = c % k
        elif not _term_divisible(m, c, k, facts):
            rest[m] = c
    r = _build(rest, facts)
    if not isinstance(r, Dim):
        return r
    lo, hi = _bounds(r)
    (m, c), *more = r._terms
    if lo >= 0 and hi < k:
        return r
    if not more and c == 1 and len(m) == 1 and type(m[0]) is _Op and m[0].op == "%" \
            and m[0].k % k == 0:
        return _mod(m[0].arg, k)  # (x % 32) % 16 == x % 16
    return _new((((_Op("%", r, k),), 1),), r._facts, r._names)


def _floordiv_any(a, b):
    if type(b) is int:
        if b == 0:
            raise ZeroDivisionError(f"{a} // 0")
        if type(a) is int:
            return a // b
        return _floordiv(a, b) if b > 0 else _floordiv(_scale(a, -1), -b)
    q, ok = _quotient(a, b)
    if ok:
        return q
    raise ShapeError(f"cannot floor-divide {a} by the symbolic {b} unless it divides exactly",
                     hint="divide by an int, or state facts that make the division exact")


def _mod_any(a, b):
    if type(b) is int:
        if b == 0:
            raise ZeroDivisionError(f"{a} % 0")
        if type(a) is int:
            return a % b
        return _mod(a, b) if b > 0 else _mul(_mod(_scale(a, -1), -b), -1)
    if _quotient(a, b)[1]:
        return 0
    raise ShapeError(f"cannot take {a} % {b}: the divisor is symbolic",
                     hint="take % by an int, or state facts that make the division exact")


def _subst(x: Dim, env: dict):
    """Re-evaluate x with some symbols replaced by ints or Dims (facts of the rest kept)."""
    total = 0
    for m, c in x._terms:
        v = c
        for a in m:
            if type(a) is str:
                w = env.get(a)
                if w is None:
                    w = _symbol(a, x._facts[a])
            else:
                arg = _subst(a.arg, env)
                if type(arg) is Fraction:
                    raise ShapeError(f"{a.arg} is not a whole number here")
                w = _floordiv_any(arg, a.k) if a.op == "//" else _mod_any(arg, a.k)
            v = _mul(v, w)
        total = _add(total, v)
    return total


def _check_value(name: str, v, multiple_of: int):
    if isinstance(v, Dim):
        return v
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise ShapeError(f"{name} must be bound to an int or a Dim, got {v!r}")
    if v < 1:
        raise ShapeError(f"{name}={v}: dims are positive integers")
    if v % multiple_of:
        raise ShapeError(f"{name}={v} breaks the fact {name} % {multiple_of} == 0")
    return int(v)


# -- what can be proved ------------------------------------------------------------------
def _pm(x, y):
    return 0 if x == 0 or y == 0 else x * y  # 0 * inf is 0 here, not nan


class _Ranges(threading.local):
    """Ranges assumed for symbols in this thread (sf.compile traces a shape bucket with
    them): {name: (lo, hi)}; empty outside `assume`."""

    def __init__(self) -> None:
        self.ranges: dict[str, tuple] = {}


_assumed = _Ranges()


@contextmanager
def assume(ranges: dict[str, tuple]):
    """Within the block, symbol `name` lies in [lo, hi] (hi may be math.inf): comparisons
    the ranges decide are decided, as a shape bucket does for a compiler."""
    old = _assumed.ranges
    _assumed.ranges = {**old, **ranges}
    try:
        yield
    finally:
        _assumed.ranges = old


def _bounds(x: Dim) -> tuple:
    """An interval (lo, hi) that holds x for every value of its symbols (each >= its fact,
    and within the range `assume` gives it)."""
    ranges = _assumed.ranges
    if x._bounds is None or ranges:
        lo = hi = 0
        for m, c in x._terms:
            tlo = thi = c
            for a in m:
                if type(a) is str:
                    alo, ahi = x._facts[a], _INF
                    if a in ranges:
                        rlo, rhi = ranges[a]
                        f = x._facts[a]
                        alo, ahi = max(alo, -(-rlo // f) * f), min(ahi, rhi)
                elif a.op == "%":
                    alo, ahi = 0, a.k - 1
                else:
                    blo, bhi = _bounds(a.arg)
                    alo = blo if blo == -_INF else blo // a.k
                    ahi = bhi if bhi == _INF else bhi // a.k
                ps = (_pm(tlo, alo), _pm(tlo, ahi), _pm(thi, alo), _pm(thi, ahi))
                tlo, thi = min(ps), max(ps)
            lo, hi = lo + tlo, hi + thi
        if ranges:  # true under this assumption only: not kept on the Dim
            return (lo, hi)
        x._bounds = (lo, hi)
    return x._bounds


def _never_zero(x: Dim) -> bool:
    """Whether x != 0 is provable: by its bounds, or because a gcd divides all but the constant."""
    lo, hi = _bounds(x)
    if lo > 0 or hi < 0:
        return True
    den = 1
    for _, c in x._terms:
        if type(c) is Fraction:
            den = math.lcm(den, c.denominator)
    g, const = 0, 0
    for m, c in x._terms:
        ci = int(c * den)
        if not m:
            const = ci
        else:
            f = 1
            for a in m:
                if type(a) is str:
                    f *= x._facts[a]
            g = math.gcd(g, ci * f)
    return const % g != 0  # 2*B - 2*L == 1 has no solution


def dim_eq(a: int | Dim, b: int | Dim) -> bool | None:
    """Three-valued equality of two sizes: True, False, or None (cannot tell)."""
    if a is b:
        return True
    a, b = _operand(a), _operand(b)
    if type(a) is int and type(b) is int:
        return a == b
    if isinstance(a, Dim) and isinstance(b, Dim) and a._hash == b._hash \
            and a._terms == b._terms:
        return True
    d = _add(a, _mul(b, -1))
    if not isinstance(d, Dim):
        return d == 0
    return False if _never_zero(d) else None


def dim_lt(a: int | Dim, b: int | Dim) -> bool | None:
    """Three-valued a < b: True, False, or None (cannot tell)."""
    d = _add(_operand(a), _mul(_operand(b), -1))
    if not isinstance(d, Dim):
        return d < 0
    lo, hi = _bounds(d)
    return True if hi < 0 else False if lo >= 0 else None


def dim_le(a: int | Dim, b: int | Dim) -> bool | None:
    """Three-valued a <= b: True, False, or None (cannot tell)."""
    d = _add(_operand(a), _mul(_operand(b), -1))
    if not isinstance(d, Dim):
        return d <= 0
    lo, hi = _bounds(d)
    return True if hi <= 0 else False if lo > 0 else None


def _join(names) -> str:
    names = sorted(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _names_of(*xs) -> frozenset:
    return frozenset().union(*(x._names for x in xs if isinstance(x, Dim)))


def _undecided(err: ShapeError, names: frozenset) -> ShapeError:
    err.undecided = names  # the symbols a narrower range (a shape bucket) might decide
    return err


def _decided(answer: bool | None, a, op: str, b) -> bool:
    if answer is None:
        # (built by a call: a local naming the error would keep this frame, and every
        # tensor the callers hold, alive in a cycle until the garbage collector runs)
        raise _undecided(ShapeError(
            f"cannot tell whether {a} {op} {b}; bind {_join(_names_of(a, b))} or state a fact",
            hint="bind sizes with .subs(...), or declare facts such as Dim('H', "
            "multiple_of=16)"), _names_of(a, b))
    return answer


def _integral(q: Dim) -> bool:
    facts = q._facts
    return all(_term_divisible(m, c, 1, facts) if m else type(c) is int for m, c in q._terms)


def _mono_div(m: tuple, d: tuple) -> tuple | None:
    rest = list(m)
    for a in d:
        try:
            rest.remove(a)
        except ValueError:
            return None
    return tuple(rest)


def _poly_div(a: Dim, b: Dim, facts: dict):
    """a / b by long division in the print (graded lex) order, or None if it leaves a remainder."""
    (lead_m, lead_c), rem, quot = b._terms[0], dict(a._terms), {}
    for _ in range(4 * len(a._terms) + 64):
        if not rem:
            return _build(quot, facts)
        m = min(rem, key=_mono_key)
        r = _mono_div(m, lead_m)
        if r is None:
            return None
        coef = _num(Fraction(rem[m]) / lead_c)
        quot[r] = quot.get(r, 0) + coef
        for mb, cb in b._terms:
            mm = _mono_mul(r, mb)
            v = _num(rem.get(mm, 0) - coef * cb)
            if v:
                rem[mm] = v
            else:
                rem.pop(mm, None)
    return None


def _quotient(a, b) -> tuple:
    """(a / b, True) when exact division is provable, else (None, False or None)."""
    if type(b) is int:
        if b < 0:
            a, b = _mul(a, -1), -b
        if type(a) is int:
            return (a // b, True) if a % b == 0 else (None, False)
        r = _mod(a, b)
        if isinstance(r, Dim):
            return None, None
        return (_scale(a, Fraction(1, b)), True) if r == 0 else (None, False)
    if type(a) is int:
        return (0, True) if a == 0 else (None, None)
    if a._terms == b._terms:
        return 1, True
    a, b, facts = _merge(a, b)
    if not isinstance(a, Dim) or not isinstance(b, Dim):
        return _quotient(a, b)
    q = _poly_div(a, b, facts)
    if type(q) is int or (isinstance(q, Dim) and _integral(q)):
        return q, True
    return None, None


def _suggest(x: Dim, k: int) -> list[str]:
    """Facts that would make every term of x divisible by k (for the first term that is not)."""
    for m, c in x._terms:
        syms = [a for a in m if type(a) is str]
        if not syms or _term_divisible(m, c, k, x._facts):
            continue
        f = math.prod(x._facts[a] for a in syms)
        need = (Fraction(c) * f / k).denominator
        t = next(t for t in range(2, need + 1) if t ** len(syms) % need == 0)
        return [f"Dim({n!r}, multiple_of={x._facts[n] * t})" for n in dict.fromkeys(syms)]
    return []


def exact_div(a: int | Dim, b: int | Dim) -> int | Dim:
    """a / b when exact division is provable; ShapeError naming the missing fact otherwise."""
    a, b = _operand(a), _operand(b)
    if type(b) is int and b == 0:
        raise ShapeError(f"cannot divide {a} by 0")
    q, ok = _quotient(a, b)
    if ok:
        return q
    if ok is False:
        raise ShapeError(f"{a} is not divisible by {b}")
    facts = _suggest(a, abs(b)) if type(b) is int and isinstance(a, Dim) else []
    if facts:
        raise ShapeError(f"cannot tell whether {a} is divisible by {b}; state a fact such as "
                         f"{facts[0]}", hint="declare " + " and ".join(facts))
    raise ShapeError(f"cannot tell whether {a} is divisible by {b}; bind "
                     f"{_join(_names_of(a, b))} or state a fact")


def divides(k: int | Dim, expr: int | Dim) -> bool | None:
    """Three-valued `expr % k == 0`: True, False, or None (cannot tell)."""
    k, expr = _operand(k), _operand(expr)
    if type(k) is int and k == 0:
        return dim_eq(expr, 0)
    return _quotient(expr, k)[1]


# -- making dims ---------------------------------------------------------------------------
def is_symbolic(x) -> bool:
    """True for a Dim, False for an int (or anything else)."""
    return isinstance(x, Dim)


def dims(spec: str, multiple_of: int = 1) -> tuple[Dim, ...]:
    """`dims("B L D")` (or "B, L, D"): one symbol per name."""
    return tuple(Dim(n, multiple_of) for n in re.split(r"[\s,]+", spec.strip()) if n)


def prod(sizes: Iterable[int | Dim]) -> int | Dim:
    """The product of sizes (an int when all are concrete); 1 for none."""
    out = 1
    for s in sizes:
        out = _mul(out, _operand(s))
    return out


def as_dim(x: int | str | Dim) -> int | Dim:
    """An int or Dim as is; a string such as "B", "H*W/256" or "(H-3)//2+1" parsed."""
    if isinstance(x, Dim) or type(x) is int:
        return x
    if isinstance(x, str):
        return _Parser(x).parse()
    if isinstance(x, Integral) and not isinstance(x, bool):
        return int(x)
    raise ShapeError(f"cannot make a dim of {x!r}", hint="use an int, a Dim or a string like 'B'")


_TOKEN = re.compile(r"\s*(?:(\d+)|([^\W\d]\w*)|(\*\*|//|[-+*/%()]))")


class _Parser:
    """Recursive descent over Python's precedence; a `/` by an int states the division is exact."""

    def __init__(self, text: str) -> None:
        self.text, self.toks, pos = text, [], 0
        body = text.rstrip()
        while pos < len(body):
            m = _TOKEN.match(body, pos)
            if m is None:
                self.fail(f"unexpected {body[pos:].lstrip()[:1]!r}")
            num, name, op = m.groups()
            self.toks.append(int(num) if num else Dim(name) if name else op)
            pos = m.end()
        self.i = 0

    def fail(self, why: str):
        raise ShapeError(f"cannot parse dim {self.text!r}: {why}",
                         hint="write sizes like 'B', '3*D', 'H*W/256' or '(H - 3)//2 + 1'")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def parse(self) -> int | Dim:
        if not self.toks:
            self.fail("it is empty")
        try:
            out = self.expr()
        except RecursionError:
            self.fail("too deeply nested")
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()!r}")
        if type(out) is Fraction:
            self.fail(f"{out} is not a whole number")
        return out

    def expr(self):
        out = self.term()
        while self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            out = _add(out, _mul(self.term(), sign))
        return out

    def term(self):
        out = self.unary()
        while self.peek() in ("*", "/", "//", "%"):
            op, rhs = self.take(), self.unary()
            if op == "*":
                out = _mul(out, rhs)
            elif op == "/":
                if not isinstance(rhs, Dim) and not rhs:
                    self.fail("division by zero")
                out = exact_div(out, rhs) if isinstance(rhs, Dim) else _mul(out, Fraction(1) / rhs)
            else:
                out, rhs = self.whole(out), self.whole(rhs)
                if type(rhs) is int and rhs == 0:
                    self.fail("division by zero")
                out = _floordiv_any(out, rhs) if op == "//" else _mod_any(out, rhs)
        return out

    def whole(self, v):
        if type(v) is Fraction:
            self.fail(f"{v} is not a whole number")
        return v

    def unary(self):
        if self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            return _mul(self.unary(), sign)
        base = self.atom()
        if self.peek() == "**":
            self.take()
            e = self.take()
            if type(e) is not int:
                self.fail("an exponent must be a non-negative int")
            out = 1
            for _ in range(e):
                out = _mul(out, base)
            return out
        return base

    def atom(self):
        tok = self.take()
        if tok == "(":
            out = self.expr()
            if self.take() != ")":
                self.fail("missing ')'")
            return out
        if type(tok) is int or isinstance(tok, Dim):
            return tok
        self.fail("unexpected end" if tok is None else f"unexpected {tok!r}")


def _format(terms: tuple) -> str:
    """Terms as people write them: `3*B*L - D + 1`, `H*W/256`, `(H - 3)//2 + 1`."""
    out = []
    for i, (m, c) in enumerate(terms):
        neg = c < 0
        s = _format_term(m, -c if neg else c, lead_neg=neg and i == 0)
        out.append(("-" + s if neg else s) if i == 0 else (" - " if neg else " + ") + s)
    return "".join(out)


def _format_term(m: tuple, c, lead_neg: bool) -> str:
    if not m:
        return str(c)
    num, den = (c, 1) if type(c) is int else (c.numerator, c.denominator)
    # A lone `//`/`%` atom goes bare (`B - H//2`) unless something binds tighter around it:
    # a coefficient, another factor, or a leading minus (`-H//2` is `(-H)//2` in Python).
    bare = num == 1 and den == 1 and len(m) == 1 and not lead_neg
    parts, i = [], 0
    while i < len(m):
        a, e = m[i], 1
        while i + e < len(m) and m[i + e] == a:
            e += 1
        s = a if type(a) is str else str(a) if bare else f"({a})"
        parts.append(s if e == 1 else f"{s}**{e}")
        i += e
    s = "*".join(parts)
    s = s if num == 1 else f"{num}*{s}"
    return s if den == 1 else f"{s}/{den}"
