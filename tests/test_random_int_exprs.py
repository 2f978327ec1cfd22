"""Random integer expressions over values with facts (a thread id, the variable of a serial
loop with constant or per-thread bounds or of an unrolled loop, lets inside and outside the
loop, a scalar parameter, loaded data), stored, used as table indices and as branch
conditions, in int32, int64 and uint32, run in tests/support/ptxsim.py against a Python
model of the same program.  The simplifier rewrites with the facts it knows (bounds,
divisibility), so a rewrite that is wrong for some value in range shows up as a wrong
element.  Draws with an intermediate outside the dtype's range or a division by zero are
discarded (the model raises _Outside): there the rewrites may differ."""
import random

import numpy as np
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen as pg
from support import ptxsim

T = 32            # threads
N_EXPR = 4        # expressions per program, each stored once per thread and per iteration
MAX_TRIPS = 12    # iterations of the loop at most (a draw with more is discarded)
TABLE = 64        # entries of the lookup table an expression indexes
DTYPES = {"int32": (np.int32, range(-2**31, 2**31)), "int64": (np.int64, range(-2**63, 2**63)),
          "uint32": (np.uint32, range(0, 2**32))}


class _Outside(Exception):
    """An intermediate value left its dtype's range, or a divisor was 0."""


def _floordiv(a, b):
    if b == 0:
        raise _Outside
    return a // b


def _floormod(a, b):
    if b == 0:
        raise _Outside
    return a % b


BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "//": _floordiv, "%": _floormod, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
          "^": lambda a, b: a ^ b, "min": min, "max": max}
TRACED = dict(BINARY, **{"//": lambda a, b: a // b, "%": lambda a, b: a % b, "min": pg.min,
                         "max": pg.max})
COMPARE = {"<": (lambda a, b: a < b), "<=": (lambda a, b: a <= b), "==": (lambda a, b: a == b),
           "!=": (lambda a, b: a != b), ">": (lambda a, b: a > b), ">=": (lambda a, b: a >= b)}
CONSTS = [0, 1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 32, 64, 100, -1, -2, -3, -4, -8, -16, -7]
DIVISORS = [1, 2, 3, 4, 5, 7, 8, 16, 32, 64, -1, -2, -3, -4, -8]


def gen_expr(rnd, atoms, depth, signed=True):
    """A random expression tree over the atom names (unsigned: no negative constants, whose
    wrapped value the model would not see)."""
    consts = CONSTS if signed else [c for c in CONSTS if c >= 0]
    if depth == 0 or rnd.random() < 0.25:
        return ("atom", rnd.choice(atoms)) if rnd.random() < 0.8 else ("const", rnd.choice(consts))
    kind = rnd.random()
    a = gen_expr(rnd, atoms, depth - 1, signed)
    if kind < 0.55:
        op = rnd.choice(list(BINARY))
        if op in ("//", "%"):
            divisors = DIVISORS if signed else [d for d in DIVISORS if d > 0]
            b = ("const", rnd.choice(divisors)) if rnd.random() < 0.7 else \
                gen_expr(rnd, atoms, depth - 1, signed)
        else:
            b = gen_expr(rnd, atoms, depth - 1, signed) if rnd.random() < 0.6 else \
                ("const", rnd.choice(consts))
        return ("bin", op, a, b)
    if kind < 0.7:
        return ("shift", rnd.choice("<>"), a, rnd.randint(0, 5))
    if kind < 0.85:
        return ("select", rnd.choice(list(COMPARE)), a, gen_expr(rnd, atoms, depth - 1, signed),
                gen_expr(rnd, atoms, depth - 1, signed), gen_expr(rnd, atoms, depth - 1, signed))
    return ("table", a)     # TABLE entries read at a % TABLE: an index the facts must bound


def evaluate(e, env, table, limits):
    tag = e[0]
    if tag == "atom":
        v = env[e[1]]
    elif tag == "const":
        v = e[1]
    elif tag == "bin":
        v = BINARY[e[1]](evaluate(e[2], env, table, limits), evaluate(e[3], env, table, limits))
    elif tag == "shift":
        a = evaluate(e[2], env, table, limits)
        v = a << e[3] if e[1] == "<" else a >> e[3]
    elif tag == "select":
        c = COMPARE[e[1]](evaluate(e[2], env, table, limits), evaluate(e[3], env, table, limits))
        t, f = evaluate(e[4], env, table, limits), evaluate(e[5], env, table, limits)
        v = t if c else f   # the kernel computes both sides: both must be in range
    else:
        v = int(table[evaluate(e[1], env, table, limits) % TABLE])
    if v not in limits:
        raise _Outside
    return v


