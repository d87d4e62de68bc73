"""Symbolic dims: printing, simplification by facts, three-valued comparison, parsing."""

import copy
import pickle
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapeflow.errors import ShapeError
from shapeflow.symbolic import (
    Dim,
    as_dim,
    dim_eq,
    dim_le,
    dim_lt,
    dims,
    divides,
    exact_div,
    is_symbolic,
    prod,
)

B, L, D = dims("B L D")
H, W = Dim("H", multiple_of=16), Dim("W", multiple_of=16)
Hp, Wp = Dim("H"), Dim("W")  # the same names without facts


# -- printing ------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, text", [
    (B, "B"),
    (B * L, "B*L"),
    (L * B, "B*L"),
    (3 * D, "3*D"),
    (B * L * 3, "3*B*L"),
    (D + 1, "D + 1"),
    (1 + D, "D + 1"),
    (D - 1, "D - 1"),
    (B - L, "B - L"),
    (-B, "-B"),
    (L - 2 * B, "-2*B + L"),
    (B * L + D, "B*L + D"),
    (B * B * L, "B**2*L"),
    (H * W // 256, "H*W/256"),
    (3 * H * W // 256, "3*H*W/256"),
    (Hp * Wp // 256, "H*W//256"),
    ((Hp - 3) // 2 + 1, "(H - 3)//2 + 1"),
    (Hp // 2, "H//2"),
    (3 * (Hp // 2), "3*(H//2)"),
    (-(Hp // 2), "-(H//2)"),
    (B - Hp // 2, "B - H//2"),
    (Hp % 16, "H % 16"),
    (B * (Hp % 16), "B*(H % 16)"),
    ((-Hp) // 2, "(-H)//2"),
    ((B % 3) // 2, "(B % 3)//2"),
])
def test_printing(expr, text):
    assert str(expr) == text
    assert repr(expr) == text
    assert f"{expr:>20}" == f"{text:>20}"


def test_dims_splits_names_and_states_facts():
    a, b, c = dims("A, Bc  C")
    assert [str(d) for d in (a, b, c)] == ["A", "Bc", "C"]
    assert a.name == "A" and (a * 2).name is None
    assert dims("X Y", multiple_of=8)[1].facts == {"Y": 8}
    assert (H * B).free_names == frozenset({"H", "B"})
    with pytest.raises(ShapeError):
        Dim("2x")
    with pytest.raises(ShapeError):
        Dim("H", multiple_of=0)


# -- simplification ------------------------------------------------------------------------
def test_constants_collapse_to_int():
    assert type(B - B + 3) is int and B - B + 3 == 3
    assert type(B * 0) is int and B * 0 == 0
    assert type(B * L - L * B) is int
    assert type((3 * D) // 3 - D) is int
    assert type(H % 16) is int and H % 16 == 0
    assert type(prod([2, 3, 4])) is int and prod([2, 3, 4]) == 24
    assert prod([]) == 1
    assert str(prod([B, 2, L])) == "2*B*L"


def test_facts_simplify_floor_div_and_mod():
    assert str((H * W) // 256) == "H*W/256"
    assert (H * W) % 16 == 0
    assert (H * W) % 256 == 0
    assert str((Hp * Wp) // 256) == "H*W//256"  # no facts: stays an atom
    assert str(Hp % 16) == "H % 16"
    assert str((3 * D) // 3) == "D"
    assert str((2 * B + L) // 2) == "B + L//2"
    assert str((H + 3) // 16) == "H/16"  # H/16 is whole and 3 < 16
    assert str((B // 2) // 3) == "B//6"
    assert str((B % 32) % 16) == "B % 16"
    assert (Hp % 16) // 16 == 0  # bounds: 0 <= H % 16 < 16
    assert str((Hp % 16) % 32) == "H % 16"
    assert (2 * B + 1) % 2 == 1


def test_same_name_different_facts_take_the_lcm():
    assert Hp == H and hash(Hp) == hash(H)
    assert str(Hp // 16 + H) == "17*H/16"  # meeting H's fact re-simplifies H//16
    assert str((Hp * H) // 256) == "H**2/256"
    assert (Hp * Dim("H", multiple_of=6)).facts == {"H": 6}
    assert (Dim("H", multiple_of=4) + Dim("H", multiple_of=6)).facts == {"H": 12}


# -- three-valued comparison ---------------------------------------------------------------
@pytest.mark.parametrize("a, b, same", [
    (B, B, True),
    (B * L, L * B, True),
    ((B + L) * D, B * D + L * D, True),
    (B, Dim("B"), True),
    (H * W / 256, (H // 16) * (W // 16), True),
    ((3 * D) // 3, D, True),
    (B, B + 1, False),
    (2 * B, B, False),
    (B * L + 1, 0, False),
    (B, -1, False),
    ((Hp - 3) // 2 + 1, -1, False),
    (2 * B, 2 * L + 1, False),
    (H, 2 * W + 8, False),  # H - 2W is a multiple of 16, 8 is not
    (Hp % 16, 16, False),
])
def test_dim_eq_decides(a, b, same):
    assert dim_eq(a, b) is same
    assert (a == b) is same
    assert (a != b) is (not same)


def test_undecidable_equality_raises_in_the_users_names():
    assert dim_eq(H * W / 256, 196) is None
    with pytest.raises(ShapeError) as e:
        _ = H * W / 256 == 196
    assert str(e.value).startswith(
        "cannot tell whether H*W/256 == 196; bind H and W or state a fact")
    assert (H * W / 256).subs(H=224, W=224) == 196
    with pytest.raises(ShapeError, match="cannot tell whether B != L; bind B and L"):
        _ = B != L


def test_ordering_is_three_valued():
    assert B < B + 1 and B + 1 > B and B <= B and B >= 1 and -B < 0
    assert H >= 16 and not (H < 16)
    assert dim_lt(B, L) is None and dim_le(B, B) is True and dim_lt(2 * B, B) is False
    with pytest.raises(ShapeError, match="cannot tell whether B < L"):
        _ = B < L
    assert B in {B: 1} and B in [L * 0 + B]


def test_bool_hash_and_index():
    assert bool(B) and hash(B * L) == hash(L * B)
    assert len({B * L, L * B, B + 0}) == 2
    for bad in (lambda: B.__index__(), lambda: int(B), lambda: range(B)):
        with pytest.raises(ShapeError, match="B is symbolic; bind it"):
            bad()
    np = pytest.importorskip("numpy")
    with pytest.raises(ShapeError):
        np.zeros((B, 3))


def test_is_symbolic_pickle_and_copy():
    assert is_symbolic(B) and not is_symbolic(3)
    e = (Hp - 3) // 2 + H * W / 256
    assert pickle.loads(pickle.dumps(e)) == e
    assert copy.deepcopy(e) is e


# -- evaluation ----------------------------------------------------------------------------
def test_subs_and_evaluate():
    e = (Hp - 3) // 2 + 1
    assert e.subs(H=224) == 111 and type(e.subs(H=224)) is int
    assert str((B * L + D).subs(B=2)) == "D + 2*L"
    assert (B * L).subs(L=2 * D) == 2 * B * D
    assert (B * L).evaluate({"B": 3, "L": 5, "X": 9}) == 15
    assert B.subs(X=1) is B
    with pytest.raises(ShapeError, match="bind L"):
        (B * L).evaluate({"B": 3})
    with pytest.raises(ShapeError, match="breaks the fact H % 16 == 0"):
        H.subs(H=10)
    with pytest.raises(ShapeError, match="positive"):
        B.subs(B=0)
    with pytest.raises(ShapeError, match="not a whole number"):
        as_dim("H/3").subs(H=4)


# -- exact division ------------------------------------------------------------------------
def test_exact_div_success():
    assert str(exact_div(H * W, 256)) == "H*W/256"
    assert str(H * W / 256) == "H*W/256"
    assert exact_div(B * L * D, B * D) == L
    assert exact_div(B * L + B, L + 1) == B
    assert exact_div(6 * B, 3 * B) == 2
    assert str(exact_div(12 * B * L, -4)) == "-3*B*L"
    assert exact_div(12, 4) == 3 and exact_div(0, B) == 0
    assert (3 * D) / 3 == D and 4 * B / 4 == B
    assert divides(16, H) is True and divides(B, B * L) is True
    assert divides(2, 2 * B + 1) is False and divides(2, B) is None


def test_exact_div_failure_names_the_fact():
    with pytest.raises(ShapeError) as e:
        Hp * Wp / 256
    assert e.value.message == ("cannot tell whether H*W is divisible by 256; "
                               "state a fact such as Dim('H', multiple_of=16)")
    assert "Dim('W', multiple_of=16)" in e.value.hint
    with pytest.raises(ShapeError, match=r"multiple_of=2\)"):
        exact_div(B, 2)
    with pytest.raises(ShapeError, match="2\\*B \\+ 1 is not divisible by 2"):
        exact_div(2 * B + 1, 2)
    with pytest.raises(ShapeError, match="cannot tell whether B\\*L is divisible by D"):
        exact_div(B * L, D)
    with pytest.raises(ShapeError, match="not divisible"):
        exact_div(7, 2)
    with pytest.raises(ShapeError):
        exact_div(B, 0)
    with pytest.raises(ZeroDivisionError):
        B // 0


# -- parsing -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expr", [
    ("B", B),
    ("512", 512),
    ("H*W/256", H * W / 256),
    ("3*D", 3 * D),
    ("L+1", L + 1),
    ("(H-3)//2+1", (Hp - 3) // 2 + 1),
    ("-B + 2*L*B", 2 * B * L - B),
    ("B**2 - -L", B * B + L),
    ("H % 16", Hp % 16),
    ("(B*L)/L", B),
])
def test_parse(text, expr):
    got = as_dim(text)
    assert type(got) is type(expr) and got == expr
    assert as_dim(str(got)) == got  # printing round trips


@pytest.mark.parametrize("bad", [
    "", "  ", "B +", "2x", "B $ L", "1.5", "(B", "B)", "B//0", "3/2", "B**L", "B L",
    "__import__('os')", "(" * 5000 + "B" + ")" * 5000,
])
def test_parse_rejects_garbage(bad):
    with pytest.raises(ShapeError, match="cannot parse dim"):
        as_dim(bad)


def test_as_dim_passes_ints_and_dims():
    assert as_dim(3) == 3 and as_dim(B) is B
    with pytest.raises(ShapeError):
        as_dim(1.5)


# -- properties ----------------------------------------------------------------------------
FACTS = {"P": 1, "Q": 4, "R": 6}
# "q" is Q declared without its fact: where the two meet, Q's fact (the lcm) holds.
SYMS = {n: Dim(n, multiple_of=m) for n, m in FACTS.items()} | {"q": Dim("Q")}

leaf = st.one_of(st.sampled_from(sorted(SYMS)), st.integers(-3, 6))
trees = st.recursive(leaf, lambda kids: st.one_of(
    st.tuples(st.sampled_from(["+", "-", "*"]), kids, kids),
    st.tuples(st.sampled_from(["//", "%"]), kids, st.sampled_from([1, 2, 3, 4, 6, 16, -2, -3])),
), max_leaves=7)
envs = st.fixed_dictionaries(
    {n: st.integers(1, 12).map(lambda v, m=m: v * m) for n, m in FACTS.items()}
).map(lambda env: env | {"q": env["Q"]})


def run(tree, env):
    """The tree evaluated with env's values: ints, or Dims."""
    if isinstance(tree, str):
        return env[tree]
    if isinstance(tree, int):
        return tree
    op, a, b = tree
    a = run(a, env)
    b = run(b, env) if op in "+-*" else b
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "//": lambda: a // b, "%": lambda: a % b}[op]()


@given(trees, st.lists(envs, min_size=1, max_size=4))
def test_expressions_evaluate_like_ints(tree, points):
    expr = run(tree, SYMS)
    for env in points:
        want = run(tree, env)
        got = expr.subs(**env) if is_symbolic(expr) else expr
        assert type(got) is int and got == want, (str(expr), env)
        if is_symbolic(expr):
            assert expr.evaluate(env) == want
            # partial substitution, then the rest, agrees too
            assert as_int(expr.subs(P=env["P"]), env) == want
            assert as_dim(str(expr)).subs(**env) == want  # the printed form means the same


def as_int(x, env):
    return x.subs(**env) if is_symbolic(x) else x


@given(trees, trees, st.lists(envs, min_size=3, max_size=8))
def test_comparisons_never_answer_wrongly(t1, t2, points):
    a, b = run(t1, SYMS), run(t2, SYMS)
    eq, lt, le = dim_eq(a, b), dim_lt(a, b), dim_le(a, b)
    for env in points:
        x, y = run(t1, env), run(t2, env)
        assert eq is None or eq == (x == y), (str(a), str(b), env)
        assert lt is None or lt == (x < y), (str(a), str(b), env)
        assert le is None or le == (x <= y), (str(a), str(b), env)
    assert dim_eq(a, a) is True


polys = st.recursive(leaf, lambda kids: st.tuples(st.sampled_from(["+", "-", "*"]), kids, kids),
                     max_leaves=6)


@given(polys, polys, polys)
def test_polynomial_identities_are_decided(t1, t2, t3):
    a, b, c = (run(t, SYMS) for t in (t1, t2, t3))
    assert dim_eq((a + b) * c, a * c + b * c) is True
    assert dim_eq(a * b - b * a, 0) is True
    assert dim_eq(a + b - b, a) is True
    assert dim_eq(a + 1, a) is False


@given(polys, st.integers(1, 12))
def test_exact_div_inverts_multiplication(t, k):
    a = run(t, SYMS)
    assert dim_eq(exact_div(a * k, k), a) is True
    if is_symbolic(a):
        assert dim_eq(exact_div(a * SYMS["P"], SYMS["P"]), a) is True


def test_sympy_agrees_on_polynomials():
    sympy = pytest.importorskip("sympy")
    rng = random.Random(0)
    names = sorted(FACTS)
    sym = {n: sympy.Symbol(n) for n in names}
    for _ in range(200):
        tree = rng.choice(names)
        for _ in range(rng.randint(1, 6)):
            other = rng.choice(names + [rng.randint(-3, 5)])
            tree = (rng.choice("+-*"), tree, other) if rng.random() < 0.5 else \
                (rng.choice("+-*"), other, tree)
        ours = run(tree, SYMS)
        theirs = sympy.expand(run(tree, sym))
        assert sympy.expand(sympy.sympify(str(ours), locals=sym) - theirs) == 0, str(ours)


def test_concrete_training_step_does_no_symbolic_work():
    """Issue 3: without a symbol, shape inference stays on integers (no symbolic.py call)."""
    import sys

    import shapeflow as sf
    from shapeflow.models import GPT, ViT
    from shapeflow.nn import functional as F

    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith("shapeflow/symbolic.py"):
            calls.append(frame.f_code.co_name)

    gpt = GPT(30, 16, 2, 2, 16, dropout=0.1)
    vit = ViT(8, 2, 1, 10, 16, 1, 2)
    idx = sf.randint(0, 30, (2, 16))
    img, y = sf.randn(3, 1, 8, 8), sf.randint(0, 10, (3,))
    sys.setprofile(profile)
    try:
        gpt(idx, idx)[1].backward()
        F.cross_entropy(vit(img), y).backward()
    finally:
        sys.setprofile(None)
    assert calls == []
