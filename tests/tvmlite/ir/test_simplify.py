"""The index simplifier: every rewrite keeps the value of the expression (floor division),
and fused-then-split indices come back together."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tvmlite.ir.expr import BinOp, Cast, Const, Var
from tvmlite.ir.simplify import bound, simplify

F, G = Var("f"), Var("g")


def value(e, env):
    """An integer expression's value with Python's floor semantics (tvmlite's)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    a, b = value(e.a, env), value(e.b, env)
    ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__,
           "%": int.__mod__, "min": min, "max": max}
    return ops[e.op](a, b)


def c(v):
    return Const(v)


def test_a_loop_fused_from_three_axes_indexes_linearly_again():
    # f = fused (h, w, c) of extents (28, 112, 32 / 16 lanes...): the NHWC address of (h, w)
    e = F // c(3136) * c(100352) + F // c(112) % c(28) * c(3584) + F % c(112) * c(32)
    assert str(simplify(e)) == "f * 32"
    # the h coordinate of a tile: (f // 3136) * 28 + (f // 112) % 28 == f // 112
    assert str(simplify(F // c(3136) * c(28) + F // c(112) % c(28) + G)) == "f // 112 + g"


def test_unmatched_parts_stay():
    for e in (F // c(3136) * c(27) + F // c(112) % c(28),      # wrong multiplier
              F // c(100) * c(28) + F // c(112) % c(28),        # not the same block
              F % c(112) * c(32)):                               # no high part
        env = {"f": 12345}
        assert value(simplify(e), env) == value(e, env)
        assert "%" in str(simplify(e))


divisors = st.sampled_from([2, 3, 4, 7, 8, 16, 28, 112])


@st.composite
def fused_sums(draw):
    """k*b*(x // (a*b)) + k*((x // a) % b) [+ noise terms], x a small linear form."""
    a, b = draw(divisors), draw(divisors)
    k = draw(st.integers(-5, 40))
    x = F * c(draw(st.integers(1, 3))) + G * c(draw(st.integers(0, 2))) + c(draw(
        st.integers(-50, 50)))
    inner = x // c(a) if draw(st.booleans()) else x
    a_eff = a if isinstance(inner, BinOp) and inner.op == "//" else 1
    high = x // c(a_eff * b) * c(k * b + draw(st.sampled_from([0, 0, 0, 1])))
    low = inner % c(b) * c(k)
    extra = G * c(draw(st.integers(-3, 3))) + F // c(draw(divisors)) * c(draw(st.integers(0, 2)))
    order = draw(st.permutations([high, low, extra]))
    return order[0] + order[1] - order[2] * c(-1)


@settings(max_examples=300, deadline=None)
@given(fused_sums(), st.integers(-5000, 5000), st.integers(-300, 300))
def test_simplify_keeps_the_value(e, f, g):
    env = {"f": f, "g": g}
    assert value(simplify(e), env) == value(e, env)


L = Var("L")


@settings(max_examples=300, deadline=None)
@given(st.integers(-60, 60), st.integers(-60, 60), st.integers(1, 30), st.integers(0, 30),
       st.sampled_from(["//", "%"]), st.integers(1, 9), st.integers(0, 9))
def test_the_bound_of_a_division_by_a_symbolic_size_holds(lo, span, l_lo, l_span, op, d, k):
    """``f op ((L + k) // d)``: every value in the variables' ranges is inside the bound."""
    lo, hi = min(lo, lo + span), max(lo, lo + span)
    divisor = (L + c(k)) // c(d)
    e = BinOp(op, F, divisor)
    ranges = {"f": (lo, hi), "L": (l_lo, l_lo + l_span)}
    b_lo, b_hi = bound(e, ranges)
    for f in range(lo, hi + 1, max(1, (hi - lo) // 7)):
        for n in range(l_lo, l_lo + l_span + 1, max(1, l_span // 5)):
            if value(divisor, {"L": n}) >= 1:
                assert b_lo <= value(e, {"f": f, "L": n}) <= b_hi


def test_guards_of_a_symbolic_tile_count_that_always_hold_go():
    """A loop over the tiles of a symbolic size: ``i % tiles * 8 >= 0`` always holds."""
    tiles = (L + c(7)) // c(8)
    guard = simplify(BinOp("%", F, tiles) * c(8) >= c(0), {"f": (0, 100), "L": (1, 24)})
    assert isinstance(guard, Const) and guard.value


def test_a_narrow_integer_cast_back_whose_value_fits_goes():
    x = Var("x", "int32")
    q = Cast("int32", Cast("uint8", BinOp("+", x, Const(135, "int32"))))
    # x in [-135, 120]: x + 135 fits uint8, so the round trip is the value itself
    assert simplify(BinOp("-", q, Const(135, "int32")), {"x": (-135, 120)}) == x
    # one past the range: uint8 wraps, the casts stay
    assert isinstance(simplify(q, {"x": (-135, 121)}), Cast)
    assert isinstance(simplify(q, {}), Cast)
    # a float in the middle is not an integer round trip
    f = Cast("int32", Cast("float32", x))
    assert isinstance(simplify(f, {"x": (0, 10)}), Cast)


def test_a_rounded_float_through_int32_and_back_is_itself():
    M = Const(12582912.0, "float32")
    g = BinOp("min", BinOp("max", Var("g", "float32"), Const(-135.0, "float32")),
              Const(120.0, "float32"))
    rounded = BinOp("-", BinOp("+", g, M), M)
    assert simplify(Cast("float32", Cast("int32", rounded))) == rounded
    # unbounded: the sum may land where float32's spacing is above 1, the casts stay
    loose = BinOp("-", BinOp("+", Var("g", "float32"), M), M)
    assert isinstance(simplify(Cast("float32", Cast("int32", loose))), Cast)