def trace(e, env, table):
    tag = e[0]
    if tag == "atom":
        return env[e[1]]
    if tag == "const":   # int32 programs fold Python ints; the others' constants are typed
        return e[1] if env["dt"] == "int32" else getattr(pg, env["dt"])(e[1])
    if tag == "bin":
        a, b = trace(e[2], env, table), trace(e[3], env, table)
        if type(a) is int and type(b) is int:   # Python ints fold in Python
            return BINARY[e[1]](a, b)
        return TRACED[e[1]](a, b)
    if tag == "shift":
        a = trace(e[2], env, table)
        return a << e[3] if e[1] == "<" else a >> e[3]
    if tag == "select":
        a, b = trace(e[2], env, table), trace(e[3], env, table)
        t, f = trace(e[4], env, table), trace(e[5], env, table)
        if type(a) is int and type(b) is int:
            return t if COMPARE[e[1]](a, b) else f
        return pg.select(COMPARE[e[1]](a, b), t, f)
    return table[trace(e[1], env, table) % TABLE]


def draw_program(seed):
    """A loop (serial with constant or per-thread bounds, or unrolled) holding a let of its
    variable, N_EXPR stored expressions and a guarded store, after a let outside it."""
    rnd = random.Random(seed)
    dt = rnd.choice(list(DTYPES))
    signed = dt != "uint32"
    loop = rnd.choice(["serial", "serial", "unroll"])
    step = rnd.choice([1, 1, 2, 3, 4, 7])   # loops count up (a negative step is refused)
    if loop == "serial" and rnd.random() < 0.5:   # bounds that differ per thread
        lo = gen_expr(rnd, ["tx", "n", "x"], 1, signed)
        hi = ("bin", "+", lo, ("const", rnd.randint(0 if signed else 1, MAX_TRIPS - 1)))
        if rnd.random() < 0.3:
            hi = ("bin", "+", ("atom", "n"), ("const", rnd.randint(0, MAX_TRIPS - 1)))
    else:
        lo = ("const", rnd.randint(-6 if signed else 0, 6))
        hi = ("const", lo[1] + step * rnd.randint(1, 4))
    atoms = ["tx", "n", "x", "i", "v", "w"]
    return dict(
        dt=dt, loop=loop, lo=lo, hi=hi, step=step,
        let=gen_expr(rnd, ["tx", "n", "x"], 2, signed),
        inner_let=gen_expr(rnd, ["tx", "n", "i", "v"], 2, signed),
        exprs=[gen_expr(rnd, atoms, rnd.randint(1, 3), signed) for _ in range(N_EXPR)],
        cond=(rnd.choice(list(COMPARE)), gen_expr(rnd, atoms, 2, signed),
              gen_expr(rnd, atoms, 1, signed)),
        n=rnd.choice([-9, -5, -3, -1, 1, 2, 3, 7, 16] if signed else [1, 2, 3, 7, 16]))


