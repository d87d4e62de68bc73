"""Shape contracts: `@sf.shapes("x: B L D, mask: B L -> B L D")` and `sf.check(x, "B L D")`.

A contract names each dim. A name binds on first use within one call and every later use
must agree; an integer must match exactly; an expression (`3*D`, `H*W/256`) is evaluated
from names already bound; `_` matches any one dim; `...` or `*batch` match any number of
dims (a named `*batch` must be the same sequence wherever it appears).
"""

from __future__ import annotations

import functools
import inspect
import re

from ..errors import ShapeError
from ..shape import dims_equal, format_shape

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _tokens(spec: str) -> list[str]:
    return spec.replace(",", " ").split()


def parse_contract(contract: str) -> tuple[list[tuple[str, list[str]]], list[list[str]]]:
    """`"x: B L D, mask: B L -> B L D"` -> ([("x", [...]), ("mask", [...])], [[...]])."""
    if "->" in contract:
        left, right = contract.split("->", 1)
    else:
        left, right = contract, ""
    args = []
    for part in re.split(r",\s*(?=[A-Za-z_][A-Za-z0-9_]*\s*:)", left.strip()):
        if not part.strip():
            continue
        if ":" not in part:
            raise ShapeError(f"contract {contract!r}: argument spec {part!r} needs 'name: dims'")
        name, dims = part.split(":", 1)
        args.append((name.strip(), _tokens(dims)))
    outs = [_tokens(o) for o in right.split("|")] if right.strip() else []
    return args, outs


class Bindings:
    """Names bound so far in one call (dims and `*batch` sequences)."""

    def __init__(self, initial: dict | None = None) -> None:
        self.dims: dict[str, object] = dict(initial or {})
        self.seqs: dict[str, tuple] = {}
        self.where: dict[str, str] = {k: "the module" for k in self.dims}


def _fail(what: str, shape, tokens, message: str, hint: str | None = None) -> ShapeError:
    return ShapeError(
        f"shape contract broken: {message}",
        op="shapes",
        operands=[(what, f"{format_shape(shape)}   expected [{', '.join(tokens)}]")],
        hint=hint,
    )


def _hint(shape, tokens, b: Bindings) -> str | None:
    """Recognise a transposed operand or a missing / extra unit dim."""
    fixed = [t for t in tokens if not (t == "..." or t.startswith("*"))]
    if len(fixed) != len(tokens):
        return None
    expected = [b.dims.get(t) if _NAME.match(t) else None for t in tokens]
    shape = list(shape)
    if len(shape) == len(tokens) and all(e is not None for e in expected):
        for i in range(len(shape)):
            for j in range(i + 1, len(shape)):
                swapped = shape[:]
                swapped[i], swapped[j] = swapped[j], swapped[i]
                if all(dims_equal(s, e) for s, e in zip(swapped, expected)):
                    return (f"dims {i} and {j} look swapped: got [{', '.join(map(str, shape))}]"
                            f" where [{', '.join(tokens)}] fits; try .transpose({i}, {j})")
    if len(shape) + 1 == len(tokens) and tokens[-1] == "1":
        return "a unit dim is missing at the end: try .unsqueeze(-1)"
    if len(shape) == len(tokens) + 1 and shape[-1] == 1:
        return "there is an extra unit dim at the end: try .squeeze(-1)"
    return None


def match(what: str, shape, tokens: list[str], b: Bindings) -> None:
    """Check one shape against one dims spec, binding names in `b`."""
    from ..symbolic import as_dim

    shape = tuple(shape)
    var = [i for i, t in enumerate(tokens) if t == "..." or t.startswith("*")]
    if len(var) > 1:
        raise ShapeError(f"contract for {what}: only one '...' or '*name' is allowed")
    if var:
        v = var[0]
        n_after = len(tokens) - v - 1
        if len(shape) < len(tokens) - 1:
            raise _fail(what, shape, tokens, f"{what} has {len(shape)} dims, the contract needs at "
                        f"least {len(tokens) - 1}", _hint(shape, tokens, b))
        head, mid = shape[:v], shape[v:len(shape) - n_after]
        tail = shape[len(shape) - n_after:]
        name = tokens[v][1:] if tokens[v].startswith("*") else None
        if name:
            seen = b.seqs.get(name)
            if seen is None:
                b.seqs[name] = mid
                b.where[name] = what
            elif len(seen) != len(mid) or not all(dims_equal(x, y) for x, y in zip(seen, mid)):
                raise _fail(what, shape, tokens, f"*{name} is {format_shape(mid)} in {what} but "
                            f"{format_shape(seen)} in {b.where[name]}")
        pairs = list(zip(head, tokens[:v])) + list(zip(tail, tokens[v + 1:]))
    else:
        if len(shape) != len(tokens):
            raise _fail(what, shape, tokens, f"{what} has {len(shape)} dims, the contract names "
                        f"{len(tokens)}", _hint(shape, tokens, b))
        pairs = list(zip(shape, tokens))
    for size, tok in pairs:
        if tok == "_":
            continue
        if _NAME.match(tok):
            if tok not in b.dims:
                b.dims[tok] = size
                b.where[tok] = what
                continue
            expected, source = b.dims[tok], b.where[tok]
        else:
            try:
                expected = as_dim(tok)
                if not isinstance(expected, int):
                    expected = expected.subs(**{k: v for k, v in b.dims.items()
                                                if isinstance(k, str)})
            except ShapeError:
                raise
            source = "the contract"
        same = dims_equal(size, expected)
        if same:
            continue
        rule = (f"{tok} = {expected} from {source} but {what} has {size}" if same is False else
                f"cannot tell whether {size} == {expected} ({tok} in {what})")
        raise _fail(what, shape, tokens, rule, _hint(shape, tokens, b))


def check(x, spec: str, **bindings) -> dict:
    """Assert x's shape fits `spec` ("B L D"); return the bound names. Raises ShapeError."""
    b = Bindings(bindings)
    match("x", x.shape, _tokens(spec), b)
    return b.dims


def shapes(contract: str, **attr_dims):
    """Decorator checking a function's (or a forward method's) arguments and result.

    `attr_dims` bind names to attributes of `self`: `@shapes("x: B L D -> B L D", D="dim")`.
    """
    args_spec, out_specs = parse_contract(contract)

    def decorate(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            initial = {}
            if attr_dims:
                self = next(iter(bound.arguments.values()))
                initial = {name: getattr(self, attr) for name, attr in attr_dims.items()}
            b = Bindings(initial)
            for name, tokens in args_spec:
                if name not in bound.arguments:
                    raise ShapeError(f"contract names {name!r}, which {fn.__qualname__} lacks")
                value = bound.arguments[name]
                if value is not None:
                    match(name, value.shape, tokens, b)
            out = fn(*args, **kwargs)
            outs = out if isinstance(out, tuple) and len(out_specs) > 1 else (out,)
            for i, tokens in enumerate(out_specs):
                match("result" if len(out_specs) == 1 else f"result {i}", outs[i].shape,
                      tokens, b)
            return out

        wrapper.__shape_contract__ = contract
        return wrapper

    return decorate