def draw_data(p, seed):
    rng = np.random.default_rng(seed)
    npdt = DTYPES[p["dt"]][0]
    lo = 0 if p["dt"] == "uint32" else -100
    x = rng.integers(lo, 100, T)
    if p["dt"] == "int64":   # some values past 32 bits
        x = np.where(rng.random(T) < 0.3, x * 2**33 + 5, x)
    return x.astype(npdt), rng.integers(lo // 2, 50, TABLE).astype(npdt)


def model(p, x, table):
    """out[it, k, t]: expression k of thread t at iteration it (k = N_EXPR: `it` where the
    branch is taken); None for an element nothing stores (the kernel leaves the poison)."""
    limits = DTYPES[p["dt"]][1]
    out = np.full((MAX_TRIPS, N_EXPR + 1, T), None, object)
    for t in range(T):
        env = {"tx": t, "n": p["n"], "x": int(x[t])}
        env["v"] = evaluate(p["let"], env, table, limits)
        trips = range(evaluate(p["lo"], env, table, limits),
                      evaluate(p["hi"], env, table, limits), p["step"])
        if len(trips) > MAX_TRIPS:
            raise _Outside
        # the body is also evaluated at i = start when the loop does not run: a divisor that
        # is always 0 is a trace-time error even in a body that never runs
        for it, i in enumerate(trips or [trips.start]):
            env["i"] = i
            env["w"] = evaluate(p["inner_let"], env, table, limits)
            values = [evaluate(e, env, table, limits) for e in p["exprs"]]
            op, a, b = p["cond"]
            taken = COMPARE[op](evaluate(a, env, table, limits), evaluate(b, env, table, limits))
            if trips:
                out[it, :N_EXPR, t] = values
                if taken:
                    out[it, N_EXPR, t] = it
    return out


def kernel(p):
    dt = p["dt"]

    @pg.kernel(grid=(1,), block=(T,))
    def random_int_exprs(X: pg.Tensor((T,), dt), Tab: pg.Tensor((TABLE,), dt),
                         Out: pg.Tensor((MAX_TRIPS, N_EXPR + 1, T), dt), n: getattr(pg, dt)):
        tx = pg.thread_id(T)
        env = {"dt": dt, "tx": tx if dt == "int32" else pg.cast(tx, dt), "n": n, "x": X[tx]}
        env["v"] = pg.let(trace(p["let"], env, Tab), dt)
        it = pg.local_scalar(dt, 0)
        loop = pg.serial if p["loop"] == "serial" else pg.unroll
        lo, hi = p["lo"], p["hi"]
        if lo[0] == hi[0] == "const":   # constant bounds: an int32 variable (cast below)
            bounds = lo[1], hi[1]
        else:
            bounds = trace(lo, env, Tab), trace(hi, env, Tab)
        for i in loop(*bounds, p["step"]):
            env["i"] = i if isinstance(i, int) or i.dtype.name == dt else pg.cast(i, dt)
            env["w"] = pg.let(trace(p["inner_let"], env, Tab), dt)
            for k, e in enumerate(p["exprs"]):
                Out[it, k, tx] = trace(e, env, Tab)
            op, a, b = p["cond"]
            c = COMPARE[op](trace(a, env, Tab), trace(b, env, Tab))
            if isinstance(c, bool):
                if c:
                    Out[it, N_EXPR, tx] = it
            else:
                with pg.if_(c):
                    Out[it, N_EXPR, tx] = it
            it += 1
    return random_int_exprs


def run(p, x, table):
    """The kernel's Out, poisoned first, as Python ints (None where the poison is left)."""
    npdt = DTYPES[p["dt"]][0]
    poison = np.array(-7).astype(npdt)
    out = np.full((MAX_TRIPS, N_EXPR + 1, T), poison, npdt)
    ptxsim.run(kernel(p), [x, table, out], [p["n"]])
    return np.array([None if v == poison else int(v) for v in out.ravel()],
                    object).reshape(out.shape)


def same(got, want):
    """Equal where the model stores; where it does not, the kernel left the poison (None).
    A stored value equal to the poison reads as None: it must be the model's -7 then."""
    return all(g == w or (g is None and w == -7) for g, w in zip(got.ravel(), want.ravel()))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_random_integer_expressions_match_python(seed):
    p = draw_program(seed)
    x, table = draw_data(p, seed)
    try:
        want = model(p, x, table)
    except _Outside:
        assume(False)
    got = run(p, x, table)
    assert same(got, want), (p, np.argwhere(got != want)[:4])


def test_the_model_sees_a_wrong_simplification():
    """The property can fail: the same program with one constant changed in the kernel but
    not in the model gives a different table."""
    p = dict(dt="int32", loop="serial", lo=("const", 0), hi=("const", 3), step=1,
             let=("atom", "tx"), inner_let=("atom", "i"),
             exprs=[("bin", "%", ("atom", "w"), ("const", 2))] * N_EXPR,
             cond=("<", ("atom", "tx"), ("const", 4)), n=3)
    x, table = np.zeros(T, np.int32), np.arange(TABLE, dtype=np.int32)
    want = model(p, x, table)
    wrong = dict(p, exprs=[("bin", "%", ("atom", "w"), ("const", 3))] * N_EXPR)
    assert not same(run(wrong, x, table), want)
    assert same(run(p, x, table), want)
